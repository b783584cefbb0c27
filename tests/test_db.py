"""Database plumbing: the schema, read snapshots and SQLite connection settings."""

from __future__ import annotations

import sqlalchemy as sa

from commentsvc.storage import engine as db


def table_names(conn) -> set[str]:
    return {name for name in sa.inspect(conn).get_table_names() if name.startswith("commentsvc_")}


def test_create_schema_is_safe_to_run_again(app):
    with app.app_context(), db.get_engine().begin() as conn:
        db.create_schema(conn)
        db.create_schema(conn)
        assert table_names(conn) == {"commentsvc_user", "commentsvc_comicpage",
                                     "commentsvc_comment", "commentsvc_list_count",
                                     "commentsvc_token", "commentsvc_idempotency_key",
                                     "commentsvc_event", "commentsvc_webhook_endpoint",
                                     "commentsvc_webhook_failure"}


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
