"""A statement run on the database driver's own cursor, inside a SQLAlchemy Connection's
transaction.

Every batch of writes runs three statements on PostgreSQL (the writers' lock, the batch's
facts, its writes), and SQLAlchemy's execution around each (its execution context, events
and result set-up) cost a post's worker more CPU than the driver's own work on them
(BENCHMARKS.md, "The write path's statements on the driver's cursor"). Here they go to the
driver directly. A failure is handed to the Connection as its own execution hands it: the
same DBAPIError (parameters hidden), the same invalidation of a lost connection, the same
``handle_error`` listeners (storage.outage); a success is told to the outage log as
its ``after_cursor_execute`` listener would be.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Connection

from commentsvc.storage import outage


def rows(conn: Connection, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
    """``statement`` (in the driver's own form) with ``params`` in ``conn``'s transaction,
    which must have begun; its rows as tuples, or [] for a statement that returns none."""
    if not conn.in_transaction():
        raise RuntimeError("a statement on the driver's cursor needs a transaction begun")
    # SQLAlchemy's own refusals (a connection invalidated earlier) come as they are
    dbapi_connection = conn.connection.dbapi_connection
    cursor = None
    try:
        cursor = dbapi_connection.cursor()  # type: ignore[union-attr]
        cursor.execute(statement, params)
        found = cursor.fetchall() if cursor.description is not None else []
    except BaseException as exc:
        # SQLAlchemy's own handling of a failed execution (it raises; it closes the cursor,
        # or the connection with it): a lost connection invalidated, handle_error told
        conn._handle_dbapi_exception(exc, statement, params, cursor, None)
        raise  # not reached
    cursor.close()
    outage.answered(conn.engine)
    return list(found)
