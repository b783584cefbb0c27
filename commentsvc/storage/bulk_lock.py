"""A flag that tells API writers at once that an import or a seed holds the writers' lock.

A bulk load holds the one writer's lock on list positions for minutes. Without this, each
API write queued behind it until its statement timeout (PostgreSQL) or busy timeout
(SQLite), 10 s by default, answered 503 only then, and meanwhile kept a worker thread
busy, so readers queued too. With it, a write that finds a bulk writer at work answers
503 with Retry-After straight away, and nothing waits.

PostgreSQL: the bulk writer takes an advisory lock exclusively, every other writer tries
it shared without waiting (queries.bulk_lock). SQLite: the same with flock() on a file
beside the database, ``<database>-bulk.lock`` (a database without a file, or whose
folder cannot take that file, has no flag: writers wait on the busy timeout as before).
Both are released by the transaction's end or the process's death, so a killed import
leaves no flag behind.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.engine import Connection, Engine

from commentsvc.storage import driver_cursor
from commentsvc.storage.queries import bulk_lock as q
from commentsvc.web.exceptions import APIError

# Key of the PostgreSQL advisory lock held by bulk writers ("bulk").
BULK_FLAG = 0x62756C6B
# Key of the one that serialises making the schema ("sche"): init-db, the deliverer and
# events take it alone (engine.one_schema_change_at_a_time), a bulk writer before the
# others, since it makes what it needs of the schema too (a first load rebuilds the
# indexes): two at once on a new database would collide in the catalog.
SCHEMA_LOCK = 0x73636865


class WritesPaused(APIError):
    """503: a bulk writer holds the writers' lock; the write was not attempted."""

    status = 503
    default_detail = "An import is in progress; writes resume when it ends. Try again shortly."


def take_postgresql(conn: Connection, positions_lock: int, bulk: bool) -> bool:
    """Take the writers' lock in the transaction; False (and no lock) when a bulk writer
    holds the flag and this writer is not one."""
    params = {"flag": BULK_FLAG, "positions": positions_lock}
    if bulk:
        conn.execute(q.BULK_WRITER, {**params, "schema": SCHEMA_LOCK})
        return True
    return bool(driver_cursor.rows(conn, q.WRITER, params)[0][0])


@contextmanager
def sqlite_flag(engine: Engine, bulk: bool) -> Iterator[None]:
    """Hold the SQLite flag file for the block: exclusively for a bulk writer (waiting for
    the writes under way), shared for any other; WritesPaused if a bulk writer has it."""
    path = _flag_path(engine)
    try:
        handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o644) if path else None
    except OSError:
        handle = None
    if handle is None:
        yield
        return
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX if bulk else fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise WritesPaused() from None
        yield
    finally:
        os.close(handle)  # releases the lock


def _flag_path(engine: Engine) -> str | None:
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:" \
            or database.startswith("file:"):
        return None
    return f"{database}-bulk.lock"
