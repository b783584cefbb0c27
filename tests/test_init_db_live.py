"""init-db on a live database (PostgreSQL): on an up-to-date schema it takes no lock that
holds a write, and an index schema.sql defines in place of an older one
(storage.upkeep.replace_indexes) is built CONCURRENTLY, so that posts go on meanwhile,
then the older one dropped; a build cut off is built again."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg2
import pytest
from test_interchange import invoke

from commentsvc.storage import engine, upkeep

OLD, NEW = "commentsvc_comment_replies", "commentsvc_comment_reply_threads"
BUILD_NEW = ("CREATE INDEX CONCURRENTLY {name} ON commentsvc_comment (parent_id, date_added, id) "
             "WHERE parent_id IS NOT NULL")
WRITE_LOCK = "LOCK TABLE commentsvc_comment IN ROW EXCLUSIVE MODE"  # what every insert takes


def made_before(app) -> None:
    """The database as the versions before the replacement left it: the old index only."""
    with app.app_context(), engine.get_engine().begin() as conn:
        conn.exec_driver_sql(f"DROP INDEX {NEW}")
        conn.exec_driver_sql(f"CREATE INDEX {OLD} ON commentsvc_comment "
                             "(parent_id, date_added, id)")


def indexes(app) -> dict[str, bool]:
    """The old and new index that are there, each with whether queries may use it."""
    with app.app_context(), engine.get_engine().connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT c.relname, i.indisvalid FROM pg_index AS i "
            "JOIN pg_class AS c ON c.oid = i.indexrelid WHERE c.relname IN (%s, %s)",
            (OLD, NEW)).all()
    return dict(rows)


def definition(app, name: str) -> str:
    with app.app_context(), engine.get_engine().connect() as conn:
        return str(conn.exec_driver_sql("SELECT pg_get_indexdef(to_regclass(%s))",
                                        (name,)).scalar())


def wait_for_a_waiting_build(app) -> int:
    """The backend of an index build that waits for a lock, once there is one."""
    deadline = time.monotonic() + 20
    with app.app_context():
        while time.monotonic() < deadline:
            # a transaction each time: one sees pg_stat_activity as it was when it began
            with engine.get_engine().connect() as conn:
                pid = conn.exec_driver_sql(
                    "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND query LIKE 'CREATE INDEX%%'").scalar()
            if pid is not None:
                return int(pid)
            time.sleep(0.05)
    raise AssertionError("no index build came to wait")


def connect(url: str):
    """A driver connection of its own to the test database."""
    return psycopg2.connect(url.replace("postgresql+psycopg2://", "postgresql://"))


def writer(url: str):
    """A connection of its own that holds the comment table as an insert does."""
    conn = connect(url)
    with conn.cursor() as cursor:
        cursor.execute(WRITE_LOCK)
    return conn


def test_init_db_does_not_wait_for_writes_under_way(pg_app, postgres_url):
    """A write under way on every table a post writes does not hold init-db up, so init-db
    holds up no write after it (CREATE INDEX IF NOT EXISTS would lock each table before
    finding its index there, wait for that write, and hold every later one to its end)."""
    running = connect(postgres_url)
    with running.cursor() as cursor:
        cursor.execute("LOCK TABLE commentsvc_comment, commentsvc_list_count, commentsvc_event, "
                       "commentsvc_idempotency_key IN ROW EXCLUSIVE MODE")
    outcome: list = []
    init_db = threading.Thread(
        target=lambda: outcome.append(invoke(pg_app.test_cli_runner(), ["init-db"])))
    init_db.start()
    try:
        init_db.join(20)
        assert not init_db.is_alive(), "init-db waited for a write under way"
        assert outcome[0].exit_code == 0, outcome[0].output
    finally:
        running.rollback()
        running.close()
        init_db.join(30)


def test_init_db_builds_the_new_index_and_drops_the_old_one(pg_app):
    result = invoke(pg_app.test_cli_runner(), ["seed", "--comments", "200", "--targets", "5"])
    assert result.exit_code == 0, result.output
    as_schema_builds_it = definition(pg_app, NEW)
    made_before(pg_app)

    result = invoke(pg_app.test_cli_runner(), ["init-db"])
    assert result.exit_code == 0, result.output
    assert f"Built the index {NEW} and dropped {OLD}, which it replaces." in result.output
    assert indexes(pg_app) == {NEW: True}
    assert definition(pg_app, NEW) == as_schema_builds_it

    again = invoke(pg_app.test_cli_runner(), ["init-db"])
    assert again.output == "Database schema ready.\n"


def test_posts_go_on_while_the_new_index_is_built(pg_app, postgres_url):
    """The build waits for a write that was running when it began, as any concurrent build
    does; a write that comes meanwhile is not held behind it (a plain CREATE INDEX would
    queue that write behind its own lock: it would wait out its lock_timeout)."""
    made_before(pg_app)
    running = writer(postgres_url)
    with pg_app.app_context():
        database = engine.get_engine()
        replaced: list[tuple[str, str]] = []
        build = threading.Thread(target=lambda: replaced.extend(upkeep.replace_indexes(database)))
        build.start()
        try:
            wait_for_a_waiting_build(pg_app)
            meanwhile = connect(postgres_url)
            with meanwhile.cursor() as cursor:
                cursor.execute("SET lock_timeout = '2s'")
                cursor.execute(WRITE_LOCK)  # raises LockNotAvailable if held behind the build
            meanwhile.rollback()
            meanwhile.close()
        finally:
            running.rollback()
            running.close()
            build.join(30)
    assert replaced == [(OLD, NEW)]
    assert indexes(pg_app) == {NEW: True}


def test_a_build_cut_off_is_built_again(pg_app, postgres_url):
    """A concurrent build cancelled while it waited leaves its index invalid (no query
    uses it); the next init-db drops it, builds it again and drops the old one."""
    made_before(pg_app)
    running = writer(postgres_url)
    cut_off: list[BaseException] = []

    def build() -> None:
        conn = connect(postgres_url)
        conn.autocommit = True
        try:
            with conn.cursor() as cursor:
                cursor.execute(BUILD_NEW.format(name=NEW))
        except psycopg2.Error as exc:
            cut_off.append(exc)
        finally:
            conn.close()

    builder = threading.Thread(target=build)
    builder.start()
    try:
        pid = wait_for_a_waiting_build(pg_app)
        with pg_app.app_context(), engine.get_engine().connect() as conn:
            assert conn.exec_driver_sql("SELECT pg_cancel_backend(%s)", (pid,)).scalar()
        builder.join(30)
    finally:
        running.rollback()
        running.close()
    assert isinstance(cut_off[0], psycopg2.errors.QueryCanceled)
    assert indexes(pg_app) == {OLD: True, NEW: False}

    result = invoke(pg_app.test_cli_runner(), ["init-db"])
    assert result.exit_code == 0, result.output
    assert indexes(pg_app) == {NEW: True}


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_sqlite_replaces_in_init_dbs_transaction(app):
    """SQLite has no concurrent build (a write waits for any build anyway): create_schema
    builds the new index and drops the old one, and this does nothing."""
    made_before(app)
    with app.app_context():
        assert upkeep.replace_indexes(engine.get_engine()) == []
    result = invoke(app.test_cli_runner(), ["init-db"])
    assert result.exit_code == 0, result.output
    with app.app_context(), engine.get_engine().connect() as conn:
        names = {row[0] for row in conn.exec_driver_sql(
            "SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert NEW in names and OLD not in names


def test_the_bench_posts_through_a_replacement(postgres_url):
    """bench/init_db_live.py, small: every post it sent while init-db replaced the old index
    was answered 201 (``postgres_url``: it needs the PostgreSQL server, not this database)."""
    root = Path(__file__).resolve().parent.parent
    ran = subprocess.run([sys.executable, "bench/init_db_live.py", "--comments", "300",
                          "--targets", "5", "--clients", "2", "--lead", "0.5", "--tail", "0.5",
                          "--old-index"], cwd=root, capture_output=True, text=True,
                         timeout=300, check=True)
    figures = json.loads(ran.stdout)
    assert figures["init_db_exit"] == 0
    assert figures["init_db_output"].startswith(f"Built the index {NEW} and dropped {OLD}")
    assert figures["posts"]["count"] > 0
    assert set(figures["posts"]["statuses"]) == {"201"}
