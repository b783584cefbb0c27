"""Statement timeout and connection checks: configured, validated, and a slow statement is
a 503 that leaves nothing half-written."""

from __future__ import annotations

import time

import pytest
import sqlalchemy as sa

from commentsvc import settings
from commentsvc.interchange import ndjson
from commentsvc.operations import demo
from commentsvc.standalone import create_app
from commentsvc.storage import engine as db
from commentsvc.storage import posting
from conftest import Community, make_app
from helpers import assert_error, slow_page_reads

UNAVAILABLE = "The database is unavailable. Try again shortly."


def test_timeout_and_pre_ping_are_parsed_and_checked():
    parsed = settings.from_environment({"COMMENTSVC_STATEMENT_TIMEOUT_MS": "250",
                                        "COMMENTSVC_POOL_PRE_PING": "on"})
    assert parsed == {"COMMENTSVC_STATEMENT_TIMEOUT_MS": 250, "COMMENTSVC_POOL_PRE_PING": True}
    defaults = settings.resolved({})
    assert (defaults["STATEMENT_TIMEOUT_MS"], defaults["POOL_PRE_PING"]) == (10000, False)
    for name, value in (("COMMENTSVC_STATEMENT_TIMEOUT_MS", "-1"),
                        ("COMMENTSVC_STATEMENT_TIMEOUT_MS", "soon"),
                        ("COMMENTSVC_POOL_PRE_PING", "maybe")):
        with pytest.raises(settings.SettingsError, match=name):
            settings.from_environment({name: value})


def test_engine_options_carry_the_checks():
    options = db.engine_options("postgresql://h/d", 3, 250, True)
    assert options["pool_pre_ping"] is True
    assert options["connect_args"] == {"connect_timeout": 3,
                                       "options": "-c statement_timeout=250"}
    assert "options" not in db.engine_options("postgresql://h/d", 3, 0)["connect_args"]


def _slow(original, seconds: float = 2):
    """``original`` run after a statement that outlasts any small timeout."""
    def slowed(conn, *args, **kwargs):
        conn.execute(sa.text("SELECT pg_sleep(:s)"), {"s": seconds})
        return original(conn, *args, **kwargs)
    return slowed


def test_the_timeout_reaches_the_server_and_pre_ping_works(postgres_url):
    app = make_app(postgres_url, COMMENTSVC_STATEMENT_TIMEOUT_MS=1234,
                   COMMENTSVC_POOL_PRE_PING=True)
    try:
        with app.app_context(), db.get_engine().connect() as conn:
            assert conn.exec_driver_sql("SHOW statement_timeout").scalar() == "1234ms"
            assert db.get_engine().pool._pre_ping
    finally:
        with app.app_context():
            db.get_engine().dispose()


def test_a_slow_read_is_cancelled_and_answered_503(postgres_url, monkeypatch):
    app = make_app(postgres_url, COMMENTSVC_STATEMENT_TIMEOUT_MS=100,
                   COMMENTSVC_RESPONSE_CACHE_MB=0)
    try:
        Community(app)
        client = app.test_client()
        slow_page_reads(monkeypatch, 2)
        response = client.get("/api/comments/")
        assert_error(response, 503, UNAVAILABLE)
        assert response.headers["Retry-After"] == "5"
        monkeypatch.undo()
        assert client.get("/api/comments/").status_code == 200  # the pool is still fine
    finally:
        with app.app_context():
            db.get_engine().dispose()


def test_a_slow_write_is_503_and_writes_nothing(postgres_url, monkeypatch):
    app = make_app(postgres_url, COMMENTSVC_STATEMENT_TIMEOUT_MS=100)
    try:
        people = Community(app)
        monkeypatch.setattr(posting, "write_batch", _slow(posting.write_batch))
        response = app.test_client().post("/api/comments/", headers=people.auth("ann"), json={
            "content_type": "comics.comicpage", "object_id": 10, "body": "never stored"})
        assert_error(response, 503, UNAVAILABLE)
        with app.app_context(), db.get_engine().connect() as conn:
            stored = conn.execute(sa.text("SELECT count(*) FROM commentsvc_comment "
                                          "WHERE body = 'never stored'")).scalar()
        assert stored == 0
    finally:
        with app.app_context():
            db.get_engine().dispose()


