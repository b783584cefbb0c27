"""A loopback TCP relay the tests can break in the ways networks break, to play a database
going away:

- ``cut()`` / ``restore()``: refuse new connections and close every open one on both
  sides, like a server that stopped;
- ``break_connections(silently=True)``: the service's side is reset but the server is
  never told (a NAT or firewall that dropped the flow, a pooler that restarted): the
  server's end stays open, as a half-open connection does until TCP keepalives, which
  default to two hours;
- ``cut_every(seconds, silently)``: that, over and over, until ``stop_cutting()``;
- ``freeze()`` / ``thaw()``: nothing passes either way and nothing is closed (a stalled
  link).
"""

from __future__ import annotations

import socket
import threading


class TcpProxy:
    """Relays 127.0.0.1:<port> to a target address until ``cut()``; ``restore()`` reopens."""

    def __init__(self, target_host: str, target_port: int):
        self.target = (target_host, target_port)
        self.port = _free_port()
        self._listener: socket.socket | None = None
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._abandoned: list[socket.socket] = []  # server ends of silently cut pairs
        self._lock = threading.Lock()
        self._flowing = threading.Event()
        self._flowing.set()
        self._cutting: threading.Event | None = None

    def restore(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        """Refuse new connections and break every open one, like a database that stopped;
        server ends left open by silent cuts are closed too."""
        with self._lock:
            if self._listener:
                try:
                    self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
                except OSError:
                    pass
                self._listener.close()
                self._listener = None
            abandoned, self._abandoned = self._abandoned, []
        self.break_connections()
        for sock in abandoned:
            _close(sock)

    def break_connections(self, silently: bool = False) -> None:
        """Break every open connection (the listener stays). ``silently``: only the
        service's side is closed; the server's end stays open and hears nothing."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
            if silently:
                self._abandoned += [upstream for _, upstream in pairs]
        for client, upstream in pairs:
            _close(client)
            if not silently:
                _close(upstream)

    def cut_every(self, seconds: float, silently: bool = False) -> None:
        """``break_connections(silently)`` every ``seconds`` until ``stop_cutting()``
        (not while frozen: a frozen link carries no close either)."""
        self.stop_cutting()
        self._cutting = stop = threading.Event()

        def loop() -> None:
            while not stop.wait(seconds):
                if self._flowing.is_set():
                    self.break_connections(silently)

        threading.Thread(target=loop, daemon=True).start()

    def stop_cutting(self) -> None:
        if self._cutting is not None:
            self._cutting.set()
            self._cutting = None

    def freeze(self) -> None:
        """Carry nothing (no bytes, no new connections) until ``thaw()``; close nothing."""
        self._flowing.clear()

    def thaw(self) -> None:
        self._flowing.set()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            self._flowing.wait()
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._pairs.append((client, upstream))
            threading.Thread(target=self._pipe, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                self._flowing.wait()
                data = source.recv(65536)
                if not data:
                    break
                self._flowing.wait()
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with self._lock:
                abandoned = set(self._abandoned)
            for sock in (source, sink):
                if sock not in abandoned:  # a silently cut server end hears nothing
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
