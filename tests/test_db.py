"""Database plumbing: the schema, read snapshots and SQLite connection settings."""

from __future__ import annotations

import doctest
import re

import sqlalchemy as sa

from commentsvc.rules.rendered import display_key
from commentsvc.storage import engine as db
from commentsvc.storage.counters import PageRead
from commentsvc.storage.queries import listing
from commentsvc.storage.queries import schema as schema_sql


def table_names(conn) -> set[str]:
    return {name for name in sa.inspect(conn).get_table_names() if name.startswith("commentsvc_")}


def test_create_schema_is_safe_to_run_again(app):
    with app.app_context(), db.get_engine().begin() as conn:
        db.create_schema(conn)
        db.create_schema(conn)
        assert table_names(conn) == {"commentsvc_user", "commentsvc_comicpage",
                                     "commentsvc_comment", "commentsvc_list_count",
                                     "commentsvc_token", "commentsvc_browser_session",
                                     "commentsvc_idempotency_key", "commentsvc_event",
                                     "commentsvc_webhook_endpoint",
                                     "commentsvc_webhook_failure"}


def test_create_schema_adds_the_browser_session_table_to_an_older_database(app):
    """A database made before sign-in sessions were kept gets their table and its index
    from init-db, its keys kept."""
    with app.app_context(), db.get_engine().begin() as conn:
        keys = conn.exec_driver_sql("SELECT count(*) FROM commentsvc_token").scalar()
        conn.exec_driver_sql("DROP TABLE commentsvc_browser_session")
        db.create_schema(conn)
        assert "commentsvc_browser_session" in table_names(conn)
        assert [index["name"] for index in sa.inspect(conn).get_indexes(
            "commentsvc_browser_session")] == ["commentsvc_browser_session_created"]
        assert conn.exec_driver_sql("SELECT count(*) FROM commentsvc_token").scalar() == keys


def test_create_schema_upgrades_a_database_made_before_sign_in(app):
    """A user table without is_staff (and no token table) gets both, keeping its rows."""
    with app.app_context(), db.get_engine().begin() as conn:
        db.drop_schema(conn)
        conn.exec_driver_sql("CREATE TABLE commentsvc_user (id BIGINT PRIMARY KEY, "
                             "username TEXT NOT NULL, avatar TEXT)")
        conn.exec_driver_sql("INSERT INTO commentsvc_user VALUES (5, 'old', NULL)")
        db.create_schema(conn)
        assert "commentsvc_token" in table_names(conn)
        row = conn.exec_driver_sql("SELECT username, is_staff FROM commentsvc_user").one()
        assert (row[0], bool(row[1])) == ("old", False)


def index_definitions(conn) -> dict[str, str]:
    """The comment table's indexes as the database spells them, by name."""
    if conn.dialect.name == "postgresql":
        rows = conn.exec_driver_sql("SELECT indexname, indexdef FROM pg_indexes "
                                    "WHERE tablename = 'commentsvc_comment'")
    else:
        rows = conn.exec_driver_sql("SELECT name, sql FROM sqlite_master WHERE type = 'index' "
                                    "AND tbl_name = 'commentsvc_comment' AND sql IS NOT NULL")
    return {name: definition for name, definition in rows}


def test_the_replies_index_leaves_the_roots_out(app):
    with app.app_context(), db.get_engine().begin() as conn:
        definition = index_definitions(conn)["commentsvc_comment_reply_threads"]
        spelled = re.sub(r"[()\s]+", " ", definition).strip()  # PostgreSQL adds brackets
        assert spelled.endswith("parent_id, date_added, id WHERE parent_id IS NOT NULL")


def test_a_replaced_index_is_built_from_schema_sqls_own_statement():
    statement = db.index_statement("commentsvc_comment_reply_threads")
    assert schema_sql.built_concurrently(statement).startswith(
        "CREATE INDEX CONCURRENTLY commentsvc_comment_reply_threads")
    assert doctest.testmod(schema_sql).attempted == 1 and doctest.testmod(schema_sql).failed == 0


def test_create_schema_replaces_the_replies_index_that_held_every_comment(app):
    """A database made before the replies index left the roots out gets the new index, and
    the old one is dropped (after the new one is built), its comments kept."""
    with app.app_context(), db.get_engine().begin() as conn:
        conn.exec_driver_sql("DROP INDEX commentsvc_comment_reply_threads")
        conn.exec_driver_sql("CREATE INDEX commentsvc_comment_replies "
                             "ON commentsvc_comment (parent_id, date_added, id)")
        db.create_schema(conn)
        indexes = index_definitions(conn)
        assert "commentsvc_comment_reply_threads" in indexes
        assert "commentsvc_comment_replies" not in indexes


def test_a_pages_replies_are_read_through_the_replies_index(app):
    """The one-statement page read finds each root's replies by the partial index (its
    condition follows from ``parent_id = root``), on either database: were it not usable,
    every page would scan the comment table."""
    settings = app.extensions["commentsvc"].settings
    read = PageRead("site", "site", 1, 20, 5, display_key(settings.time_zone,
                                                            settings.default_avatar))
    with app.app_context(), db.get_engine().begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
            explain = "EXPLAIN "
        else:
            explain = "EXPLAIN QUERY PLAN "
        plan = conn.execute(sa.text(explain + listing.page_read("site", conn.dialect.name)),
                            read.parameters()).all()
        assert "commentsvc_comment_reply_threads" in " ".join(str(row) for row in plan)


def test_drop_schema_removes_only_the_services_tables(app):
    with app.app_context(), db.get_engine().begin() as conn:
        conn.exec_driver_sql("CREATE TABLE host_table (id INTEGER PRIMARY KEY)")
        db.drop_schema(conn)
        assert table_names(conn) == set()
        assert "host_table" in sa.inspect(conn).get_table_names()
        conn.exec_driver_sql("DROP TABLE host_table")


def test_page_reads_share_one_snapshot(app):
    with app.app_context():
        engine = db.get_engine()
        with db.snapshot(engine) as conn:
            if engine.dialect.name == "postgresql":
                assert conn.exec_driver_sql("SHOW transaction_isolation").scalar() == (
                    "repeatable read")
                assert conn.exec_driver_sql("SHOW transaction_read_only").scalar() == "on"
            else:
                assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
                assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
