"""Webhooks under faults: every event made still arrives (docs/EVENTS.md, RELIABILITY.md).

Comments are posted all along (the app in this process, on ``database_url``) while a real
deliverer (``flask --app app deliver``, a process of its own) sends their events to a real
receiver (harness.webhook_receiver) that checks every signature. Meanwhile:

1. the deliverer is killed (SIGKILL) in the middle of a send, ``kills`` times, and started
   again;
2. the receiver stops (its port closed) for ``receiver_down`` seconds;
3. with a ``cluster`` of the test's own (tests/pg_cluster.py), the database stops for
   ``database_down`` seconds (posts meanwhile get 503 and make no event).

Then posting stops and the run waits for the receiver to hold every event in the
database. Lost = events made that never arrived (must be 0); duplicates = arrivals of an
event already received (allowed: at least once; the receiver drops them by id).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from harness.webhook_receiver import WebhookReceiver

ROOT = Path(__file__).resolve().parent.parent
SECRET = "fault-test-webhook-secret-0123456789"


@dataclass
class Figures:
    made: int = 0            # events in the database (one per committed write)
    posts_refused: int = 0   # posts answered other than 201 (the database was down)
    delivered: int = 0       # distinct events the receiver verified
    duplicates: int = 0      # arrivals of an event it already had
    lost: int = 0            # events made that never arrived
    unknown: int = 0         # events received that the database does not hold
    rejected: int = 0        # deliveries whose signature did not verify
    kills: int = 0
    receiver_down_seconds: float = 0.0
    database_down_seconds: float = 0.0
    drain_seconds: float = 0.0  # from the last fault's end to the last event's arrival
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Poster:
    """Posts comments from a thread at a steady pace until stopped; counts answers."""

    def __init__(self, app: Any, token: str, pace: float) -> None:
        self.client = app.test_client()
        self.headers = {"Authorization": f"Token {token}"}
        self.pace = pace
        self.created = 0
        self.refused = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            n += 1
            response = self.client.post("/api/comments/", headers=self.headers, json={
                "content_type": "users.user", "object_id": 1, "body": f"event fault {n}"})
            if response.status_code == 201:
                self.created += 1
            else:
                self.refused += 1
            response.close()
            self._stop.wait(self.pace)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


class DelivererProcess:
    """``flask --app app deliver`` on ``database_url``, its output kept in a file."""

    def __init__(self, database_url: str, webhook_url: str) -> None:
        self.env = {**os.environ, "DATABASE_URL": database_url,
                    "COMMENTSVC_WEBHOOK_URLS": webhook_url,
                    "COMMENTSVC_WEBHOOK_SECRET": SECRET,
                    "COMMENTSVC_WEBHOOK_POLL_SECONDS": "0.05",
                    "COMMENTSVC_WEBHOOK_TIMEOUT_SECONDS": "2",
                    "COMMENTSVC_WEBHOOK_LEASE_SECONDS": "3",
                    "COMMENTSVC_WEBHOOK_MAX_BACKOFF_SECONDS": "2",
                    "COMMENTSVC_DB_CONNECT_TIMEOUT": "2"}
        self.log = tempfile.NamedTemporaryFile(prefix="deliverer-", suffix=".log", delete=False)
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "flask", "--app", "app", "deliver"], cwd=ROOT,
            env=self.env, stdout=self.log, stderr=subprocess.STDOUT)

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> int:
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()

    def output(self) -> str:
        return Path(self.log.name).read_text(encoding="utf-8", errors="replace")


def wait_until(condition: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what}")
        time.sleep(0.02)


def stored_event_ids(app: Any) -> set[str]:
    from commentsvc.storage import engine

    with app.app_context(), engine.get_engine().connect() as conn:
        return {uid for (uid,) in conn.execute(sa.text("SELECT event_uid FROM commentsvc_event"))}


def prepared_app(database_url: str) -> tuple[Any, str]:
    """The app on an emptied database with one user and their sign-in key."""
    from app import create_app
    from commentsvc.storage import engine
    from commentsvc.web import auth

    app = create_app({"TESTING": True, "COMMENTSVC_DATABASE_URL": database_url,
                      "COMMENTSVC_POST_RATE_LIMIT": "", "COMMENTSVC_DB_CONNECT_TIMEOUT": 2,
                      "COMMENTSVC_DB_FAIL_FAST_SECONDS": 0})
    with app.app_context(), engine.get_engine().begin() as conn:
        engine.drop_schema(conn)
        engine.create_schema(conn)
        conn.execute(sa.text("INSERT INTO commentsvc_user (id, username) VALUES (1, 'ann')"))
        token = auth.create_token(conn, 1)
    return app, token


def run(database_url: str, *, cluster: Any = None, kills: int = 2,
        receiver_down: float = 3.0, database_down: float = 3.0, pace: float = 0.02,
        drain_limit: float = 120.0, log: Any = None) -> Figures:
    """The scenario above; its figures."""
    say = log or (lambda _text: None)
    figures = Figures()
    started = time.monotonic()
    app, token = prepared_app(database_url)
    receiver = WebhookReceiver(SECRET)
    receiver.start()
    deliverer = DelivererProcess(database_url, receiver.url)
    poster = Poster(app, token, pace)
    try:
        deliverer.start()
        poster.start()
        wait_until(lambda: len(receiver.ids()) >= 20, 60, "the first deliveries")
        for _ in range(kills):
            receiver.delay = 0.5  # every send now takes half a second
            wait_until(lambda: receiver.in_flight > 0, 30, "a send in flight")
            deliverer.kill()
            figures.kills += 1
            receiver.delay = 0.0
            say(f"killed the deliverer mid-send ({len(receiver.ids())} received)")
            deliverer.start()
            time.sleep(1.0)
        receiver.stop()
        say(f"receiver stopped for {receiver_down:g} s")
        time.sleep(receiver_down)
        receiver.start()
        figures.receiver_down_seconds = receiver_down
        if cluster is not None:
            cluster.stop("fast")
            say(f"database stopped for {database_down:g} s")
            time.sleep(database_down)
            cluster.start()
            figures.database_down_seconds = database_down
        faults_over = time.monotonic()
        time.sleep(1.0)
        poster.stop()
        made = stored_event_ids(app)
        try:
            wait_until(lambda: made <= set(receiver.ids()), drain_limit, "every event")
        except TimeoutError:
            say("not every event arrived within the drain limit")
        figures.drain_seconds = round(time.monotonic() - faults_over, 1)
    finally:
        poster.stop() if poster._thread.is_alive() else None
        deliverer.stop()
        receiver.stop()
        from commentsvc.storage import engine

        with app.app_context():
            engine.get_engine().dispose()
    arrived = receiver.ids()
    figures.made = len(made)
    figures.posts_refused = poster.refused
    figures.delivered = len(set(arrived) & made)
    figures.duplicates = len(arrived) - len(set(arrived))
    figures.lost = len(made - set(arrived))
    figures.unknown = len(set(arrived) - made)
    figures.rejected = len(receiver.rejected)
    figures.seconds = round(time.monotonic() - started, 1)
    if figures.lost or figures.unknown or figures.rejected:
        say(deliverer.output()[-3000:])
    return figures
