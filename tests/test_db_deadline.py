"""A hung PostgreSQL costs a request at most its deadline: 503 JSON with Retry-After, the
connection closed, a short fail-fast window, one log line when the outage starts and one
when it ends; commands and the writers' lock wait longer; SQL parameters are never shown.

The "hung" server here is a statement that sleeps (pg_sleep) or a socket that accepts
and never answers; tests/test_faults_under_load.py stops a whole cluster with SIGSTOP.
"""

from __future__ import annotations

import logging
import socket
import threading
import time

import psycopg2
import pytest
import sqlalchemy as sa
from psycopg2 import extensions

from commentsvc import settings
from commentsvc.interchange import ndjson
from commentsvc.operations import demo
from commentsvc.standalone import create_app
from commentsvc.storage import counters, deadline, outage
from commentsvc.storage import engine as db
from conftest import Community, make_app
from helpers import assert_error, slow_page_reads

UNAVAILABLE = "The database is unavailable. Try again shortly."


def _slow(original, seconds: float):
    """``original`` run after a statement that outlasts a small deadline."""
    def slowed(conn, *args, **kwargs):
        conn.execute(sa.text("SELECT pg_sleep(:s)"), {"s": seconds})
        return original(conn, *args, **kwargs)
    return slowed


@pytest.fixture
def deadline_app(postgres_url):
    made = []

    def factory(**config):
        made.append(make_app(postgres_url))  # a fresh schema, made without a small deadline
        made.append(create_app({"TESTING": True, "COMMENTSVC_DATABASE_URL": postgres_url,
                                "COMMENTSVC_RESPONSE_CACHE_MB": 0, **config}))
        return made[-1]

    yield factory
    for app in made:
        engine_of(app).dispose()


def engine_of(app):
    """The app's engine without db.get_engine's fail-fast check."""
    with app.app_context():
        return app.extensions["sqlalchemy"].engine


def test_the_settings_are_parsed_and_checked():
    parsed = settings.from_environment({"COMMENTSVC_DB_RESPONSE_TIMEOUT": "2.5",
                                        "COMMENTSVC_DB_FAIL_FAST_SECONDS": "0",
                                        "COMMENTSVC_IDLE_IN_TRANSACTION_TIMEOUT_MS": "750"})
    assert parsed == {"COMMENTSVC_DB_RESPONSE_TIMEOUT": 2.5,
                      "COMMENTSVC_DB_FAIL_FAST_SECONDS": 0,
                      "COMMENTSVC_IDLE_IN_TRANSACTION_TIMEOUT_MS": 750}
    defaults = settings.resolved({})
    assert (defaults["DB_RESPONSE_TIMEOUT"], defaults["DB_FAIL_FAST_SECONDS"],
            defaults["IDLE_IN_TRANSACTION_TIMEOUT_MS"]) == (4, 2, 2000)
    for name, value in (("COMMENTSVC_DB_RESPONSE_TIMEOUT", "-1"),
                        ("COMMENTSVC_DB_RESPONSE_TIMEOUT", "soon"),
                        ("COMMENTSVC_DB_FAIL_FAST_SECONDS", "nan"),
                        ("COMMENTSVC_IDLE_IN_TRANSACTION_TIMEOUT_MS", "-5")):
        with pytest.raises(settings.SettingsError, match=name):
            settings.from_environment({name: value})


def test_engine_options_hide_parameters_and_set_the_socket_limits():
    options = db.engine_options("postgresql://h/d", 3, 250, False, 4, 5000)
    assert options["hide_parameters"] is True
    assert options["connect_args"] == {
        "connect_timeout": 3,
        "options": "-c statement_timeout=250 -c idle_in_transaction_session_timeout=5000",
        "keepalives": 1, "keepalives_idle": 2, "keepalives_interval": 1,
        "keepalives_count": 2, "tcp_user_timeout": 4000}
    assert db.engine_options("sqlite:///x.db", 3)["hide_parameters"] is True
    assert "keepalives" not in db.engine_options("postgresql://h/d", 3, 250)["connect_args"]


