"""Transactions the server holds open on a connection psycopg2 believes idle, ended before
the connection goes back to the pool.

A COMMIT the server refuses before it starts (a statement timeout or a cancel that lands
on it) leaves the server's transaction open and aborted, while psycopg2 marks the
connection idle whatever the COMMIT answered. Its rollback is then a no-op, and the
pool hands the connection out again still inside that aborted transaction: every
statement of the next request on it fails with "current transaction is aborted" (a 500),
until the server ends the session. So on its way back to the pool a connection whose
server still holds a transaction psycopg2 does not see has that transaction rolled back
on the server.
"""

from __future__ import annotations

from psycopg2 import extensions
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.pool import ConnectionPoolEntry, PoolResetState

from commentsvc.storage.queries.connections import END_UNSEEN_TRANSACTION

_OPEN = (extensions.TRANSACTION_STATUS_INTRANS, extensions.TRANSACTION_STATUS_INERROR)


def watch(engine: Engine) -> None:
    """End unseen transactions of ``engine``'s connections as they return to its pool
    (PostgreSQL; safe to call again)."""
    if engine.dialect.name == "postgresql" and not event.contains(engine, "reset", _end):
        event.listen(engine, "reset", _end)


def unseen(dbapi_connection: extensions.connection) -> bool:
    """Whether the server holds a transaction open that psycopg2 takes for none."""
    return (dbapi_connection.status == extensions.STATUS_READY
            and not dbapi_connection.autocommit and not dbapi_connection.closed
            and dbapi_connection.get_transaction_status() in _OPEN)


def _end(dbapi_connection: extensions.connection, _record: ConnectionPoolEntry,
         _state: PoolResetState) -> None:
    if not unseen(dbapi_connection):
        return
    dbapi_connection.autocommit = True  # allowed: psycopg2 sees no transaction
    try:
        with dbapi_connection.cursor() as cursor:
            cursor.execute(END_UNSEEN_TRANSACTION)
    finally:
        dbapi_connection.autocommit = False
