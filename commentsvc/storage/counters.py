"""The reads every request makes, each in a single round trip: a list's counter row (a
cached page or a 304 depends on nothing else), a whole page in one statement (the counter
row, the slice, the replies: queries.listing.page_read) and, signed in, the user a key
or a browser session signs in.

They run over a connection of the service's own: the driver's connection in autocommit
(no BEGIN, no ROLLBACK), kept open by this process (no pool checkout, no ping), each as a
statement prepared once on it. A connection that turns out dead is thrown away and the
read made again through the engine (once more if that connection was dead too); any
other error is raised as SQLAlchemy's, which the service answers with 503.
SQLite has no round trips to save (and a memory database lives in one connection), so
there they go through the engine as every other read does.
"""

from __future__ import annotations

import functools
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from psycopg2 import extensions
from sqlalchemy import event, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, Engine, Row
from sqlalchemy.pool import PoolProxiedConnection

from commentsvc.storage import outage
from commentsvc.storage.deadline import DatabaseNoAnswer
from commentsvc.storage.engine import read_snapshot
from commentsvc.storage.prepared import UNDEFINED_PREPARED_STATEMENT
from commentsvc.storage.queries.auth import (
    EXECUTE_VIEWER,
    PREPARE_VIEWER,
    VIEWER_BY_DIGEST,
    VIEWER_BY_SESSION,
)
from commentsvc.storage.queries.listing import (
    EXECUTE_LIST_STATE,
    EXECUTE_PAGE_READ,
    LIST_STATE,
    PAGE_READ_PARAMETERS,
    PAGE_ROW_TYPES,
    PREPARE_LIST_STATE,
    PREPARE_PAGE_READS,
    page_read,
)
from commentsvc.storage.store import ListState

T = TypeVar("T")

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
# statements: queries.listing.PREPARE_LIST_STATE and EXECUTE_LIST_STATE; the writes'
# prepared statements do the same per process: storage.prepared).


