"""A real webhook receiver for tests and benchmarks: an HTTP server on a loopback port
that checks each delivery's signature (commentsvc.webhooks.verify) and keeps what arrived.

    with WebhookReceiver(SECRET) as receiver:
        receiver.url                    # where the deliverer POSTs
        receiver.fail_with = 500        # answer every delivery with this status
        receiver.delay = 2.0            # answer only after this many seconds
        receiver.stop(); receiver.start()   # down for a while, back on the same port
        receiver.events()               # every verified event, in arrival order
        receiver.received               # each with its headers and path (query included)

A delivery whose signature does not verify is answered 400 and kept in ``rejected``.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from commentsvc.webhooks import InvalidSignature, verify


class WebhookReceiver:
    def __init__(self, secret: str, path: str = "/hooks/comments") -> None:
        self.secret = secret
        self.path = path
        self.fail_with: int | None = None
        self.delay = 0.0
        self.received: list[dict[str, Any]] = []  # {"event", "headers", "at"}
        self.rejected: list[str] = []
        self.requests = 0
        self.in_flight = 0  # deliveries being answered right now
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.path}"

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - the http.server spelling
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver._lock:
                    receiver.requests += 1
                    receiver.in_flight += 1
                try:
                    self._answer(body)
                finally:
                    with receiver._lock:
                        receiver.in_flight -= 1

            def _answer(self, body: bytes) -> None:
                if receiver.delay:
                    time.sleep(receiver.delay)
                status = receiver.fail_with
                if status is None:
                    try:
                        event = verify(receiver.secret, self.headers, body)
                    except InvalidSignature as exc:
                        with receiver._lock:
                            receiver.rejected.append(str(exc))
                        status = 400
                    else:
                        with receiver._lock:
                            receiver.received.append({"event": event,
                                                      "headers": dict(self.headers),
                                                      "path": self.path,
                                                      "at": time.monotonic()})
                        status = 204
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                except OSError:
                    pass  # the sender went away (killed mid-send): it will send again

            def log_message(self, *_args: Any) -> None:
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop answering: the port is closed (connections are refused) until ``start``."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def events(self) -> list[dict[str, Any]]:
        with self._lock:
            return [item["event"] for item in self.received]

    def ids(self) -> list[str]:
        return [event["id"] for event in self.events()]

    def wait_for(self, count: int, seconds: float = 30.0) -> list[dict[str, Any]]:
        """The events once ``count`` distinct ones arrived (AssertionError after ``seconds``)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if len(set(self.ids())) >= count:
                return self.events()
            time.sleep(0.05)
        raise AssertionError(f"{len(set(self.ids()))} of {count} events arrived")

    def __enter__(self) -> WebhookReceiver:
        self.start()
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.stop()
