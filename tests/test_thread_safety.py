"""Threaded workers: state shared by the threads of one process, each race forced.

Each test stops one thread at the worst moment of an update (a hook inside it) and lets a
second thread run the same code meanwhile, for as long as it gets (``meanwhile``): without
a lock the second one runs through and its update is lost or doubled; with the lock it
waits, and both end as if they had taken turns. test_threaded_workers.py runs the real
server under bursts of first requests.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

import pytest
import sqlalchemy as sa
from flask import Flask
from flask_sqlalchemy import SQLAlchemy
from limits.errors import StorageError

from commentsvc import comments_api
from commentsvc.operations import metrics
from commentsvc.storage import deadline, outage
from commentsvc.storage import engine as db
from commentsvc.storage.replicas import RecentWriters, ReplicaRouter
from commentsvc.web import rate_limit
from commentsvc.web.errors import Throttled

# How long the stopped thread lets the other one run: ample for code that does not wait.
MEANWHILE_SECONDS = 0.3


def meanwhile(work: Callable[[], object]) -> threading.Thread:
    """Run ``work`` in another thread now, and wait until it is done or blocked a while."""
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(MEANWHILE_SECONDS)
    return thread


def finish(*threads: threading.Thread) -> None:
    for thread in threads:
        thread.join(10)
        assert not thread.is_alive()


def once(hook: Callable[[], object]) -> Callable[[], None]:
    """``hook`` on the first call only (the other thread passes the same spot)."""
    calls = []

    def call() -> None:
        if not calls:
            calls.append(1)
            hook()
    return call


def test_a_hosts_engine_is_used_only_once_it_is_set_up(tmp_path, monkeypatch):
    """A mounted blueprint sets the host's engine up on first use: a second first request
    must wait for the whole of it (hooks, deadline, outage log), not find it half done."""
    host = Flask("host_site")
    host.config["SQLALCHEMY_DATABASE_URI"] = f"sqlite:///{tmp_path / 'host.sqlite3'}"
    SQLAlchemy().init_app(host)
    host.register_blueprint(comments_api, url_prefix="/community")
    found_protected = []
    threads: list[threading.Thread] = []

    def second_request() -> None:
        with host.app_context():
            found_protected.append(outage.outage_of(db.get_engine()) is not None)

    protect = db.protect
    hook = once(lambda: threads.append(meanwhile(second_request)))

    def protect_meanwhile(engine, options, **kwargs):
        hook()
        protect(engine, options, **kwargs)

    monkeypatch.setattr(db, "protect", protect_meanwhile)
    with host.app_context():
        engine = db.get_engine()
    finish(*threads)
    assert found_protected == [True]
    engine.dispose()


def test_an_engines_outage_log_and_deadline_are_made_once(monkeypatch):
    """Two threads watching one engine at once share one outage log and one deadline
    group (else a hung database logs twice, and give_up_waits misses half the waits)."""
    engine = sa.create_engine("postgresql+psycopg2://nobody@127.0.0.1:9/none")
    found: list[object] = []
    threads: list[threading.Thread] = []

    class SlowOutage(outage.Outage):
        def __init__(self, *args):
            hook()
            super().__init__(*args)

    groups = []

    class SlowGroup(deadline._Group):
        def __init__(self, *args):
            groups.append(self)
            hook_group()
            super().__init__(*args)

    hook = once(lambda: threads.append(meanwhile(lambda: found.append(
        outage.watch(engine, 2)))))
    hook_group = once(lambda: threads.append(meanwhile(lambda: deadline.watch(engine, 4))))
    monkeypatch.setattr(outage, "Outage", SlowOutage)
    monkeypatch.setattr(deadline, "_Group", SlowGroup)
    first = outage.watch(engine, 2)
    deadline.watch(engine, 4)
    finish(*threads)
    assert found == [first] and outage.outage_of(engine) is first
    assert len(groups) == 1 and deadline._engines[engine] is groups[0]
    engine.dispose()


def test_metrics_made_at_once_are_kept_once(monkeypatch):
    """for_app made on first use by two threads: both count into the one kept."""
    app = Flask("metrics_only")
    found = []
    threads: list[threading.Thread] = []
    hook = once(lambda: threads.append(meanwhile(lambda: found.append(metrics.for_app(app)))))

    class SlowMetrics(metrics.RequestMetrics):
        def __init__(self, made_for):
            hook()
            super().__init__(made_for)

    monkeypatch.setattr(metrics, "RequestMetrics", SlowMetrics)
    first = metrics.for_app(app)
    finish(*threads)
    assert found == [first] and app.extensions[metrics._EXTENSION] is first


class _Names:
    """What the router's log lines ask of an engine."""

    def __init__(self, name: str):
        self.url = sa.engine.make_url(f"postgresql://{name}/db")


