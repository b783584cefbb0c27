"""While the database is unreachable: 503 JSON with Retry-After; afterwards, service again."""

from __future__ import annotations

import threading
import time

import pytest
import sqlalchemy as sa

from app import create_app
from commentsvc.storage import engine, outage, store
from conftest import Community, insert_records, make_app, terminate_backends
from helpers import assert_error, newest_first
from tcp_proxy import TcpProxy

UNAVAILABLE = "The database is unavailable. Try again shortly."


def test_sqlite_file_that_cannot_be_opened_is_503(tmp_path):
    url = f"sqlite:///{tmp_path / 'missing-dir' / 'engine.sqlite3'}"
    app = create_app({"TESTING": True, "COMMENTSVC_DATABASE_URL": url,
                      "COMMENTSVC_RETRY_AFTER": 7})
    response = app.test_client().get("/api/comments/")
    assert_error(response, 503, UNAVAILABLE)
    assert response.headers["Retry-After"] == "7"
    with app.app_context():
        engine.get_engine().dispose()


def test_postgres_outage_is_503_and_the_service_recovers_by_itself(postgres_url, sample_records):
    real = sa.engine.make_url(postgres_url)
    proxy = TcpProxy(real.host or "127.0.0.1", real.port or 5432)
    proxy.restore()
    url = real.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    app = create_app({"TESTING": True, "COMMENTSVC_DATABASE_URL": url,
                      "COMMENTSVC_DB_CONNECT_TIMEOUT": 2})
    try:
        with app.app_context(), engine.get_engine().begin() as conn:
            engine.drop_schema(conn)
            engine.create_schema(conn)
        insert_records(app, sample_records)
        client = app.test_client()
        assert client.get("/api/comments/").status_code == 200

        proxy.cut()
        for _ in range(3):  # pooled connections are broken, new ones are refused
            response = client.get("/api/comments/")
            assert_error(response, 503, UNAVAILABLE)
            assert response.headers["Retry-After"] == "5"

        proxy.restore()
        response = client.get("/api/comments/")
        assert response.status_code == 200
        assert len(response.get_json()["results"]) == 10
    finally:
        proxy.cut()
        with app.app_context():
            engine.get_engine().dispose()


@pytest.mark.parametrize("exc", [sa.exc.OperationalError("SELECT 1", {}, Exception("gone")),
                                 sa.exc.TimeoutError("pool exhausted")])
def test_database_errors_map_to_503(client, monkeypatch, exc):
    from commentsvc.storage import counters

    def failing(*_args, **_kwargs):
        raise exc

    monkeypatch.setattr(counters.ListStateReader, "read", failing)  # the counter read fails
    assert_error(client.get("/api/comments/", headers={"If-None-Match": '"held"'}), 503,
                 UNAVAILABLE)
    monkeypatch.undo()
    assert client.get("/api/comments/").status_code == 200  # an empty list's page 1 is built
    monkeypatch.setattr(counters.ListStateReader, "read_page", failing)  # the page read fails
    assert_error(client.get("/api/comments/?page_size=5"), 503, UNAVAILABLE)


@pytest.mark.parametrize("cache_mb", [0, 64])
def test_reads_replace_pooled_connections_the_server_dropped(postgres_url, sample_records,
                                                              cache_mb):
    """No pre-ping: a page built on a dead pooled connection is read again on a new one."""
    app = make_app(postgres_url, COMMENTSVC_RESPONSE_CACHE_MB=cache_mb)
    try:
        insert_records(app, sample_records)
        client = app.test_client()
        assert client.get("/api/comments/?page=2").status_code == 200
        terminate_backends(app)
        again = client.get("/api/comments/?page=1")  # not cached: built on a pooled connection
        assert again.status_code == 200
        assert [c["id"] for c in again.get_json()["results"]] == newest_first(sample_records)[:10]
    finally:
        with app.app_context():
            engine.get_engine().dispose()


def test_a_writer_replaces_a_pooled_connection_the_server_dropped(pg_app, sample_records):
    insert_records(pg_app, sample_records)
    root = next(r for r in sample_records if r["type"] == "comment")
    with pg_app.app_context(), engine.writing(engine.get_engine()) as conn:
        conn.execute(sa.text("SELECT 1"))  # leaves a connection in the pool
    terminate_backends(pg_app)
    with pg_app.app_context(), engine.writing(engine.get_engine()) as conn:
        store.soft_delete(conn, root["id"])
    with pg_app.app_context(), engine.snapshot(engine.get_engine()) as conn:
        deleted = conn.execute(sa.text("SELECT is_deleted FROM commentsvc_comment WHERE id = :id"),
                               {"id": root["id"]}).scalar()
    assert deleted


def test_signing_in_replaces_a_pooled_connection_the_server_dropped(pg_app):
    """The sign-in lookup, like every other read, runs again on a new connection when its
    pooled one was dropped by the server (a restart, a failover): no 503 for it."""
    people = Community(pg_app)
    client = pg_app.test_client()
    assert client.get("/api/comments/", headers=people.auth("ann")).status_code == 200
    terminate_backends(pg_app)
    assert client.get("/api/comments/", headers=people.auth("bob")).status_code == 200
    terminate_backends(pg_app)
    posted = client.post("/api/comments/", headers=people.auth("carol"), json={
        "content_type": "comics.comicpage", "object_id": 10, "body": "after a restart"})
    assert posted.status_code == 201, posted.get_json()


def _in_thread(function):
    """What ``function`` returns or raises, called in a thread of its own."""
    found = []

    def run():
        try:
            found.append(function())
        except Exception as exc:  # the test looks at it
            found.append(exc)
    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    return found[0]


def test_after_the_fail_fast_window_one_request_tries_the_database_for_all():
    """A hung database opens the window; after it one thread at a time (the probe) may try
    the database while the others are still refused at once; a statement answered lets
    everyone try, the probe's deadline passing opens the next window."""
    log = outage.Outage("db", fail_fast_seconds=0.2, probe_seconds=30)
    log.failed("no answer", hung=True)
    with pytest.raises(outage.FailingFast):
        log.check()  # inside the window: refused
    time.sleep(0.25)
    log.check()  # the probe
    log.check()  # the probe's next statement
    assert isinstance(_in_thread(log.check), outage.FailingFast)
    log.failed("no answer again", hung=True)  # the probe's deadline passed
    with pytest.raises(outage.FailingFast):
        log.check()
    time.sleep(0.25)
    assert _in_thread(log.check) is None  # another thread probes this time
    with pytest.raises(outage.FailingFast):
        log.check()
    log.answered()
    log.check()
    assert _in_thread(log.check) is None


def test_a_probe_that_never_reports_gives_its_turn_up():
    log = outage.Outage("db", fail_fast_seconds=0.1, probe_seconds=0.3)
    log.failed("no answer", hung=True)
    time.sleep(0.15)
    log.check()  # the probe, whose request then needs no statement
    assert isinstance(_in_thread(log.check), outage.FailingFast)
    time.sleep(0.35)
    assert _in_thread(log.check) is None
