"""Statements a PostgreSQL connection prepares once and then runs by name.

A batch of posts is read and written in two large statements (queries.posting); sent
whole, the server parses and plans each one again every time, which costs more than
running it. Prepared on each connection the first time that connection runs it, each is
then only executed. Behind a pooler that hands each transaction whichever server
session is free (PgBouncer in transaction mode), a connection's statements are not its
own: the first execution that meets a session without its statement fails, and so does
the first PREPARE that meets a session where another client prepared that name. Either
way that transaction is lost (web.write_batches runs its batch once more) and this
process sends the statements whole from then on, as the list reads do
(storage.counters).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from commentsvc.storage import driver_cursor
from commentsvc.storage.queries.prepared import Prepared

# SQLSTATE of "prepared statement ... does not exist", and of "... already exists".
UNDEFINED_PREPARED_STATEMENT = "26000"
DUPLICATE_PREPARED_STATEMENT = "42P05"

# The names this connection has prepared, in its pool record (kept as long as the
# connection is).
_PREPARED_KEY = "commentsvc_prepared"


class _Switch:
    """Whether this process prepares statements (until a server refuses to keep them)."""

    enabled = True


def gone(exc: DBAPIError) -> bool:
    """The error of a connection whose prepared statements are not its own: one it had
    prepared is missing, or one it prepares was there already (a pooler's session); this
    process sends the statements whole from then on, so the same work may run again at
    once."""
    return getattr(exc.orig, "pgcode", None) in (UNDEFINED_PREPARED_STATEMENT,
                                                 DUPLICATE_PREPARED_STATEMENT)


def run(conn: Connection, statement: Prepared, params: dict[str, Any]) -> list[Any]:
    """``statement`` with ``params`` on ``conn`` (in its transaction), on the driver's
    cursor (storage.driver_cursor); its rows as tuples, if any."""
    prepared: set[str] = conn.connection.info.setdefault(_PREPARED_KEY, set())
    try:
        if _Switch.enabled and statement.name not in prepared:
            driver_cursor.rows(conn, statement.prepare)
            prepared.add(statement.name)
        if _Switch.enabled:
            return driver_cursor.rows(conn, statement.execute, statement.values(params))
        return driver_cursor.rows(conn, statement.plain, params)
    except DBAPIError as exc:
        if gone(exc):
            _Switch.enabled = False
            prepared.clear()
        raise
