"""Upkeep the commands do on a connection of their own, outside any transaction: the
tables a load filled, and the comment table after its renders were made again, vacuumed
before anyone reads them; and indexes replaced without holding writes.

PostgreSQL marks a row's visibility on it (hint bits) the first time a query reads it after
its transaction ended; until a vacuum has passed, every page of freshly loaded rows is
dirtied by its first reader and has to be written out again, and only the comment table
has statistics. Autovacuum gets there in the background, throttled, and may be off. So a
seed or an import ends by vacuuming and analysing what it loaded (BENCHMARKS.md, "The
database read into memory first": 300 random pages of a freshly seeded million comments
dirtied 2,344 blocks, none once vacuumed). Rendering every comment again (``rerender``)
leaves the same unmarked rows, and a dead version of each beside them: it ends with a
vacuum of the comment table too. SQLite keeps no such marks: nothing to do there.

An index schema.sql defines in place of an older one (queries.schema.REPLACED_INDEXES) is
built by init-db with CREATE INDEX CONCURRENTLY, which lets writes go on, where a plain
build in init-db's transaction would hold every post for as long as it takes (a million
comments: seconds; posts give up after COMMENTSVC_LOCK_TIMEOUT_MS).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.engine import Connection, Engine

from commentsvc.storage import deadline
from commentsvc.storage.engine import index_statement
from commentsvc.storage.queries import connections, loading, renders, schema


def vacuum_loaded(engine: Engine) -> bool:
    """Vacuum and analyse the tables a seed or import fills (PostgreSQL); whether it did
    (not on SQLite)."""
    return _vacuum(engine, loading.VACUUM_LOADED)


def vacuum_rendered(engine: Engine) -> bool:
    """Vacuum and analyse the comment table after renders were stored again (PostgreSQL);
    whether it did (not on SQLite)."""
    return _vacuum(engine, renders.VACUUM_RENDERED)


def _vacuum(engine: Engine, statement: str) -> bool:
    if engine.dialect.name != "postgresql":
        return False
    with _command_connection(engine) as conn:
        conn.exec_driver_sql(statement)
    return True


def replace_indexes(engine: Engine) -> list[tuple[str, str]]:
    """Build each index that replaced an older one where the older one is still there, then
    drop the older one, both CONCURRENTLY (PostgreSQL); the (older, newer) names of
    those replaced.

    A build cut off (the command killed, the server restarted) leaves its index invalid,
    which no query uses: the next run drops it and builds it again. On SQLite, and on a
    database that never had the older indexes, nothing is done here (create_schema builds
    what is missing).
    """
    if engine.dialect.name != "postgresql":
        return []
    replaced = []
    with _command_connection(engine) as conn:
        for old, new in schema.REPLACED_INDEXES.items():
            old_there, new_valid = conn.execute(schema.INDEX_STATE,
                                                {"old": old, "new": new}).one()
            if not old_there:
                continue
            if new_valid is False:
                conn.exec_driver_sql(schema.DROP_INDEX_CONCURRENTLY.format(name=new))
            if new_valid is not True:
                conn.exec_driver_sql(schema.built_concurrently(index_statement(new)))
            conn.exec_driver_sql(schema.DROP_INDEX_CONCURRENTLY.format(name=old))
            replaced.append((old, new))
    return replaced


@contextmanager
def _command_connection(engine: Engine) -> Iterator[Connection]:
    """A connection in autocommit without the request timeouts (a vacuum or an index build
    reads every page of a table, far longer than any request may take), closed afterwards
    so that no request ever gets a session without them."""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        try:
            deadline.lift(conn)
            for statement in connections.LIFT_SESSION_TIMEOUTS:
                conn.exec_driver_sql(statement)
            yield conn
        finally:
            conn.invalidate()
