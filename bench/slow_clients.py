"""Slow clients against plain gunicorn and against `make serve`'s stack (nginx in front).

Attackers open connections on loopback and trickle a request, one byte a second: its
headers (``headers``), or the body of a POST after complete headers (``body``). One
normal client meanwhile asks for a list page after another, and a probe asks /healthz
twice a second; each records its answers and how long they took.

    python bench/slow_clients.py                                  # 50 connections, 30 s each
    python bench/slow_clients.py --connections 50 --duration 30 --attack headers body

Everything is bounded: at most 200 attacking connections, 120 s per attack, loopback
only. The database is a fresh one on the local PostgreSQL server (dropped after), or
``--database-url``. The tests import ``Serve``, ``Trickle`` and ``Probe`` for shorter runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.servers import BIN, LIST, ROOT, Gunicorn, free_port, prepare, request  # noqa: E402

MAX_CONNECTIONS = 200
MAX_SECONDS = 120
LOOPBACK = "127.0.0.1"


class Serve:
    """`python -m commentsvc.operations.serving` (what `make serve` runs) on a free loopback port,
    its runtime files in a directory of its own."""

    def __init__(self, database_url: str, workers: int = 2, env: dict | None = None,
                 args: tuple[str, ...] = (), cwd: Path = ROOT):
        self.port = free_port()
        self.base = f"http://{LOOPBACK}:{self.port}"
        parent = Path(tempfile.mkdtemp(prefix="commentsvc-bench-serve-"))
        parent.chmod(0o711)  # as root, nginx's workers (nobody) go through it to the socket
        self.runtime_dir = parent / "run"
        environ = {**os.environ, "DATABASE_URL": database_url,
                   "COMMENTSVC_POST_RATE_LIMIT": "", **(env or {})}
        self.log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [str(BIN / "python"), "-m", "commentsvc.operations.serving", "--host", LOOPBACK,
             "--port", str(self.port), "--workers", str(workers),
             "--runtime-dir", str(self.runtime_dir), *args],
            cwd=cwd, env=environ, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while request(self.base, "GET", "/healthz", timeout=2).status != 200:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the stack did not start:\n{self.output()}")
            time.sleep(0.2)

    @property
    def pid(self) -> int:
        return self.process.pid

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def stop(self, signum: int = signal.SIGTERM) -> int:
        """Stop the launcher (and with it nginx and gunicorn); its exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signum)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def __enter__(self) -> Serve:
        return self

    def __exit__(self, *_exc) -> None:
        self.stop()
        self.log.close()
        shutil.rmtree(self.runtime_dir.parent, ignore_errors=True)


def trickled_request(kind: str, host: str) -> bytes:
    """The bytes an attacker sends one at a time: a request whose headers, or whose body,
    would take minutes to arrive."""
    if kind == "headers":
        return (f"GET {LIST} HTTP/1.1\r\nHost: {host}\r\n".encode()
                + b"".join(f"X-Slow-{n}: {'x' * 20}\r\n".encode() for n in range(40)) + b"\r\n")
    body = b'{"content_type": "users.user", "object_id": 1, "body": "' + b"x" * 500 + b'"}'
    return (f"POST {LIST} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


@dataclass
class Trickle:
    """``connections`` attackers sending ``kind`` requests a byte a second, each opening
    a new connection whenever the server closes one, until stopped."""

    port: int
    kind: str
    connections: int
    opened: int = 0
    closed_by_server: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> Trickle:
        if not 0 < self.connections <= MAX_CONNECTIONS:
            raise ValueError(f"between 1 and {MAX_CONNECTIONS} connections")
        for _ in range(self.connections):
            thread = threading.Thread(target=self._attacker, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=5)

    def _attacker(self) -> None:
        payload = trickled_request(self.kind, f"{LOOPBACK}:{self.port}")
        while not self._stop.is_set():
            try:
                sock = socket.create_connection((LOOPBACK, self.port), timeout=2)
            except OSError:
                self._stop.wait(0.2)
                continue
            with self._lock:
                self.opened += 1
            try:
                head = payload.index(b"\r\n\r\n") + 4 if self.kind == "body" else 0
                sock.sendall(payload[:head])
                for index in range(head, len(payload)):
                    if self._stop.wait(1):
                        break
                    sock.sendall(payload[index:index + 1])
            except OSError:
                with self._lock:
                    self.closed_by_server += 1
            finally:
                sock.close()


@dataclass
class Probe:
    """One client asking ``path`` over and over (a new connection each time, ``pause``
    seconds apart), recording each answer's status (0: none) and time."""

    base: str
    path: str
    pause: float
    timeout: float = 30
    answers: list[tuple[int, float]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Probe:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.timeout + 5)

    def _run(self) -> None:
        while not self._stop.is_set():
            answer = request(self.base, "GET", self.path, timeout=self.timeout)
            self.answers.append((answer.status, answer.elapsed))
            self._stop.wait(self.pause)

    def summary(self) -> dict:
        times = sorted(elapsed for _status, elapsed in self.answers)
        return {"sent": len(self.answers),
                "answers_by_status": dict(sorted(Counter(
                    str(status or "none") for status, _elapsed in self.answers).items())),
                "p50_s": round(statistics.median(times), 3) if times else None,
                "p99_s": round(percentile(times, 0.99), 3) if times else None,
                "max_s": round(times[-1], 3) if times else None}


def percentile(ordered: list[float], share: float) -> float:
    """The nearest-rank percentile of an ordered list."""
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered) + 0.5) - 1))]


