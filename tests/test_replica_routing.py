"""Choosing the database of a read: replicas that answer and keep up, the primary for
everything else, and for a user who just wrote (unit tests; test_replicas.py runs real
streaming replicas)."""

from __future__ import annotations

import os
import time

import pytest
import redis
import sqlalchemy as sa

from commentsvc import settings
from commentsvc.storage.replicas import RecentWriters, ReplicaRouter
from conftest import Community


def engines(count: int) -> list[sa.engine.Engine]:
    """Distinct engines that are never connected (each test fakes the lag check)."""
    return [sa.create_engine(f"sqlite:///file:replica{n}?mode=memory&uri=true",
                             poolclass=sa.pool.StaticPool) for n in range(count)]


def failing(exc_type=sa.exc.OperationalError):
    def lag_of(_engine):
        raise exc_type("SELECT 1", {}, OSError("connection refused"))
    return lag_of


def test_replicas_within_the_lag_limit_are_used():
    one, two, three = engines(3)
    lags = {one: 0.0, two: 4.9, three: 5.1}
    router = ReplicaRouter([one, two, three], max_lag=5, check_seconds=60,
                           lag_of=lags.__getitem__)
    router.check()
    assert router.usable == [one, two]
    lags[three] = 0.2
    lags[one] = 30
    router.check()
    assert router.usable == [two, three]


def test_an_unreachable_replica_is_skipped_until_it_answers():
    [one] = engines(1)
    router = ReplicaRouter([one], max_lag=5, check_seconds=60, lag_of=failing())
    router.check()
    assert router.usable == []
    router.lag_of = lambda _engine: 0.0
    router.check()
    assert router.usable == [one]
    router.failed(one, RuntimeError("read failed"))
    assert router.usable == []


def test_a_check_that_fails_oddly_skips_that_replica_only():
    one, two = engines(2)

    def lag_of(engine):
        if engine is one:
            raise sa.exc.TimeoutError("QueuePool limit reached")
        return 0.0

    router = ReplicaRouter([one, two], max_lag=5, check_seconds=60, lag_of=lag_of)
    router.check()  # and the checking thread would live on
    assert router.usable == [two]


def test_what_a_check_finds_is_logged_when_it_changes(caplog):
    import logging

    [one] = engines(1)
    lags = [0.0, 9.0, 9.0, 0.0]
    router = ReplicaRouter([one], max_lag=5, check_seconds=60,
                           lag_of=lambda _engine: lags.pop(0))
    caplog.set_level(logging.INFO, logger="commentsvc")
    for _ in range(4):
        router.check()
    router.failed(one, RuntimeError("read failed"))
    router.failed(one, RuntimeError("read failed"))  # a second thread's read: no news
    router.lag_of = failing()
    router.check()
    router.check()
    assert [r.getMessage().split(" ", 2)[2] for r in caplog.records] == [
        "over 5 s behind the primary (9.0 s), not read from",
        "usable",
        "failed a read, reading from the primary: read failed",
        "unreachable: connection refused",
    ]


def test_each_process_checks_in_the_background():
    [one] = engines(1)
    checked = []
    router = ReplicaRouter([one], max_lag=5, check_seconds=0.05,
                           lag_of=lambda engine: checked.append(engine) or 0.0)
    try:
        router.pick()  # starts this process's checker
        deadline = time.monotonic() + 5
        while router.pick() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert router.pick() is one
        count = len(checked)
        while len(checked) < count + 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(checked) >= count + 2  # and again, every check_seconds
    finally:
        router.close()


def test_recent_writers_in_this_process():
    writers = RecentWriters(window=0.2)
    assert not writers.wrote_recently(7)
    writers.mark(7)
    assert writers.wrote_recently(7) and not writers.wrote_recently(8)
    time.sleep(0.25)
    assert not writers.wrote_recently(7)
    off = RecentWriters(window=0)
    off.mark(7)
    assert not off.wrote_recently(7)


def test_recent_writers_are_shared_through_redis(redis_url):
    node_a = RecentWriters(10, redis.Redis.from_url(redis_url))
    node_b = RecentWriters(10, redis.Redis.from_url(redis_url))
    node_a.mark(42)
    assert node_b.wrote_recently(42) and not node_b.wrote_recently(43)
    ttl = redis.Redis.from_url(redis_url).pttl("commentsvc:wrote:42")
    assert 0 < ttl <= 10_000


def test_when_redis_cannot_say_the_reader_goes_to_the_primary(caplog):
    import logging

    from test_health import closed_port

    client = redis.Redis.from_url(f"redis://127.0.0.1:{closed_port()}/0",
                                  socket_connect_timeout=0.2)
    writers = RecentWriters(10, client)
    caplog.set_level(logging.WARNING, logger="commentsvc")
    writers.mark(4)
    assert writers.wrote_recently(4) and writers.wrote_recently(5)
    assert writers.wrote_recently(6)
    # One warning, then Redis is left alone for a while (anyone signed in reads the primary).
    assert [r.getMessage().split(",")[0] for r in caplog.records] == [
        "Redis of recent writers unavailable"]


