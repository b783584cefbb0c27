"""Loading many comments into an empty table: rows first, indexes and checks after.

Every index and foreign key of the comment table costs a random write or lookup per row
while rows arrive; built once the rows are in, each costs one sort or one join. For ten
million comments that is the difference between many minutes and a few. Seed and import
use this only when the comment table is empty (a first load), where nobody is reading
yet; a load onto existing comments keeps the indexes so that readers are never blocked.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.engine import Connection

from commentsvc.storage import engine
from commentsvc.storage.queries import interchange as interchange_sql
from commentsvc.storage.queries import loading as q


def comments_empty(conn: Connection) -> bool:
    """Whether no comment is stored yet."""
    return conn.execute(interchange_sql.ANY_COMMENT).first() is None


@contextmanager
def deferred_indexes(conn: Connection) -> Iterator[bool]:
    """Inside: True when the comment table was empty and its indexes are off for the load.

    Must run inside the caller's transaction: the indexes and foreign keys come back when
    the block ends, and if it raises, rolling back restores them (DDL is transactional on
    PostgreSQL and SQLite). The re-added foreign keys check every loaded row at once.
    """
    if conn.info.get(_DEFERRED) or not comments_empty(conn):
        yield False  # nested in another load's block, or readers may be using the indexes
        return
    conn.info[_DEFERRED] = True
    try:
        yield from _deferred(conn)
    finally:
        conn.info.pop(_DEFERRED, None)


_DEFERRED = "commentsvc_indexes_deferred"


def _deferred(conn: Connection) -> Iterator[bool]:
    postgresql = conn.dialect.name == "postgresql"
    if postgresql:
        for tuning in q.TUNE_POSTGRESQL:
            conn.execute(tuning)
        for statement in q.DROP_FOREIGN_KEYS:
            conn.exec_driver_sql(statement)
    for statement in q.DROP_SECONDARY_INDEXES:
        conn.exec_driver_sql(statement)
    yield True
    engine.create_schema(conn)  # CREATE INDEX IF NOT EXISTS: rebuilds exactly what was dropped
    if postgresql:
        for statement in q.ADD_FOREIGN_KEYS:
            conn.exec_driver_sql(statement)
    conn.execute(q.ANALYZE_COMMENTS)