def attack(base: str, port: int, kind: str, connections: int, seconds: float) -> dict:
    """``connections`` trickling attackers for ``seconds`` against the server on ``port``,
    with a normal client and a /healthz probe; what each saw."""
    seconds = min(seconds, MAX_SECONDS)
    trickle = Trickle(port, kind, connections).start()
    time.sleep(1)  # the attackers hold their connections before the clients come
    normal = Probe(base, f"{LIST}?page_size=10", pause=0.1).start()
    health = Probe(base, "/healthz", pause=0.5).start()
    time.sleep(seconds)
    trickle.stop()
    normal.stop()
    health.stop()
    return {"attack": kind, "connections": connections, "seconds": seconds,
            "attacker_connections_opened": trickle.opened,
            "normal_client": normal.summary(), "healthz": health.summary()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--duration", type=float, default=30)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--attack", nargs="+", choices=("headers", "body"),
                        default=["headers", "body"])
    parser.add_argument("--stack", nargs="+", choices=("gunicorn", "serve"),
                        default=["gunicorn", "serve"])
    parser.add_argument("--database-url", help="default: a fresh database on --admin-url")
    parser.add_argument("--admin-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    if not 0 < args.connections <= MAX_CONNECTIONS or not 0 < args.duration <= MAX_SECONDS:
        parser.error(f"at most {MAX_CONNECTIONS} connections and {MAX_SECONDS} seconds")

    admin = name = None
    url = args.database_url
    if url is None:
        name = f"commentsvc_slow_{uuid.uuid4().hex[:8]}"
        admin = sa.create_engine(args.admin_url, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        url = admin.url.set(database=name).render_as_string(hide_password=False)
    results = []
    try:
        prepare(url, comments=2000)
        for stack in args.stack:
            for kind in args.attack:
                server_class = Gunicorn if stack == "gunicorn" else Serve
                with server_class(url, workers=args.workers) as server:
                    result = attack(server.base, server.port, kind, args.connections,
                                    args.duration)
                results.append({"stack": stack, **result})
                print(json.dumps(results[-1]), flush=True)
    finally:
        if admin is not None:
            with admin.connect() as conn:
                conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.dispose()
    print_table(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


def print_table(results: list[dict]) -> None:
    print(f"\n{'stack':9} {'attack':8} {'client':7} {'sent':>5} {'answers by status':28} "
          f"{'p50 s':>7} {'p99 s':>7} {'max s':>7}")
    for result in results:
        for who in ("normal_client", "healthz"):
            seen = result[who]
            statuses = " ".join(f"{k}:{v}" for k, v in seen["answers_by_status"].items())
            print(f"{result['stack']:9} {result['attack']:8} {who[:7]:7} {seen['sent']:>5} "
                  f"{statuses:28} {seen['p50_s']!s:>7} {seen['p99_s']!s:>7} "
                  f"{seen['max_s']!s:>7}")


if __name__ == "__main__":
    sys.exit(main())
