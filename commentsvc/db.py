"""Where the service finds its database: the Flask-SQLAlchemy engine of the app it runs in.

Standalone, app.py sets Flask-SQLAlchemy up; mounted, the host's own extension serves
(``COMMENTSVC_BIND_KEY`` picks one of its binds). The service only borrows the engine.
"""

from __future__ import annotations

import weakref
from pathlib import Path

from flask import current_app
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

SCHEMA_FILE = Path(__file__).resolve().parent.parent / "schema.sql"

_prepared: weakref.WeakSet[Engine] = weakref.WeakSet()


def get_engine() -> Engine:
    """The engine of the current app's Flask-SQLAlchemy extension."""
    ext = current_app.extensions["sqlalchemy"]
    engine = ext.engines[current_app.config.get("COMMENTSVC_BIND_KEY")]
    if engine not in _prepared:
        prepare_engine(engine)
    return engine


def snapshot(engine: Engine) -> Connection:
    """A connection whose reads share one snapshot, so a list's count and page agree.

    PostgreSQL runs the request's statements in one REPEATABLE READ, READ ONLY transaction;
    SQLite reads are already consistent with its single writer and atomic commits.
    """
    conn = engine.connect()
    if engine.dialect.name == "postgresql":
        conn = conn.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
    return conn


def prepare_engine(engine: Engine) -> None:
    """Give SQLite connections foreign keys, WAL and a busy timeout; PostgreSQL needs none."""
    _prepared.add(engine)
    if engine.dialect.name != "sqlite":
        return

    @event.listens_for(engine, "connect")
    def _sqlite_pragmas(dbapi_connection, _record):
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA busy_timeout = 5000")
        cursor.close()

    engine.dispose()  # connections made before the hook get it on reconnect


def engine_options(url: str, connect_timeout: int) -> dict:
    """Pool settings that let the service notice a lost database and recover by itself."""
    if url.startswith("sqlite"):
        return {"connect_args": {"timeout": connect_timeout}}
    return {
        "pool_pre_ping": True,
        "pool_recycle": 1800,
        "connect_args": {"connect_timeout": connect_timeout},
    }


def schema_statements() -> list[str]:
    """schema.sql split into statements (each ends with a semicolon at the end of a line)."""
    text = SCHEMA_FILE.read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("--")]
    return [stmt.strip() for stmt in "\n".join(lines).split(";\n") if stmt.strip(" \n;")]


def create_schema(conn: Connection) -> None:
    """Create every table and index that does not exist yet; safe to run again."""
    for statement in schema_statements():
        conn.exec_driver_sql(statement.rstrip(";"))


def drop_schema(conn: Connection) -> None:
    """Drop the service's tables (tests and `init-db --drop`); the host's are untouched."""
    for table in ("commentsvc_list_count", "commentsvc_comment",
                  "commentsvc_comicpage", "commentsvc_user"):
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table}")