def test_two_replicas_failing_reads_at_once_are_both_dropped():
    """Each failed() makes a new list without its replica; made from the same old list at
    once, the later one put the other replica back."""
    one, two = _Names("one"), _Names("two")
    router = ReplicaRouter([one, two], max_lag=5, check_seconds=60, lag_of=lambda _e: 0.0)
    router.check()
    assert router.usable == [one, two]
    threads: list[threading.Thread] = []
    hook = once(lambda: threads.append(meanwhile(lambda: router.failed(two, OSError("x")))))

    class Usable(list):
        def __iter__(self):  # the first failed() is making its new list
            hook()
            return super().__iter__()

    router.usable = Usable(router.usable)
    router.failed(one, OSError("x"))
    finish(*threads)
    assert router.usable == []


def test_a_replica_failing_during_a_check_stays_dropped():
    """A check measures each replica in turn, then publishes what it found; a read that
    failed on a replica after it was measured is newer news and keeps it out."""
    one, two = _Names("one"), _Names("two")

    def lag_of(engine):
        if engine is two:  # one was measured fine a moment ago; now a read fails on it
            router.failed(one, OSError("connection reset"))
        return 0.0

    router = ReplicaRouter([one, two], max_lag=5, check_seconds=60, lag_of=lambda _e: 0.0)
    router.check()
    router.lag_of = lag_of
    router.check()
    assert router.usable == [two]
    router.lag_of = lambda _e: 0.0
    router.check()  # the next check that finds it good brings it back
    assert router.usable == [one, two]


class _Prunes(float):
    """A mark's expiry that, read while marks are pruned, lets another thread mark."""

    hook: Callable[[], None] = staticmethod(lambda: None)

    def __gt__(self, other):
        type(self).hook()
        return float(self) > other


def test_a_writer_marked_while_another_thread_prunes_is_kept():
    """mark() replaces the dict when it prunes: a mark made meanwhile in the old dict was
    lost, and that writer read a replica that did not have their comment yet."""
    writers = RecentWriters(window=60)
    writers._until = {user: -math.inf for user in range(10000)}
    writers._until[-1] = _Prunes(math.inf)
    threads: list[threading.Thread] = []
    _Prunes.hook = staticmethod(once(lambda: threads.append(
        meanwhile(lambda: writers.mark(20001)))))
    writers.mark(20000)
    finish(*threads)
    assert writers.wrote_recently(20000) and writers.wrote_recently(20001)
    assert len(writers._until) == 3


def test_posts_meeting_a_failing_storage_at_once_count_in_one_memory(monkeypatch):
    """The worker's own counts are made on the first failure; two posts meeting it at once
    made two, and one post's count was lost (a user got a post past the limit)."""
    limit = rate_limit.PostRateLimit("2/minute", "memory://")

    class Failing:
        def test(self, *_args, **_kwargs):
            raise StorageError(ConnectionError("storage down"))

        hit = test

    def take() -> None:  # a post checked, then written
        limit.check(7)
        limit.count(7)

    limit._limiter = Failing()
    monkeypatch.setattr(limit._backoff, "failed", lambda _exc: None)  # no resting, no log
    threads: list[threading.Thread] = []
    hook = once(lambda: threads.append(meanwhile(take)))
    memory = rate_limit.MemoryStorage

    def slow_memory():
        hook()
        return memory()

    monkeypatch.setattr(rate_limit, "MemoryStorage", slow_memory)
    take()
    finish(*threads)
    with pytest.raises(Throttled):  # the third post within the minute
        limit.check(7)