def test_commands_are_not_bound_by_the_request_timeout(postgres_url, monkeypatch):
    """Loading runs statements far longer than a request's; the commands lift the timeout
    (here each command first sleeps past it)."""
    make_app(postgres_url)  # empty schema
    app = create_app({"TESTING": True, "COMMENTSVC_DATABASE_URL": postgres_url,
                      "COMMENTSVC_STATEMENT_TIMEOUT_MS": 100})
    monkeypatch.setattr(demo, "seed", _slow(demo.seed, 0.3))
    monkeypatch.setattr(ndjson, "dump", _slow(ndjson.dump, 0.3))
    try:
        runner = app.test_cli_runner()
        result = runner.invoke(args=["seed", "--comments", "300", "--targets", "10"])
        assert result.exit_code == 0, result.output
        assert runner.invoke(args=["export", "-"]).output.count('"type": "comment"') == 300
    finally:
        with app.app_context():
            db.get_engine().dispose()


def test_a_writer_behind_a_stuck_lock_holder_gives_up_after_the_lock_timeout(postgres_url):
    """A writer never queues long behind a writer that stopped (a vanished client's open
    transaction): after COMMENTSVC_LOCK_TIMEOUT_MS it is 503 and writes nothing, and the
    commands lift the limit."""
    app = make_app(postgres_url, COMMENTSVC_LOCK_TIMEOUT_MS=300,
                   COMMENTSVC_RESPONSE_CACHE_MB=0)
    try:
        community = Community(app)
        client = app.test_client()
        before = client.get("/api/comments/").get_json()["p8n"]["num_pages"]
        with app.app_context():
            engine = db.get_engine()
            with engine.connect() as conn:
                assert conn.exec_driver_sql("SHOW lock_timeout").scalar() == "300ms"
            with db.writing(engine):  # holds the writers' lock, like a stuck writer
                posted = client.post("/api/comments/", headers=community.auth("ann"),
                                     json={"content_type": "comics.comicpage",
                                           "object_id": 10, "body": "queued"})
                assert_error(posted, 503, UNAVAILABLE)
                assert posted.headers["Retry-After"] == "5"
            with engine.begin() as conn:
                db.without_statement_timeout(conn)
                assert conn.exec_driver_sql("SHOW lock_timeout").scalar() == "0"
            assert db.engine_options("postgresql://h/d", 3, 0, lock_timeout_ms=300)[
                "connect_args"]["options"] == "-c lock_timeout=300"
        assert client.get("/api/comments/").get_json()["p8n"]["num_pages"] == before
        with app.app_context(), db.get_engine().connect() as conn:
            assert conn.exec_driver_sql(
                "SELECT count(*) FROM commentsvc_comment WHERE body = 'queued'").scalar() == 0
    finally:
        with app.app_context():
            db.get_engine().dispose()


def test_making_the_schema_is_not_bound_by_the_request_timeouts(postgres_url):
    """The inspection create_schema runs may pause between its statements longer than a
    request may idle in its transaction: the rest of that transaction has no limits."""
    app = create_app({"TESTING": True, "COMMENTSVC_DATABASE_URL": postgres_url,
                      "COMMENTSVC_IDLE_IN_TRANSACTION_TIMEOUT_MS": 200,
                      "COMMENTSVC_STATEMENT_TIMEOUT_MS": 100})
    try:
        with app.app_context(), db.get_engine().begin() as conn:
            db.create_schema(conn)
            time.sleep(0.5)  # idle in the transaction, past the 200 ms allowance
            assert conn.exec_driver_sql("SHOW idle_in_transaction_session_timeout").scalar() \
                == "0"
            assert conn.exec_driver_sql("SHOW statement_timeout").scalar() == "0"
    finally:
        with app.app_context():
            db.get_engine().dispose()