def test_the_timeouts_reach_the_server_and_errors_show_no_parameters(deadline_app):
    app = deadline_app(COMMENTSVC_IDLE_IN_TRANSACTION_TIMEOUT_MS=1500)
    with app.app_context(), db.get_engine().connect() as conn:
        assert conn.exec_driver_sql("SHOW idle_in_transaction_session_timeout").scalar() \
            == "1500ms"
        assert extensions.get_wait_callback() is deadline.wait
        conn.exec_driver_sql("SET statement_timeout = 50")
        with pytest.raises(sa.exc.OperationalError) as raised:  # what a 503 would log
            conn.execute(sa.text("SELECT pg_sleep(1), :secret"), {"secret": "token-digest"})
    assert "token-digest" not in str(raised.value)
    assert "SQL parameters hidden" in str(raised.value)
    assert outage.one_line(raised.value) == (
        "QueryCanceled: canceling statement due to statement timeout")


def test_a_session_idle_in_a_transaction_is_ended_by_the_server(deadline_app):
    """The backstop for a client that vanished mid-write: its lock is released."""
    app = deadline_app(COMMENTSVC_IDLE_IN_TRANSACTION_TIMEOUT_MS=300)
    with app.app_context():
        engine = db.get_engine()
        with engine.connect() as holder:
            holder.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": db.POSITIONS_LOCK})
            time.sleep(1)  # idle in the transaction past the timeout: the server ends it
            with engine.connect() as other:
                assert other.execute(sa.text("SELECT pg_try_advisory_xact_lock(:k)"),
                                     {"k": db.POSITIONS_LOCK}).scalar() is True
            with pytest.raises(sa.exc.OperationalError):
                holder.execute(sa.text("SELECT 1"))


def test_a_read_the_server_does_not_answer_is_503_within_the_deadline(deadline_app,
                                                                       monkeypatch, caplog):
    app = deadline_app(COMMENTSVC_DB_RESPONSE_TIMEOUT=0.5, COMMENTSVC_DB_FAIL_FAST_SECONDS=1,
                       COMMENTSVC_RETRY_AFTER=3)
    Community(app)
    client = app.test_client()
    assert client.get("/api/comments/").status_code == 200
    slow_page_reads(monkeypatch, 2)
    caplog.set_level(logging.WARNING, "commentsvc.database")
    started = time.monotonic()
    response = client.get("/api/comments/")
    waited = time.monotonic() - started
    assert_error(response, 503, UNAVAILABLE)
    assert response.headers["Retry-After"] == "3"
    assert waited < 1.5  # the deadline, not the 2 s sleep (nor a second try after it)
    monkeypatch.undo()

    # Right after: refused at once, without a connection (the fail-fast window).
    for _ in range(3):
        assert_error(client.get("/api/comments/"), 503, UNAVAILABLE)
    assert engine_of(app).pool.checkedout() == 0
    time.sleep(1.1)
    assert client.get("/api/comments/").status_code == 200  # it recovers by itself

    messages = [r.getMessage() for r in caplog.records if r.name == "commentsvc.database"]
    assert len(messages) == 2, messages
    assert messages[0].startswith("database unavailable (postgresql+psycopg2://")
    assert "did not answer within 0.5 s" in messages[0]
    assert messages[1].startswith("database back (postgresql+psycopg2://")
    assert messages[1].endswith("4 requests answered 503")


