"""Upkeep after a bulk load: the loaded tables vacuumed and analysed before anyone reads.

PostgreSQL marks a row's visibility on it (hint bits) the first time a query reads it after
its transaction ended; until a vacuum has passed, every page of freshly loaded rows is
dirtied by its first reader and has to be written out again, and only the comment table
has statistics. Autovacuum gets there in the background, throttled, and may be off. So a
seed or an import ends by vacuuming and analysing what it loaded (BENCHMARKS.md, "The
database read into memory first": 300 random pages of a freshly seeded million comments
dirtied 2,344 blocks, none once vacuumed). SQLite keeps no such marks: nothing to do there.
"""

from __future__ import annotations

from sqlalchemy.engine import Engine

from commentsvc.storage import deadline
from commentsvc.storage.queries import connections, loading


def vacuum_loaded(engine: Engine) -> bool:
    """Vacuum and analyse the tables a seed or import fills (PostgreSQL); whether it did
    (not on SQLite). Its connection runs without the request timeouts (the vacuum
    reads every page loaded, far longer than any request may take) and is closed
    afterwards, so no request ever gets a session without them."""
    if engine.dialect.name != "postgresql":
        return False
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        try:
            deadline.lift(conn)
            for statement in connections.LIFT_SESSION_TIMEOUTS:
                conn.exec_driver_sql(statement)
            conn.exec_driver_sql(loading.VACUUM_LOADED)
        finally:
            conn.invalidate()
    return True