class ListStateReader:
    """Reads ``ListState`` rows, pages and the users of sign-in keys and browser sessions
    of one engine's database, a connection per thread."""

    def __init__(self, engine: Engine):
        self._engine = engine
        self._sql = positional(LIST_STATE.text, engine.dialect.paramstyle)
        self._viewer_sql = positional(VIEWER_BY_DIGEST.element.text, engine.dialect.paramstyle)
        self._session_sql = positional(VIEWER_BY_SESSION.element.text,
                                       engine.dialect.paramstyle)
        self.uses_prepared = engine.dialect.name == "postgresql"
        self._local = threading.local()
        # every thread's connection, so dispose can close them all
        self._open: set[tuple[int, PoolProxiedConnection]] = set()
        self._lock = threading.Lock()
        event.listen(engine, "engine_disposed", lambda _engine: self.close_all())

    def read(self, list_key: str) -> ListState:
        """The size and version of the list ``list_key`` (an empty list: 0, 0)."""
        row = self._run(lambda cursor: self._fetch_state(cursor, list_key),
                        lambda conn: self._read_on(conn, list_key))
        return ListState(row[0], row[1]) if row else ListState(0, 0)

    def read_page(self, read: PageRead) -> tuple[ListState, list[tuple[Any, ...]]]:
        """A whole page in one statement (queries.listing.page_read): the list's state and
        its comment rows, in list order."""
        rows = self._run(lambda cursor: self._fetch_page(cursor, read),
                         lambda conn: _page_on(conn, read))
        first = rows[0]
        return ListState(first[0], first[1]), rows if first[2] is not None else []

    def read_viewer(self, digest: str) -> tuple[Any, ...] | None:
        """The (id, is_staff, username, avatar) of the user a key's digest signs in, or
        None when no such key is kept."""
        row = self._run(lambda cursor: self._fetch_viewer(cursor, digest),
                        lambda conn: conn.execute(VIEWER_BY_DIGEST, {"digest": digest}).first())
        return tuple(row) if row is not None else None

    def read_session_viewer(self, digest: str) -> tuple[Any, ...] | None:
        """``read_viewer``'s row for a browser session (by the digest of its id), or None
        when it was signed out of or its key revoked. Not prepared: browsers sign in far
        less often than keys do, and the kept connections' start stays as it was."""
        row = self._run(lambda cursor: _fetch_one(cursor, self._session_sql, digest),
                        lambda conn: conn.execute(VIEWER_BY_SESSION, {"digest": digest}).first())
        return tuple(row) if row is not None else None

    def _run(self, on_cursor: Callable[[Any], T], on_engine: Callable[[Connection], T]) -> T:
        """``on_cursor`` on this thread's kept connection (PostgreSQL), else ``on_engine``
        in a snapshot.

        A kept connection that turns out dead (or lost its prepared statements) is thrown
        away and the read made through the engine instead, as any read on a dead pooled
        connection is made again. Any other error (a statement timeout, say) is the read's
        own: it is raised as SQLAlchemy's, which the service answers with 503.
        """
        if self._engine.dialect.name != "postgresql":
            return read_snapshot(self._engine, on_engine)
        dbapi_connection = None
        try:
            dbapi_connection = self._connection()
            with dbapi_connection.cursor() as cursor:
                result = on_cursor(cursor)
            outage.answered(self._engine)
            return result
        except self._engine.dialect.loaded_dbapi.Error as exc:
            prepared_gone = getattr(exc, "pgcode", None) == UNDEFINED_PREPARED_STATEMENT
            if prepared_gone:
                self.uses_prepared = False
            if isinstance(exc, DatabaseNoAnswer):  # no answer: another try waits as long
                self.discard()
                raise outage.hung(self._engine, exc) from exc
            if dbapi_connection is None or dbapi_connection.closed or prepared_gone:
                self.discard()
                return read_snapshot(self._engine, on_engine)
            raise sa_exc.DBAPIError.instance(
                None, None, exc, self._engine.dialect.loaded_dbapi.Error) from exc

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

    def _fetch_state(self, cursor: Any, list_key: str) -> tuple[Any, ...] | None:
        return _fetch_one(cursor, EXECUTE_LIST_STATE if self.uses_prepared else self._sql,
                          list_key)

    def _fetch_viewer(self, cursor: Any, digest: str) -> tuple[Any, ...] | None:
        return _fetch_one(cursor, EXECUTE_VIEWER if self.uses_prepared else self._viewer_sql,
                          digest)

    def _fetch_page(self, cursor: Any, read: PageRead) -> list[tuple[Any, ...]]:
        if self.uses_prepared:
            cursor.execute(EXECUTE_PAGE_READ[read.kind], read.values())
        else:
            cursor.execute(_plain_page_read(read.kind), read.parameters())
        rows: list[tuple[Any, ...]] = cursor.fetchall()
        return rows

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
                    cursor.execute(PREPARE_PAGE_READS)
                    cursor.execute(PREPARE_VIEWER)
            except self._engine.dialect.loaded_dbapi.Error as exc:
                if dbapi_connection.closed or isinstance(exc, DatabaseNoAnswer):
                    # the connection failed, not the statements: the read decides what
                    # that means (a hung server: no second wait on another connection)
                    _close_quietly(fairy)
                    raise
                self.uses_prepared = False  # a server or pooler that will not prepare
        self._local.held = (os.getpid(), fairy)
        with self._lock:
            self._open.add(self._local.held)
        return dbapi_connection


def _fetch_one(cursor: Any, sql: str, value: str) -> tuple[Any, ...] | None:
    """The one row (or none) of ``sql`` run with ``value`` as its one parameter."""
    cursor.execute(sql, (value,))
    row: tuple[Any, ...] | None = cursor.fetchone()
    return row


def _close_quietly(fairy: PoolProxiedConnection) -> None:
    try:
        fairy.close()
    except Exception:  # noqa: BLE001 - a broken connection may fail to close; it is gone
        pass


@dataclass(frozen=True, slots=True)
class PageRead:
    """What a one-statement page read needs: the list, the page (0: the last), its size,
    the replies embedded per root (0: all) and the display key of stored renders."""

    kind: str  # "site", "kind" or "target"
    list_key: str
    page: int
    size: int
    cap: int
    display: str
    content_type: str | None = None
    object_id: int | None = None

    def parameters(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in PAGE_READ_PARAMETERS[self.kind]}

    def values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in PAGE_READ_PARAMETERS[self.kind])


@functools.cache
def _plain_page_read(kind: str) -> str:
    """The page read of a list kind, not prepared: its :name parameters in psycopg2's
    %(name)s style (made once)."""
    return re.sub(r":([a-z_]+)\b", r"%(\1)s", page_read(kind, "postgresql"))


_PAGE_STATEMENTS: dict[tuple[str, str], Any] = {}


def _page_on(conn: Connection, read: PageRead) -> list[tuple[Any, ...]]:
    """The page read through SQLAlchemy (SQLite, or a kept connection that failed)."""
    key = (read.kind, conn.dialect.name)
    statement = _PAGE_STATEMENTS.get(key)
    if statement is None:
        statement = _PAGE_STATEMENTS[key] = text(
            page_read(read.kind, conn.dialect.name)).columns(**PAGE_ROW_TYPES)
    return [tuple(row) for row in conn.execute(statement, read.parameters())]


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
