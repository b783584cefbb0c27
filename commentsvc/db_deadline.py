"""A deadline on every wait for PostgreSQL, so a hung server costs a request seconds, not
a worker.

A server that is stopped (SIGSTOP, a frozen VM, a stalled disk) keeps its TCP connections
open and its kernel still acknowledges what is sent, so TCP keepalives and
``tcp_user_timeout`` see nothing wrong and libpq would wait for an answer forever; the
server's own statement_timeout cannot fire either. psycopg2 lets a process replace libpq's
waiting with its own (``set_wait_callback``). This one waits with a deadline; when it
passes it raises OperationalError, and psycopg2 closes the connection. SQLAlchemy takes that for a
disconnect (the connection is closed): it invalidates the connection and the pool, the
request is answered 503, and the server, once it runs again, sees the socket closed and
rolls back whatever transaction was open (its locks go with it).

The callback is process-wide. A connection of an engine given to ``watch`` waits at most
that engine's limit per statement (longer for the writers' lock, see ``waiting_for_lock``;
not at all once ``lift`` was called for it, as commands do); a connection being opened
waits at most the ``connect_timeout`` of its DSN, as libpq itself would (with a callback
set psycopg2 opens connections asynchronously, where libpq applies no connect_timeout);
any other connection waits as long as it takes, as without the callback. While a callback
is set psycopg2 refuses COPY, so COPY runs inside ``suspended()``.
"""

from __future__ import annotations

import re
import select
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from time import monotonic

import psycopg2
from psycopg2 import extensions
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

# Per DBAPI connection: the seconds it may wait for one answer (None: no limit).
_limits: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# Per watched engine: (its limit, the extra seconds the writers' lock may wait).
_engines: weakref.WeakKeyDictionary[Engine, tuple[float, float]] = weakref.WeakKeyDictionary()
_install_lock = threading.Lock()
_CONNECT_TIMEOUT = re.compile(r"(?:^|\s)connect_timeout=(\d+)")


class DatabaseNoAnswer(psycopg2.OperationalError):
    """The database did not answer within the deadline; the connection was closed."""


def watch(engine: Engine, seconds: float, lock_wait_seconds: float = 0) -> None:
    """Give every connection ``engine`` opens a deadline of ``seconds`` per answer; the
    writers' lock may take ``lock_wait_seconds`` more. 0 seconds (or not psycopg2) leaves
    the engine as it is. Safe to call again."""
    if not seconds or engine.dialect.driver != "psycopg2" or engine in _engines:
        return
    _engines[engine] = (float(seconds), float(lock_wait_seconds))
    install()

    @event.listens_for(engine, "connect")
    def _limit_new(dbapi_connection, _record) -> None:
        _limits[dbapi_connection] = float(seconds)

    @event.listens_for(engine, "checkin")
    def _restore(dbapi_connection, _record) -> None:
        # A command lifted the limit, or a writer's lock wait stretched it: back to normal.
        if dbapi_connection is not None and dbapi_connection in _limits:
            _limits[dbapi_connection] = float(seconds)

    engine.dispose()  # connections made before get the limit on reconnect


def install() -> None:
    """Set the waiting callback (once per process; another one already set is kept)."""
    with _install_lock:
        if extensions.get_wait_callback() is None:
            extensions.set_wait_callback(wait)


def lift(conn: Connection) -> None:
    """No deadline for this connection until it goes back to the pool (a command's index
    build or export may take minutes)."""
    dbapi_connection = conn.connection.dbapi_connection
    if dbapi_connection in _limits:
        _limits[dbapi_connection] = None


@contextmanager
def waiting_for_lock(conn: Connection) -> Iterator[None]:
    """Let the statement inside wait the engine's lock allowance on top of its limit: a
    writer queues for the writers' lock up to the statement timeout, which the server
    enforces while it runs; the deadline only has to catch a server that does not run."""
    dbapi_connection = conn.connection.dbapi_connection
    limit = _limits.get(dbapi_connection)
    if limit is None:
        yield
        return
    _limits[dbapi_connection] = limit + _engines.get(conn.engine, (0.0, 0.0))[1]
    try:
        yield
    finally:
        if dbapi_connection in _limits:
            _limits[dbapi_connection] = limit


@contextmanager
def suspended() -> Iterator[None]:
    """Run without the callback (COPY; commands only, never while requests are served:
    the callback is process-wide)."""
    callback = extensions.get_wait_callback()
    extensions.set_wait_callback(None)
    try:
        yield
    finally:
        extensions.set_wait_callback(callback)


def limit_for(connection) -> float | None:
    """Seconds ``connection`` may wait for one answer now; None for as long as it takes."""
    if connection.status == extensions.STATUS_SETUP:
        found = _CONNECT_TIMEOUT.search(connection.dsn or "")
        return float(found.group(1)) if found and int(found.group(1)) > 0 else None
    return _limits.get(connection)


def wait(connection) -> None:
    """psycopg2's wait callback: poll the connection until its operation is done, for at
    most ``limit_for(connection)`` seconds."""
    limit = limit_for(connection)
    deadline = None if limit is None else monotonic() + limit
    poller = select.poll()
    registered = None
    while True:
        state = connection.poll()
        if state == extensions.POLL_OK:
            return
        if state == extensions.POLL_READ:
            events = select.POLLIN
        elif state == extensions.POLL_WRITE:
            events = select.POLLOUT
        else:
            raise psycopg2.OperationalError(f"unexpected poll state {state!r}")
        fd = connection.fileno()
        if registered != (fd, events):
            if registered is not None:
                poller.unregister(registered[0])
            poller.register(fd, events)
            registered = (fd, events)
        if deadline is None:
            poller.poll()
            continue
        remaining = deadline - monotonic()
        if remaining <= 0 or not poller.poll(remaining * 1000):
            if monotonic() < deadline:
                continue
            # Not connection.close(): psycopg2 holds the connection's lock while it waits
            # here. Raising makes it close the connection itself ("green panic").
            raise DatabaseNoAnswer(f"the database did not answer within {limit:g} s; "
                                   "the connection is closed")
