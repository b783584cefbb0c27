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
not at all once ``lift`` was called for it, as commands do; and no longer once another
request found the database hung, see ``give_up_waits``); a connection being opened
waits at most the ``connect_timeout`` of its DSN, as libpq itself would (with a callback
set psycopg2 opens connections asynchronously, where libpq applies no connect_timeout);
any other connection waits as long as it takes, as without the callback. While a callback
is set psycopg2 refuses COPY, so COPY runs inside ``suspended()``. On an engine the
service shares with a host site, only the service's own work (``duty``) has the deadline.
"""

from __future__ import annotations

import math
import re
import select
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from time import monotonic
from typing import cast

import psycopg2
from psycopg2 import extensions
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import ConnectionPoolEntry

# Per DBAPI connection: (the seconds it may wait for one answer or None, its engine's group).
_limits: weakref.WeakKeyDictionary[extensions.connection, tuple[float | None, _Group]] = (
    weakref.WeakKeyDictionary())
_engines: weakref.WeakKeyDictionary[Engine, _Group] = weakref.WeakKeyDictionary()
# How often a long wait looks whether another request found the database hung meanwhile.
_GLANCE_SECONDS = 0.25
_install_lock = threading.Lock()
_watch_lock = threading.Lock()
_CONNECT_TIMEOUT = re.compile(r"(?:^|\s)connect_timeout=(\d+)")


class DatabaseNoAnswer(psycopg2.OperationalError):
    """The database did not answer within the deadline; the connection was closed."""


class _Group:
    """The connections of one watched engine: their limit, the writers' lock allowance,
    since when waits begun earlier are given up (``give_up_waits``), and whether a host
    site uses the engine too (``shared``: then only the service's own work waits with the
    limit, ``duty``)."""

    def __init__(self, seconds: float, lock_wait_seconds: float, shared: bool = False):
        self.seconds = seconds
        self.lock_wait_seconds = lock_wait_seconds
        self.shared = shared
        self.given_up_at = 0.0

    def holds_now(self) -> bool:
        """Whether the limit holds for what this thread does now (``duty``)."""
        return not self.shared or _on_duty.get()


# Whether what this thread (or context) does now is the service's own work: a request to
# one of its blueprints, or a thread of its own. Set by ``duty``; read for shared engines.
_on_duty: ContextVar[bool] = ContextVar("commentsvc_on_duty", default=False)


def duty(on: bool = True) -> None:
    """Say whether what this thread does from now on is the service's work: on an engine it
    shares with a host site, only that waits with the deadline; the host's own queries
    wait as they would without the service."""
    _on_duty.set(on)


def give_up_waits(engine: Engine) -> None:
    """The database of ``engine`` was found hung: every wait of its connections that began
    before now ends within a glance (a writer queued for the lock would otherwise wait out
    its longer allowance)."""
    group = _engines.get(engine)
    if group is not None:
        group.given_up_at = monotonic()


def watch(engine: Engine, seconds: float, lock_wait_seconds: float = 0,
          shared: bool = False) -> None:
    """Give every connection ``engine`` opens a deadline of ``seconds`` per answer; the
    writers' lock may take ``lock_wait_seconds`` more. ``shared``: a host site's engine,
    whose connections keep the deadline for the service's work alone (``duty``). 0
    seconds (or not psycopg2) leaves the engine as it is. Safe to call again (the first
    call decides)."""
    if not seconds or engine.dialect.driver != "psycopg2" or engine in _engines:
        return
    with _watch_lock:  # two first requests of a host's app may both get here
        if engine in _engines:
            return
        group = _Group(float(seconds), float(lock_wait_seconds), shared)
        _listen(engine, group)
        install()
        engine.dispose()  # connections made before get the limit on reconnect
        _engines[engine] = group  # published once all of it is in place


def _listen(engine: Engine, group: _Group) -> None:
    """Give ``group``'s limit to every connection of ``engine``, before any other listener
    of its opening runs a statement on it (``insert``: SQLAlchemy's own, made with the
    engine, ask the server its version and hstore types on a process's first
    connection)."""

    @event.listens_for(engine, "connect", insert=True)
    def _limit_new(dbapi_connection: extensions.connection,
                   _record: ConnectionPoolEntry) -> None:
        _limits[dbapi_connection] = (group.seconds, group)

    @event.listens_for(engine, "checkin")
    def _restore(dbapi_connection: extensions.connection | None,
                 _record: ConnectionPoolEntry) -> None:
        # A command lifted the limit, or a writer's lock wait stretched it: back to normal.
        if dbapi_connection is not None and dbapi_connection in _limits:
            _limits[dbapi_connection] = (group.seconds, group)


def install() -> None:
    """Set the waiting callback (once per process; another one already set is kept)."""
    with _install_lock:
        if extensions.get_wait_callback() is None:
            extensions.set_wait_callback(wait)


def lift(conn: Connection) -> None:
    """No deadline for this connection until it goes back to the pool (a command's index
    build or export may take minutes)."""
    dbapi_connection = cast(extensions.connection, conn.connection.dbapi_connection)
    found = _limits.get(dbapi_connection)
    if found is not None:
        _limits[dbapi_connection] = (None, found[1])


@contextmanager
def waiting_for_lock(conn: Connection) -> Iterator[None]:
    """Let the statement inside wait the engine's lock allowance on top of its limit: a
    writer queues for the writers' lock up to the statement timeout, which the server
    enforces while it runs; the deadline only has to catch a server that does not run."""
    dbapi_connection = cast(extensions.connection, conn.connection.dbapi_connection)
    found = _limits.get(dbapi_connection)
    if found is None or found[0] is None:
        yield
        return
    limit, group = found[0], found[1]  # by index: typed float, as checked above
    _limits[dbapi_connection] = (limit + group.lock_wait_seconds, group)
    try:
        yield
    finally:
        if dbapi_connection in _limits:
            _limits[dbapi_connection] = found


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


def guards(engine: Engine) -> bool:
    """Whether ``engine``'s deadline holds for what this thread does now: on a watched
    engine, always, but on one shared with a host site only for the service's own work
    (``duty``)."""
    group = _engines.get(engine)
    return group is not None and group.holds_now()


def limit_for(connection: extensions.connection) -> tuple[float | None, _Group | None]:
    """Seconds ``connection`` may wait for one answer now (None: as long as it takes), and
    its engine's group (None: not a watched engine's, or a host's own work on a shared
    one)."""
    if connection.status == extensions.STATUS_SETUP:
        found = _CONNECT_TIMEOUT.search(connection.dsn or "")
        seconds = float(found.group(1)) if found and int(found.group(1)) > 0 else None
        return seconds, None
    limited = _limits.get(connection)
    if limited is None or not limited[1].holds_now():
        return None, None
    return limited


def wait(connection: extensions.connection) -> None:
    """psycopg2's wait callback: poll the connection until its operation is done, for at
    most its limit (``limit_for``), and no longer once its engine's waits are given up."""
    limit, group = limit_for(connection)
    started = monotonic()
    deadline = None if limit is None else started + limit
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
        while True:
            now = monotonic()
            if deadline is not None and now >= deadline:
                # Not connection.close(): psycopg2 holds the connection's lock while it
                # waits here. Raising makes it close the connection ("green panic").
                raise DatabaseNoAnswer(f"the database did not answer within {limit:g} s; "
                                       "the connection is closed")
            if group is not None and group.given_up_at > started:
                raise DatabaseNoAnswer("another request found the database hung; "
                                       "the connection is closed")
            glance = _GLANCE_SECONDS if group is not None else None
            if deadline is not None:
                glance = min(glance or math.inf, deadline - now)
            if poller.poll(None if glance is None else glance * 1000):
                break
