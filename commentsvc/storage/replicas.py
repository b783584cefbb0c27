"""Which database a read goes to: a PostgreSQL streaming replica, or the primary.

With ``DATABASE_REPLICA_URLS`` set, list and single-comment reads go to a replica that
answers and is no further behind than ``COMMENTSVC_REPLICA_MAX_LAG_SECONDS``. Everything
else goes to the primary (``DATABASE_URL``): every write and the answer it returns, the
sign-in lookup, /readyz, the commands; and so do the reads of a user who wrote within
``COMMENTSVC_READ_YOUR_WRITES_SECONDS``, who would otherwise not see their own comment.

Each process checks its replicas in a background thread every
``COMMENTSVC_REPLICA_CHECK_SECONDS`` (never on a request's time). A replica is used only
once a check found it answering and caught up. A read that fails on a replica marks it
unusable until the next good check and runs again on the primary (reads change nothing),
so a client never sees a replica's failure. With no replicas configured none of this
exists and every read goes to the primary as before.
"""

from __future__ import annotations

import logging
import math
import os
import random
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import redis
from sqlalchemy import create_engine
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Engine

from commentsvc.settings import Settings
from commentsvc.storage import deadline, unseen_transactions
from commentsvc.storage.counters import CounterReaders
from commentsvc.storage.engine import engine_options, get_engine, mark_replica, prepare_engine
from commentsvc.storage.list_versions import ListVersions
from commentsvc.storage.queries.replicas import LAG
from commentsvc.storage.redis_link import Backoff
from commentsvc.storage.store import ListState

log = logging.getLogger("commentsvc")
T = TypeVar("T")

WROTE_KEY = "commentsvc:wrote:"


def measure_lag(engine: Engine) -> float:
    """The replica's lag in seconds (one short query on a connection of the pool)."""
    with engine.connect() as conn:
        return float(conn.execute(LAG).scalar_one())


class ReplicaRouter:
    """The replicas of one app and what the last check found of each."""

    def __init__(self, engines: list[Engine], max_lag: float, check_seconds: float,
                 lag_of: Callable[[Engine], float] = measure_lag):
        self.engines = engines
        self.max_lag = max_lag
        self.check_seconds = check_seconds
        self.lag_of = lag_of
        # Replaced whole under the lock, so readers need none (and no update is lost).
        self.usable: list[Engine] = []
        self._states: dict[Engine, str] = {}  # what the last check or read found of each
        self._failed_at: dict[Engine, float] = {}  # when a read last failed on each
        self._checker_pid: int | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def pick(self) -> Engine | None:
        """A usable replica (at random among them), or None: read from the primary."""
        if self._checker_pid != os.getpid():
            self._start_checking()
        usable = self.usable
        return random.choice(usable) if usable else None

    def failed(self, engine: Engine, exc: Exception) -> None:
        """A read failed on ``engine``: leave it alone until a check finds it good again."""
        with self._lock:  # two reads failing at once on two replicas drop both
            self._failed_at[engine] = time.monotonic()
            if engine not in self.usable:
                return  # another thread's read found it first
            self.usable = [e for e in self.usable if e is not engine]
        self._now(engine, "failed", f"failed a read, reading from the primary: {exc}")

    def check(self) -> None:
        """Measure every replica now; keep those that answer within the lag limit.

        What each check finds is logged only when it changes, so a replica that stays
        down is one warning per process, not one per check.
        """
        usable = []
        for engine in self.engines:
            measured = time.monotonic()
            try:
                lag = self.lag_of(engine)
            except sa_exc.DBAPIError as exc:
                self._now(engine, "down", f"unreachable: {exc.orig}")
                continue
            except Exception as exc:  # noqa: BLE001 - whatever it is, the checks go on
                self._now(engine, "down", f"could not be checked: {exc!r}")
                continue
            if lag <= self.max_lag:
                usable.append((engine, measured))
                self._now(engine, "usable", "usable")
            else:
                self._now(engine, "behind", f"over {self.max_lag} s behind the primary "
                                            f"({lag:.1f} s), not read from")
        with self._lock:  # a read that failed since its replica was measured outweighs it
            self.usable = [engine for engine, measured in usable
                           if self._failed_at.get(engine, -math.inf) < measured]

    def _now(self, engine: Engine, state: str, message: str) -> None:
        """Note what was found of ``engine``; log it if that differs from before (the
        checking thread and a failing read may both note something at once)."""
        with self._lock:
            before = self._states.get(engine)
            self._states[engine] = state
        if state == before or (state == "usable" and before is None):
            return
        level = logging.INFO if state == "usable" else logging.WARNING
        log.log(level, "replica %s %s", engine.url.render_as_string(hide_password=True),
                message)

    def _start_checking(self) -> None:
        """One checking thread per process (a forked worker starts its own)."""
        with self._lock:
            if self._checker_pid == os.getpid():
                return
            self._checker_pid = os.getpid()
            self.usable = []
            threading.Thread(target=self._check_forever, name="commentsvc-replica-check",
                             daemon=True).start()

    def _check_forever(self) -> None:
        while not self._stop.is_set():
            self.check()
            self._stop.wait(self.check_seconds)

    def close(self) -> None:
        self._stop.set()
        for engine in self.engines:
            engine.dispose()