def test_a_write_the_server_does_not_answer_is_503_and_writes_nothing(deadline_app,
                                                                      monkeypatch):
    from commentsvc.storage import posting

    app = deadline_app(COMMENTSVC_DB_RESPONSE_TIMEOUT=0.5, COMMENTSVC_DB_FAIL_FAST_SECONDS=0)
    people = Community(app)
    monkeypatch.setattr(posting, "write_batch", _slow(posting.write_batch, 2))
    response = app.test_client().post("/api/comments/", headers=people.auth("ann"), json={
        "content_type": "comics.comicpage", "object_id": 10, "body": "never stored"})
    assert_error(response, 503, UNAVAILABLE)
    monkeypatch.undo()
    time.sleep(2)  # the server finishes the sleep, finds the client gone, rolls back
    with app.app_context(), db.get_engine().connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM commentsvc_comment "
                                    "WHERE body = 'never stored'")).scalar() == 0
        assert conn.execute(sa.text(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND state LIKE 'idle in transaction%'")).scalar() == 0


def test_a_writer_may_wait_for_the_lock_longer_than_the_deadline(deadline_app):
    """Queued behind another writer for 1.5 s under a 0.5 s deadline, a post still lands:
    the lock wait is bounded by the statement timeout, which the server enforces."""
    app = deadline_app(COMMENTSVC_DB_RESPONSE_TIMEOUT=0.5, COMMENTSVC_STATEMENT_TIMEOUT_MS=5000)
    people = Community(app)
    holding = threading.Event()

    def hold_the_lock():
        with app.app_context(), db.writing(db.get_engine()):
            holding.set()
            time.sleep(1.5)

    holder = threading.Thread(target=hold_the_lock)
    holder.start()
    holding.wait(5)
    response = app.test_client().post("/api/comments/", headers=people.auth("ann"), json={
        "content_type": "comics.comicpage", "object_id": 10, "body": "after the wait"})
    holder.join()
    assert response.status_code == 201, response.get_data(as_text=True)


def test_connecting_to_a_server_that_never_answers_honours_the_connect_timeout():
    """With a wait callback psycopg2 connects asynchronously, where libpq applies no
    connect_timeout; the callback applies it (a frozen postmaster accepts TCP but says
    nothing)."""
    deadline.install()
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # the kernel completes the handshake; nobody ever answers
    try:
        started = time.monotonic()
        with pytest.raises(deadline.DatabaseNoAnswer):
            psycopg2.connect(host="127.0.0.1", port=silent.getsockname()[1],
                             user="nobody", dbname="none", connect_timeout=1)
        assert time.monotonic() - started < 2.5
    finally:
        silent.close()


def test_a_server_that_stops_answering_while_a_reader_prepares_costs_one_deadline(
        deadline_app, monkeypatch):
    """The counter reader's new connection prepares its statements first; a server that
    does not answer then is hung, as for any statement: 503 after the deadline, no second
    wait on another connection, and the prepared reads stay on for when it is back."""
    app = deadline_app(COMMENTSVC_DB_RESPONSE_TIMEOUT=0.5, COMMENTSVC_DB_FAIL_FAST_SECONDS=1)
    Community(app)
    monkeypatch.setattr(counters, "PREPARE_PAGE_READS",
                        "SELECT pg_sleep(2); " + counters.PREPARE_PAGE_READS)
    client = app.test_client()
    started = time.monotonic()
    assert_error(client.get("/api/comments/?page_size=3"), 503, UNAVAILABLE)
    assert time.monotonic() - started < 1.5  # one deadline, not a second wait after it
    monkeypatch.undo()
    with app.app_context():
        reader = app.extensions["commentsvc"].counter_readers.for_engine(engine_of(app))
    assert reader.uses_prepared
    time.sleep(1.1)  # the fail-fast window
    assert client.get("/api/comments/?page_size=3").status_code == 200
    assert reader.uses_prepared


def test_a_host_sites_own_queries_on_a_shared_engine_keep_no_deadline(postgres_url,
                                                                       monkeypatch):
    """Mounted on the site's own engine, the service's deadline holds for its requests
    alone: the site's slower query is answered, before and after a service request that
    the deadline ends (in the same thread), and the service still answers 503 in time;
    the site opens connections in the service's fail-fast window too."""
    from flask import Flask
    from flask_sqlalchemy import SQLAlchemy

    from commentsvc import comments_api

    make_app(postgres_url)  # a fresh schema of the service's tables
    site = Flask("site_sharing_its_engine")
    site.config.update(SQLALCHEMY_DATABASE_URI=postgres_url, COMMENTSVC_RESPONSE_CACHE_MB=0,
                       COMMENTSVC_DB_RESPONSE_TIMEOUT=0.5, COMMENTSVC_DB_FAIL_FAST_SECONDS=1)
    db_ext = SQLAlchemy()
    db_ext.init_app(site)

    @site.get("/report")
    def report():
        return str(db_ext.session.execute(sa.text("SELECT pg_sleep(0.8), 7")).one()[1])

    site.register_blueprint(comments_api, url_prefix="/community")
    client = site.test_client()
    try:
        assert client.get("/community/api/comments/").status_code == 200
        assert client.get("/report").data == b"7"  # 0.8 s: longer than the deadline
        slow_page_reads(monkeypatch, 2)
        started = time.monotonic()
        assert_error(client.get("/community/api/comments/?page_size=3"), 503, UNAVAILABLE)
        assert time.monotonic() - started < 1.5
        monkeypatch.undo()
        assert client.get("/report").data == b"7"  # the next request is the site's again
        with site.app_context():
            db_ext.engine.dispose()
            outage.outage_of(db_ext.engine).failed("a test's hung database", hung=True)
        assert_error(client.get("/community/api/comments/"), 503, UNAVAILABLE)  # the window
        assert client.get("/report").data == b"7"  # the site opens a connection in it
    finally:
        with site.app_context():
            db_ext.engine.dispose()


def test_a_hung_connect_is_503_and_opens_the_fail_fast_window(postgres_url):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    url = sa.engine.make_url(postgres_url).set(host="127.0.0.1", port=silent.getsockname()[1])
    app = create_app({"TESTING": True, "COMMENTSVC_DB_CONNECT_TIMEOUT": 1,
                      "COMMENTSVC_DATABASE_URL": url.render_as_string(hide_password=False)})
    try:
        client = app.test_client()
        started = time.monotonic()
        assert_error(client.get("/api/comments/"), 503, UNAVAILABLE)
        assert time.monotonic() - started < 2.5
        with app.app_context():
            with pytest.raises(outage.FailingFast):
                db.get_engine()
        readiness = client.get("/readyz")
        assert readiness.status_code == 503
        assert readiness.get_json()["reason"] == "database unreachable"
    finally:
        silent.close()
        engine_of(app).dispose()


def test_commands_wait_as_long_as_they_need(postgres_url, monkeypatch):
    """Commands lift the deadline with the statement timeout (each command here first
    sleeps past it), and COPY works although a wait callback is set."""
    make_app(postgres_url)
    app = create_app({"TESTING": True, "COMMENTSVC_DATABASE_URL": postgres_url,
                      "COMMENTSVC_DB_RESPONSE_TIMEOUT": 0.2})
    monkeypatch.setattr(demo, "seed", _slow(demo.seed, 0.5))
    monkeypatch.setattr(ndjson, "dump", _slow(ndjson.dump, 0.5))
    try:
        assert extensions.get_wait_callback() is deadline.wait
        runner = app.test_cli_runner()
        result = runner.invoke(args=["seed", "--comments", "300", "--targets", "10"])
        assert result.exit_code == 0, result.output
        assert runner.invoke(args=["export", "-"]).output.count('"type": "comment"') == 300
        with app.app_context(), db.get_engine().connect() as conn:
            with pytest.raises(sa.exc.OperationalError):  # the limit is back on the pool
                conn.execute(sa.text("SELECT pg_sleep(0.5)"))
    finally:
        engine_of(app).dispose()


def test_a_new_connections_first_statements_wait_with_the_deadline_too(postgres_url):
    """SQLAlchemy's own statements on a process's first connection (the dialect's set-up:
    its version and hstore look-ups, run by listeners of the connect event made with the
    engine) wait with the deadline like any other: a server that stops answering then
    cost a worker the whole stop (an attacker's finding). A listener made before the
    deadline's stands in for them here, its statement slower than the deadline."""
    engine = sa.create_engine(postgres_url, poolclass=sa.pool.NullPool)
    slept = []

    @sa.event.listens_for(engine, "connect")
    def _set_up(dbapi_connection, _record):
        with dbapi_connection.cursor() as cursor:
            cursor.execute("SELECT pg_sleep(1.5)")
        slept.append(True)

    deadline.watch(engine, 0.3)
    try:
        started = time.monotonic()
        with pytest.raises(sa.exc.OperationalError) as hung:
            engine.connect().close()
        assert isinstance(hung.value.orig, deadline.DatabaseNoAnswer)
        assert time.monotonic() - started < 1.2 and not slept
    finally:
        engine.dispose()


def test_a_connection_opened_in_the_fail_fast_window_is_refused_at_once(postgres_url):
    """Threads queued behind a process's first connection, whose set-up SQLAlchemy runs one
    thread at a time, open theirs after the first met a hung server: each is refused like
    a request in the window, not left to wait out a deadline of its own in turn; after the
    window the probe's thread connects."""
    engine = sa.create_engine(postgres_url, poolclass=sa.pool.NullPool)
    deadline.watch(engine, 4)
    log = outage.watch(engine, 0.3, 5)
    try:
        log.failed("the first connection's set-up was not answered", hung=True)
        started = time.monotonic()
        with pytest.raises(outage.FailingFast):
            engine.connect()
        assert time.monotonic() - started < 0.25
        time.sleep(0.35)
        with engine.connect() as conn:  # this thread is the probe now
            assert conn.exec_driver_sql("SELECT 1").scalar() == 1
        engine.connect().close()  # answered: the window is closed for everyone
    finally:
        engine.dispose()
