"""The service as a client sees it: gunicorn (with gunicorn.conf.py) on a free loopback
port, one request on a new connection that never raises, and a database seeded through
the CLI with signed-in users. Real processes and sockets, so that tests and benchmarks
measure what production runs rather than Flask's test client.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

from commentsvc.storage.database_urls import normalise_url

ROOT = Path(__file__).resolve().parent.parent  # the checkout: gunicorn.conf.py, wsgi.py, app.py
BIN = Path(sys.executable).parent
LIST = "/api/comments/"
# The local PostgreSQL server, as an administrator: where scratch databases are made.
ADMIN_URL = normalise_url("postgresql://postgres@127.0.0.1:5432/postgres")


@contextmanager
def scratch_database(prefix: str, admin: sa.Engine | None = None) -> Iterator[str]:
    """The URL of a new database named ``prefix`` and a random suffix, on the server of
    ``admin`` (an engine in autocommit; default: the local PostgreSQL server), dropped
    afterwards (with any connection still open to it)."""
    server = admin or sa.create_engine(ADMIN_URL, isolation_level="AUTOCOMMIT")
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with server.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield server.url.set(database=name).render_as_string(hide_password=False)
    finally:
        with server.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if admin is None:
            server.dispose()


@contextmanager
def silent_database() -> Iterator[str]:
    """The URL of a PostgreSQL server that takes connections (the kernel does) and never
    answers, as a frozen one does."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        yield f"postgresql://postgres@127.0.0.1:{silent.getsockname()[1]}/comments"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Gunicorn:
    """The service under gunicorn (gunicorn.conf.py) on a free loopback port; ``args`` are
    more command-line options (they override the file's). Started once its workers run
    and ``ready`` answers 200; with ``ready=None`` once they run and the port accepts
    connections, so the caller's requests are the workers' first."""

    def __init__(self, database_url: str, workers: int = 2, env: dict | None = None,
                 args: tuple[str, ...] = (), ready: str | None = LIST):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        environ = {**os.environ, "DATABASE_URL": database_url,
                   "COMMENTSVC_POST_RATE_LIMIT": "", **(env or {})}
        self.log = tempfile.TemporaryFile()  # the workers' warnings (a 503 logs one)
        self.process = subprocess.Popen(
            [str(BIN / "gunicorn"), "--config", str(ROOT / "gunicorn.conf.py"),
             "--bind", f"127.0.0.1:{self.port}", "--workers", str(workers),
             "--log-level", "warning", *args, "wsgi:app"],
            cwd=ROOT, env=environ, stderr=self.log)
        deadline = time.monotonic() + 30
        while len(self.workers()) < workers or not self._ready(ready):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("gunicorn did not start")
            time.sleep(0.2)

    def _ready(self, path: str | None) -> bool:
        if path is not None:
            return request(self.base, "GET", path).status == 200
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        except OSError:
            return False
        return True

    @property
    def pid(self) -> int:
        return self.process.pid

    def workers(self) -> set[int]:
        """Pids of the master's worker processes now."""
        found = subprocess.run(["ps", "-o", "pid=", "--ppid", str(self.pid)],
                               capture_output=True, text=True).stdout.split()
        return {int(pid) for pid in found}

    def signal(self, signum: int) -> None:
        os.kill(self.pid, signum)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()

    def __enter__(self) -> Gunicorn:
        return self

    def __exit__(self, exc_type, *_exc) -> None:
        if exc_type is not None:  # what the server said, beside the failure
            self.log.seek(0)
            sys.stderr.write(self.log.read().decode("utf-8", "replace")[-20000:])
        self.stop()


@dataclass
class Answer:
    """One request and how it ended: a status, or an error (status 0)."""

    kind: str
    started: float
    elapsed: float
    status: int = 0
    error: str = ""
    content_type: str = ""
    retry_after: str | None = None
    body: bytes = b""

    def json(self):
        return json.loads(self.body)


def request(base: str, method: str, path: str, body: dict | None = None,
            token: str | None = None, kind: str = "", timeout: float = 30) -> Answer:
    """One request on a new connection (Connection: close), never raising."""
    url = urllib.parse.urlsplit(base)
    headers = {"Connection": "close", "Accept": "application/json"}
    payload = None
    if body is not None:
        payload = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    if token:
        headers["Authorization"] = f"Token {token}"
    started = time.monotonic()
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)
    try:
        conn.request(method, path, body=payload, headers=headers)
        response = conn.getresponse()
        data = response.read()
        return Answer(kind or method, started, time.monotonic() - started, response.status,
                      content_type=response.getheader("Content-Type", ""),
                      retry_after=response.getheader("Retry-After"), body=data)
    except (OSError, http.client.HTTPException) as exc:
        return Answer(kind or method, started, time.monotonic() - started,
                      error=f"{type(exc).__name__}: {exc}")
    finally:
        conn.close()


@dataclass
class Community:
    """Who posts: user id -> token; the staff user; the targets posts go to."""

    tokens: dict[int, str]
    staff: int
    targets: list[tuple[str, int]]


def prepare(database_url: str, comments: int = 2000, targets: int = 30,
            posters: int = 4) -> Community:
    """Seed a database through the CLI and sign in ``posters`` users (the first is staff)."""
    env = {**os.environ, "DATABASE_URL": database_url}

    def flask(*args: str) -> str:
        return subprocess.run([str(BIN / "flask"), "--app", "app", *args], cwd=ROOT, env=env,
                              check=True, capture_output=True, text=True).stdout.strip()

    flask("init-db")
    flask("seed", "--comments", str(comments), "--targets", str(targets), "--seed", "7")
    engine = sa.create_engine(normalise_url(database_url))
    try:
        with engine.connect() as conn:
            users = [row[0] for row in conn.execute(sa.text(
                "SELECT id FROM commentsvc_user ORDER BY id LIMIT :n"), {"n": posters})]
            pages = [row[0] for row in conn.execute(sa.text(
                "SELECT id FROM commentsvc_comicpage ORDER BY id LIMIT 5"))]
    finally:
        engine.dispose()
    tokens = {user: flask("create-token", str(user)) for user in users}
    flask("staff", str(users[0]))
    chosen = [("users.user", user) for user in users] + [("comics.comicpage", p) for p in pages]
    return Community(tokens, users[0], chosen)