class RecentWriters:
    """Who wrote within the last ``window`` seconds: in Redis (every node sees it) when a
    client is given, else in this process only.

    While Redis fails (and for a few seconds after, see ``Backoff``) it cannot say, so
    every signed-in reader counts as a recent writer and reads from the primary.
    """

    def __init__(self, window: float, client: redis.Redis | None = None):
        self.window = window
        self.client = client
        self._until: dict[int, float] = {}  # read without the lock, replaced under it
        self._lock = threading.Lock()
        self._backoff = Backoff("Redis of recent writers")

    def mark(self, user_id: int) -> None:
        """``user_id`` just wrote: here, and in Redis with the window as its lifetime."""
        if not self.window:
            return
        now = time.monotonic()
        with self._lock:  # a mark made while another thread prunes is kept
            self._until[user_id] = now + self.window
            if len(self._until) > 10000:  # forget the expired ones now and then
                self._until = {user: until for user, until in self._until.items()
                               if until > now}
        if self.client is not None and not self._backoff.resting:
            try:
                self.client.set(f"{WROTE_KEY}{user_id}", b"1",
                                px=max(1, round(self.window * 1000)))
            except redis.RedisError as exc:
                self._backoff.failed(exc)

    def wrote_recently(self, user_id: int) -> bool:
        """True when this user wrote within the window (also when Redis cannot say)."""
        if not self.window:
            return False
        if self._until.get(user_id, 0.0) > time.monotonic():
            return True
        if self.client is None:
            return False
        if self._backoff.resting:
            return True  # unsure: the primary is always right
        try:
            return bool(self.client.exists(f"{WROTE_KEY}{user_id}"))
        except redis.RedisError as exc:
            self._backoff.failed(exc)
            return True


class ReadRouting:
    """Where one app's reads go: its replicas (a router, or None), unless the reader
    wrote lately (``recent_writers``); and the counter reader of each engine read from."""

    def __init__(self, router: ReplicaRouter | None, recent_writers: RecentWriters,
                 trust_seconds: float = 0.0):
        self.router = router
        self.recent_writers = recent_writers
        self.counter_readers = CounterReaders()
        self.trust_seconds = trust_seconds
        self._versions: dict[Engine, ListVersions] = {}
        self._versions_lock = threading.Lock()

    def list_state(self, list_key: str, primary: Callable[[], Engine] = get_engine
                   ) -> ListState:
        """A list's size and version for an anonymous read: read as ``reading`` reads,
        or, with no replicas, on PostgreSQL, the primary's as read last while nothing can
        have changed it (storage.list_versions; LIST_TRUST_SECONDS)."""
        def read(engine: Engine) -> ListState:
            return self.counter_readers.for_engine(engine).read(list_key)
        if self.router is not None or not self.trust_seconds:
            return self.reading(None, read, primary)
        engine = primary()
        if engine.dialect.name != "postgresql":
            return read(engine)
        return self.list_versions(engine).state(list_key, lambda: read(engine))

    def list_versions(self, engine: Engine) -> ListVersions:
        """What this process knows of the lists of ``engine``'s database."""
        versions = self._versions.get(engine)
        if versions is None:
            with self._versions_lock:
                versions = self._versions.get(engine) or self._versions.setdefault(
                    engine, ListVersions(engine, self.trust_seconds))
        return versions

    @classmethod
    def from_settings(cls, settings: Settings, redis_client: redis.Redis | None) -> ReadRouting:
        """Engines for DATABASE_REPLICA_URLS (none: every read goes to the primary)."""
        recent_writers = RecentWriters(settings.read_your_writes_seconds, redis_client)
        if not settings.database_replica_urls:
            return cls(None, recent_writers, settings.list_trust_seconds)
        engines = []
        for url in settings.database_replica_urls:
            engine = create_engine(url, **engine_options(
                url, settings.db_connect_timeout, settings.statement_timeout_ms,
                settings.pool_pre_ping, settings.db_response_timeout,
                settings.idle_in_transaction_timeout_ms))
            prepare_engine(engine)
            deadline.watch(engine, settings.db_response_timeout)
            unseen_transactions.watch(engine)
            mark_replica(engine)
            engines.append(engine)
        router = ReplicaRouter(engines, settings.replica_max_lag_seconds,
                               settings.replica_check_seconds)
        return cls(router, recent_writers)

    def reading(self, user_id: int | None, work: Callable[[Engine], T],
                primary: Callable[[], Engine] = get_engine) -> T:
        """``work(engine)`` on a usable replica, or on the primary when there is none,
        when the user wrote lately, or when the replica fails (then it runs again on the
        primary). ``primary`` gives the primary's engine (by default the current app's)."""
        router = self.router
        if router is None or (user_id is not None
                              and self.recent_writers.wrote_recently(user_id)):
            return work(primary())
        replica = router.pick()
        if replica is None:
            return work(primary())
        try:
            return work(replica)
        except sa_exc.DBAPIError as exc:
            router.failed(replica, exc)
        return work(primary())

    def wrote(self, user_id: int) -> None:
        """A write by ``user_id`` committed: send their reads to the primary for a while."""
        if self.router is not None:
            self.recent_writers.mark(user_id)