@pytest.mark.parametrize(("raw", "parsed"), [
    ("", ()),
    ("postgresql://r1/db", ("postgresql+psycopg2://r1/db",)),
    ("postgresql://r1/db, postgres://r2/db\npostgresql+psycopg2://r3/db",
     ("postgresql+psycopg2://r1/db", "postgresql+psycopg2://r2/db",
      "postgresql+psycopg2://r3/db")),
])
def test_replica_urls_are_read_from_the_environment(raw, parsed):
    found = settings.from_environment({"DATABASE_REPLICA_URLS": raw})
    assert found == {"COMMENTSVC_DATABASE_REPLICA_URLS": parsed}


def test_replica_settings_take_seconds_with_decimals():
    found = settings.from_environment({"COMMENTSVC_REPLICA_CHECK_SECONDS": "0.5",
                                       "COMMENTSVC_REPLICA_MAX_LAG_SECONDS": "3",
                                       "COMMENTSVC_READ_YOUR_WRITES_SECONDS": "0"})
    assert found == {"COMMENTSVC_REPLICA_CHECK_SECONDS": 0.5,
                     "COMMENTSVC_REPLICA_MAX_LAG_SECONDS": 3,
                     "COMMENTSVC_READ_YOUR_WRITES_SECONDS": 0}
    values = settings.resolved({})
    assert (values["DATABASE_REPLICA_URLS"], values["READ_YOUR_WRITES_SECONDS"],
            values["REPLICA_MAX_LAG_SECONDS"], values["REPLICA_CHECK_SECONDS"],
            values["RESPONSE_CACHE_URL"]) == ((), 10, 5, 2, "")


@pytest.mark.parametrize(("name", "value"), [
    ("DATABASE_REPLICA_URLS", "sqlite:///replica.db"),
    ("DATABASE_REPLICA_URLS", "postgresql+psycopg://r1/db"),
    ("COMMENTSVC_RESPONSE_CACHE_URL", "memcached://x"),
    ("COMMENTSVC_REPLICA_MAX_LAG_SECONDS", "0"),
    ("COMMENTSVC_REPLICA_CHECK_SECONDS", "often"),
    ("COMMENTSVC_REPLICA_CHECK_SECONDS", "inf"),
    ("COMMENTSVC_READ_YOUR_WRITES_SECONDS", "-1"),
])
def test_bad_replica_and_cache_settings_are_refused(name, value):
    with pytest.raises(settings.SettingsError, match=name):
        settings.from_environment({name: value})


def test_without_replicas_there_is_no_router(app):
    assert app.extensions["commentsvc"].replicas is None


@pytest.fixture
def replicated_app(app_factory):
    """An app whose one replica refuses connections (nothing listens on its port)."""
    from test_health import closed_port

    replica_url = f"postgresql://postgres@127.0.0.1:{closed_port()}/db"
    app = app_factory(COMMENTSVC_DATABASE_REPLICA_URLS=replica_url,
                      COMMENTSVC_DB_CONNECT_TIMEOUT=1)
    router = app.extensions["commentsvc"].replicas
    router._checker_pid = os.getpid()  # no background checks here: the test decides
    yield app, router
    router.close()


def test_a_replica_failing_a_read_is_dropped_and_the_primary_answers(replicated_app):
    app, router = replicated_app
    community = Community(app)
    client = app.test_client()
    [replica] = router.engines
    router.usable = [replica]  # as if a check had found it good just before it went down
    listed = client.get("/api/comments/")
    assert listed.status_code == 200 and listed.get_json()["results"]
    assert router.usable == []
    router.usable = [replica]
    assert client.get("/api/comments/100/").status_code == 200
    assert router.usable == []
    assert community.tokens  # the data the primary served


def test_a_writer_reads_from_the_primary_for_the_window(replicated_app, monkeypatch):
    app, router = replicated_app
    community = Community(app)
    client = app.test_client()
    picked = []
    monkeypatch.setattr(router, "pick", lambda: picked.append(1))  # None: the primary
    client.get("/api/comments/", headers=community.auth("ann"))
    assert len(picked) == 1
    created = client.post("/api/comments/", headers=community.auth("ann"), json={
        "content_type": "comics.comicpage", "object_id": 10, "body": "mine"})
    assert created.status_code == 201
    client.get("/api/comments/", headers=community.auth("ann"))
    client.get(f"/api/comments/{created.get_json()['id']}/", headers=community.auth("ann"))
    assert len(picked) == 1  # ann's reads skipped the replicas
    client.get("/api/comments/", headers=community.auth("bob"))
    client.get("/api/comments/")
    assert len(picked) == 3  # others' still go to them
