"""The deliverer: POSTs each event to each webhook endpoint, signed, in order, at least
once (docs/EVENTS.md). Run by ``flask --app app deliver`` (operations.event_commands).

Each endpoint has a thread of its own, so a dead or slow endpoint never holds up another.
An endpoint's events go one at a time, in id order, under a lease (storage.deliveries);
a failed attempt is tried again after an exponential backoff with jitter, for up to
WEBHOOK_RETRY_HOURS, and only then given up. Where an endpoint stands is in the database,
so a deliverer killed mid-send, a receiver down for a while and a database restart lose
nothing: the next attempt (by this deliverer or another, on any node) starts from there,
and the worst a crash costs is the same event sent twice, which its id lets the receiver
drop.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

import requests
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from commentsvc import webhooks
from commentsvc.rules import endpoint_urls
from commentsvc.settings import Settings
from commentsvc.storage import deliveries, outbox
from commentsvc.storage.deliveries import Claim, StoredEvent
from commentsvc.version import __version__

log = logging.getLogger("commentsvc.deliverer")

BATCH = 100  # events read per look at an endpoint
PRUNE_EVERY = 60.0  # seconds between two prunes of old events
DATABASE_RETRY = 2.0  # seconds between two tries of a database that did not answer

# Sends one event to one endpoint: None when it was accepted, else what went wrong.
Send = Callable[[str, StoredEvent, int], "str | None"]


def backoff(attempts: int, cap: float, rand: Callable[[], float] = random.random) -> float:
    """Seconds to wait after the ``attempts``-th failed attempt: 1, 2, 4, ... s up to
    ``cap``, each drawn between half and all of it (jitter, so endpoints coming back
    are not all retried at the same instant).

    >>> [backoff(n, 600, lambda: 1.0) for n in (1, 2, 3, 10, 11)]
    [1.0, 2.0, 4.0, 512.0, 600.0]
    >>> backoff(3, 600, lambda: 0.0)
    2.0
    """
    full = min(float(cap), 2.0 ** min(attempts - 1, 62))
    return full / 2 + rand() * full / 2


class HttpSender:
    """POSTs events with requests, one keep-alive session per thread (per endpoint)."""

    def __init__(self, secret: str, timeout: float) -> None:
        self.secret = secret
        self.timeout = timeout
        self._local = threading.local()

    def __call__(self, url: str, event: StoredEvent, attempt: int) -> str | None:
        session: requests.Session | None = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
        body = event.payload.encode("utf-8")
        headers = webhooks.headers_for(self.secret, event.uid, event.type, body, attempt)
        headers["User-Agent"] = f"commentsvc-webhooks/{__version__}"
        try:
            response = session.post(url, data=body, headers=headers, stream=True,
                                    timeout=(self.timeout, self.timeout),
                                    allow_redirects=False)
        except requests.RequestException as exc:
            return f"{type(exc).__name__}: {exc}"
        with response:  # a short answer is read, so the connection can be used again
            text = response.raw.read(4096, decode_content=True) or b""
        if 200 <= response.status_code < 300:
            return None
        return f"HTTP {response.status_code}: {text[:200].decode('utf-8', 'replace')}"


class DatabaseState:
    """Logs once when the database stops answering the deliverer and once when it is back,
    however many threads notice."""

    def __init__(self) -> None:
        self._down_since: datetime | None = None
        self._lock = threading.Lock()

    def down(self, exc: Exception, now: datetime) -> None:
        with self._lock:
            if self._down_since is None:
                self._down_since = now
                log.warning("database unavailable (%s); events wait in it, retrying",
                            type(exc).__name__)

    def up(self, now: datetime) -> None:
        with self._lock:
            if self._down_since is not None:
                log.warning("database back after %.1f s",
                            (now - self._down_since).total_seconds())
                self._down_since = None


class Deliverer:
    """Delivers every event to every configured endpoint; ``run`` until stopped, or
    ``run_once`` for what is due now."""

    def __init__(self, engine: Engine, settings: Settings, send: Send | None = None,
                 clock: Callable[[], datetime] = outbox.now, owner: str | None = None):
        self.engine = engine
        self.settings = settings
        self.send = send or HttpSender(settings.webhook_secret,
                                       settings.webhook_timeout_seconds)
        self.clock = clock
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.database = DatabaseState()
        # how the log names each endpoint: never its secrets (rules.endpoint_urls)
        self.names = endpoint_urls.labels(self.urls)

    @property
    def urls(self) -> tuple[str, ...]:
        return self.settings.webhook_urls

    def register(self, only_these: bool = True) -> None:
        """Make the configured endpoints active; ``only_these``: the only active ones
        (storage.deliveries.register). Endpoints are then named as the metrics name them,
        numbered among every endpoint in the database where several would show alike."""
        deliveries.register(self.engine, self.urls, self.clock(), only_these)
        every = endpoint_urls.labels([*deliveries.urls(self.engine), *self.urls])
        self.names = {url: every[url] for url in self.urls}

    def name(self, url: str) -> str:
        """How the log names the endpoint at ``url``."""
        return self.names.get(url) or endpoint_urls.shown(url)

    def run_once(self) -> int:
        """Send every event due now to every endpoint, one endpoint after another; how
        many were accepted."""
        accepted = 0
        for url in self.urls:
            while (step := self.step(url)) is not None:
                accepted += step
        return accepted

    def run(self, stop: threading.Event) -> None:
        """A thread per endpoint until ``stop`` is set; old events pruned meanwhile."""
        threads = [threading.Thread(target=self.serve, args=(url, stop), daemon=True,
                                    name=f"deliver {self.name(url)}") for url in self.urls]
        for thread in threads:
            thread.start()
        while not stop.wait(PRUNE_EVERY):
            self.prune()
        for thread in threads:
            thread.join()

    def serve(self, url: str, stop: threading.Event) -> None:
        """One endpoint's thread: send, or wait for events (or the database)."""
        while not stop.is_set():
            try:
                step = self.step(url, stop)
            except SQLAlchemyError as exc:
                self.database.down(exc, self.clock())
                stop.wait(DATABASE_RETRY)
                continue
            self.database.up(self.clock())
            if step is None:
                stop.wait(self.settings.webhook_poll_seconds)
        try:
            deliveries.release(self.engine, url, self.owner)
        except SQLAlchemyError:
            pass  # the lease runs out by itself

    def prune(self) -> None:
        try:
            outbox.prune(self.engine, self.settings.event_retention_hours)
        except SQLAlchemyError:
            log.warning("pruning old events failed; trying again later", exc_info=True)

    def step(self, url: str, stop: threading.Event | None = None) -> int | None:
        """Take the endpoint and send it the next batch of its events; how many it
        accepted, or None when there was nothing to do (nothing new, not due yet, or
        another deliverer holds it)."""
        lease = self.settings.webhook_lease_seconds
        held = deliveries.claim(self.engine, url, self.owner, self.clock(), lease)
        if held is None:
            return None
        batch = deliveries.events_after(self.engine, held.delivered_through, BATCH)
        if not batch:
            deliveries.release(self.engine, url, self.owner)
            return None
        accepted = 0
        for event in batch:
            if stop is not None and stop.is_set():
                break  # serve gives the lease back as it ends
            outcome = self.attempt(held, event)
            if outcome is None:
                break  # failed (tried again later) or the lease was lost
            accepted += outcome
            held = Claim(url, self.owner, event.id, 0, None)
        return accepted

    def attempt(self, held: Claim, event: StoredEvent) -> int | None:
        """Send ``event``: 1 if accepted, 0 if given up on now, None if it failed (and
        will be tried again) or the lease was lost."""
        attempts = held.attempts + 1
        error = self.send(held.url, event, attempts)
        if error is not None:  # kept and logged: an error may quote the URL
            error = endpoint_urls.scrubbed(error, held.url)
        now = self.clock()
        lease = self.settings.webhook_lease_seconds
        if error is None:
            return 1 if deliveries.delivered(self.engine, held, event.id, now, lease) else None
        first = held.first_failure or now
        if now - first >= timedelta(hours=self.settings.webhook_retry_hours):
            log.error("gave up on event %s (%s) for %s after %d attempts: %s", event.uid,
                      event.type, self.name(held.url), attempts, error)
            given = deliveries.give_up(self.engine, held, event.id, attempts, error, now,
                                       lease)
            return 0 if given else None
        wait = backoff(attempts, self.settings.webhook_max_backoff_seconds)
        log.warning("event %s to %s failed (attempt %d; again in %.1f s): %s", event.uid,
                    self.name(held.url), attempts, wait, error)
        deliveries.failed(self.engine, held, error, now, now + timedelta(seconds=wait))
        return None
