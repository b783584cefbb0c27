"""The one read most requests need, a list's counter row, in a single round trip.

A cached page or a 304 depends on nothing but the list's size and version, so the
service reads that row over a connection of its own: the driver's connection in
autocommit (no BEGIN, no ROLLBACK), kept open by this process (no pool checkout, no
ping). A connection that fails is thrown away and the read made again through the
engine, as a page read would be (once more if that connection was dead too); an error
there is SQLAlchemy's, which the service answers with 503.
SQLite has no round trips to save (and a memory database lives in one connection), so
there the read goes through the engine as every other does.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Sequence
from typing import Any, cast

from psycopg2 import extensions
from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, Engine, Row
from sqlalchemy.pool import PoolProxiedConnection

from commentsvc.storage import outage
from commentsvc.storage.deadline import DatabaseNoAnswer
from commentsvc.storage.engine import read_snapshot
from commentsvc.storage.queries.listing import (
    EXECUTE_LIST_STATE,
    LIST_STATE,
    PREPARE_LIST_STATE,
)
from commentsvc.storage.store import ListState

_PLACEHOLDER = {"pyformat": "%s", "format": "%s", "qmark": "?", "numeric": ":1"}

# Connections inherited across fork() belong to the parent; closing them from a child
# would end the parent's session, so they are kept here, unused, for the process's life.
_inherited: list[PoolProxiedConnection] = []


def positional(sql: str, paramstyle: str) -> str:
    """The statement with its one named parameter in the driver's positional style.

    >>> positional("SELECT 1 WHERE k = :key", "qmark")
    'SELECT 1 WHERE k = ?'
    """
    return re.sub(r":[a-z_]+", lambda _: _PLACEHOLDER[paramstyle], sql, count=1)


# The counter-row read as a server-side prepared statement of each kept connection: the
# server then skips parsing and planning it on every request, which on PostgreSQL is most
# of the read's server time (bench/http_bench.py: page 1 from the cache went from about
# 3,000 to 3,700 requests a second on 2 cores). A pooler that does not keep a session per
# client (PgBouncer in transaction mode) loses prepared statements; the first read that
# finds its statement gone switches this reader to the plain statement for good (the
# statements: queries.listing.PREPARE_LIST_STATE and EXECUTE_LIST_STATE).
# SQLSTATE of "prepared statement ... does not exist".
UNDEFINED_PREPARED_STATEMENT = "26000"


class ListStateReader:
    """Reads ``ListState`` rows of one engine's database, a connection per thread."""

    def __init__(self, engine: Engine):
        self._engine = engine
        self._sql = positional(LIST_STATE.text, engine.dialect.paramstyle)
        self.uses_prepared = engine.dialect.name == "postgresql"
        self._local = threading.local()
        # every thread's connection, so dispose can close them all
        self._open: set[tuple[int, PoolProxiedConnection]] = set()
        self._lock = threading.Lock()
        event.listen(engine, "engine_disposed", lambda _engine: self.close_all())

    def read(self, list_key: str) -> ListState:
        """The size and version of the list ``list_key`` (an empty list: 0, 0)."""
        if self._engine.dialect.name != "postgresql":
            row: Sequence[Any] | None = self._read_through_engine(list_key)
        else:
            try:
                row = self._fetch(list_key)
            except self._engine.dialect.loaded_dbapi.Error as exc:
                if getattr(exc, "pgcode", None) == UNDEFINED_PREPARED_STATEMENT:
                    self.uses_prepared = False
                self.discard()
                if isinstance(exc, DatabaseNoAnswer):  # no answer: another try waits as long
                    raise outage.hung(self._engine, exc) from exc
                row = read_snapshot(self._engine, lambda conn: self._read_on(conn, list_key))
        return ListState(row[0], row[1]) if row else ListState(0, 0)

    def _read_through_engine(self, list_key: str) -> Row[Any] | None:
        with self._engine.connect() as conn:
            return self._read_on(conn, list_key)

    @staticmethod
    def _read_on(conn: Connection, list_key: str) -> Row[Any] | None:
        """The row read through SQLAlchemy, which on a lost connection also marks the
        pool's older connections stale, so the next ones this reader takes are new."""
        return conn.execute(LIST_STATE, {"list_key": list_key}).first()

    def discard(self) -> None:
        """Close this thread's connection (if any); the next read opens a new one."""
        held = getattr(self._local, "held", None)
        self._local.held = None
        if held is not None:
            self._close(held)

    def close_all(self) -> None:
        """Close every thread's connection, as the engine's dispose() closes its pool."""
        self._local.held = None
        with self._lock:
            held, self._open = list(self._open), set()
        for pid, fairy in held:
            if pid == os.getpid():
                _close_quietly(fairy)

    def _close(self, held: tuple[int, PoolProxiedConnection]) -> None:
        with self._lock:
            self._open.discard(held)
        pid, fairy = held
        if pid == os.getpid():
            _close_quietly(fairy)
        else:
            _inherited.append(fairy)

    def _fetch(self, list_key: str) -> tuple[Any, ...] | None:
        cursor = self._connection().cursor()
        try:
            cursor.execute(EXECUTE_LIST_STATE if self.uses_prepared else self._sql, (list_key,))
            return cursor.fetchone()
        finally:
            cursor.close()

    def _connection(self) -> extensions.connection:
        held = getattr(self._local, "held", None)
        if held is not None and held[0] == os.getpid():
            return cast(extensions.connection, held[1].dbapi_connection)
        if held is not None:
            self.discard()
        try:
            fairy = self._engine.raw_connection()
        except sa_exc.DBAPIError as exc:
            # read() retries, then reports it as SQLAlchemy's
            raise exc.orig from exc  # type: ignore[misc]  # a DBAPIError's orig is never None
        fairy.detach()  # ours now: closing it closes it, the pool's count is untouched
        dbapi_connection = cast(extensions.connection, fairy.dbapi_connection)  # PostgreSQL only
        dbapi_connection.autocommit = True
        if self.uses_prepared:
            try:
                with dbapi_connection.cursor() as cursor:
                    cursor.execute(PREPARE_LIST_STATE)
            except self._engine.dialect.loaded_dbapi.Error:
                self.uses_prepared = False  # a server or pooler that will not prepare
        self._local.held = (os.getpid(), fairy)
        with self._lock:
            self._open.add(self._local.held)
        return dbapi_connection


def _close_quietly(fairy: PoolProxiedConnection) -> None:
    try:
        fairy.close()
    except Exception:  # noqa: BLE001 - a broken connection may fail to close; it is gone
        pass


class CounterReaders:
    """One app's counter reader per engine (the primary's, each replica's), made on first
    use and kept as long as the app."""

    def __init__(self) -> None:
        self._readers: dict[Engine, ListStateReader] = {}
        self._lock = threading.Lock()

    def for_engine(self, engine: Engine) -> ListStateReader:
        """The reader of ``engine``."""
        reader = self._readers.get(engine)
        if reader is None:
            with self._lock:
                reader = self._readers.get(engine) or self._readers.setdefault(
                    engine, ListStateReader(engine))
        return reader
