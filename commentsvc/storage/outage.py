"""What a process knows about its database being away: one log line when an outage starts,
one when it ends (how long, how many requests were answered 503), and a short fail-fast
window after the database did not answer at all. Each worker process keeps its own.

An unreachable database fails a request at once (connection refused) or after a deadline
(a hung server: connect_timeout, or the wait deadline of db_deadline). After a deadline,
every request would wait the deadline again and hold a worker thread meanwhile; so for
``fail_fast_seconds`` afterwards ``check`` refuses at once (503), then requests try again.
"""

from __future__ import annotations

import logging
import threading
import weakref
from time import monotonic
from typing import Any

from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Engine, ExceptionContext
from sqlalchemy.pool import ConnectionPoolEntry

from commentsvc.storage import deadline
from commentsvc.storage.deadline import DatabaseNoAnswer

LOGGER_NAME = "commentsvc.database"
log = logging.getLogger(LOGGER_NAME)

_outages: weakref.WeakKeyDictionary[Engine, Outage] = weakref.WeakKeyDictionary()
# An outage ends at the first success this long after its last failure: a network that
# breaks connections every fraction of a second is one outage, not one per break.
SETTLE_SECONDS = 1.0
# Requests answered 503 for an unavailable database, ever, by this process.
_refused = 0
_refused_lock = threading.Lock()
_watching = threading.Lock()


class FailingFast(sa_exc.OperationalError):
    """Refused without trying: the database did not answer moments ago."""

    def __init__(self) -> None:
        super().__init__(None, None, DatabaseNoAnswer(
            "the database did not answer moments ago; not trying again yet"))


def answered_unavailable() -> None:
    """Count a request answered 503 because the database was unavailable."""
    global _refused
    with _refused_lock:
        _refused += 1


class Outage:
    """One engine's state: since when it is away, and until when requests fail fast.

    After a deadline passed, requests are refused at once for ``fail_fast_seconds`` (the
    window). Then one request at a time tries the database again (the probe), while the
    others are still refused at once, until a statement is answered (which closes the
    window) or the probe's own deadline passes (which opens the next one): otherwise every
    thread of a worker would wait out a deadline again at the end of each window, and a
    request that needs no database (``/healthz``) would queue behind them. A probe that
    says nothing within ``probe_seconds`` (its deadline and a connect timeout) gives its
    turn to the next request.
    """

    def __init__(self, name: str, fail_fast_seconds: float, probe_seconds: float = 0):
        self.name = name
        self.fail_fast_seconds = fail_fast_seconds
        self.probe_seconds = probe_seconds or fail_fast_seconds
        self.down_since: float | None = None
        self.last_failure = 0.0
        self.fail_fast_until = 0.0
        self._probe: int | None = None  # the probing thread
        self._probe_until = 0.0
        self._refused_before = 0
        self._lock = threading.Lock()

    def check(self) -> None:
        """Raise FailingFast inside the window after a deadline passed, and after it for
        every thread but the probe's (the class's docstring)."""
        if not self.fail_fast_until:
            return
        now = monotonic()
        if now < self.fail_fast_until:
            raise FailingFast()
        me = threading.get_ident()
        with self._lock:
            if not self.fail_fast_until:  # a statement was answered meanwhile
                return
            if self._probe not in (None, me) and now < self._probe_until:
                raise FailingFast()
            self._probe, self._probe_until = me, now + self.probe_seconds

    def failed(self, reason: str, hung: bool) -> None:
        """The database is unreachable; log it if that is news. ``hung``: it did not answer
        within a deadline, so fail fast for a moment."""
        with self._lock:
            now = monotonic()
            if hung and self.fail_fast_seconds:
                self.fail_fast_until = now + self.fail_fast_seconds
                self._probe = None
            self.last_failure = now
            if self.down_since is not None:
                return
            self.down_since = now
            self._refused_before = _refused
        log.warning("database unavailable (%s): %s", self.name, reason)

    def answered(self) -> None:
        """A statement succeeded: if the database was away and has not failed since
        SETTLE_SECONDS, it is back."""
        with self._lock:
            self.fail_fast_until, self._probe = 0.0, None  # it answers: let requests try
            now = monotonic()
            if self.down_since is None or now - self.last_failure < SETTLE_SECONDS:
                return
            seconds = now - self.down_since
            refused = _refused - self._refused_before
            self.down_since = None
        log.warning("database back (%s) after %.1f s, %d requests answered 503",
                    self.name, seconds, refused)


def watch(engine: Engine, fail_fast_seconds: float, probe_seconds: float = 0) -> Outage:
    """Follow ``engine``'s outages (safe to call again); its Outage."""
    found = _outages.get(engine)
    if found is not None:
        return found
    with _watching:  # two first requests of a host's app may both get here
        found = _outages.get(engine)
        if found is not None:
            return found
        outage = Outage(engine.url.render_as_string(hide_password=True), fail_fast_seconds,
                        probe_seconds)
        _listen(engine, outage)
        _outages[engine] = outage  # published with its listeners in place
    return outage


def _listen(engine: Engine, outage: Outage) -> None:
    """Feed ``outage`` with what ``engine``'s statements meet, and refuse a new connection
    in its fail-fast window."""

    @event.listens_for(engine, "connect", insert=True)
    def _refuse_while_failing_fast(dbapi_connection: Any,
                                   _record: ConnectionPoolEntry) -> None:
        # SQLAlchemy sets up a process's first connections one thread at a time; when the
        # first one's set-up met a hung server, the threads queued behind it would each
        # wait out a deadline of their own in turn, past the window their requests began
        # before. Refused like a request in the window instead (the probe's passes); on
        # an engine shared with a host site, for the service's own work alone.
        if not deadline.guards(engine):
            return
        try:
            outage.check()
        except FailingFast:
            dbapi_connection.close()
            raise

    @event.listens_for(engine, "handle_error")
    def _failed(context: ExceptionContext) -> None:
        reason = unavailable_reason(context)
        if reason is None:
            return
        hung = isinstance(context.original_exception, DatabaseNoAnswer)
        outage.failed(reason, hung)
        if hung:  # other requests' waits on this database are as hopeless
            deadline.give_up_waits(engine)

    @event.listens_for(engine, "after_cursor_execute")
    def _answered(*_args: object) -> None:
        if outage.down_since is not None:
            outage.answered()


def hung(engine: Engine, exc: DatabaseNoAnswer) -> sa_exc.OperationalError:
    """The error to raise for a deadline that passed on a connection of ``engine`` that
    SQLAlchemy does not see (the list-state reader's own): recorded as ``handle_error``
    would record it."""
    outage = _outages.get(engine)
    if outage is not None:
        outage.failed(str(exc), hung=True)
    deadline.give_up_waits(engine)
    return sa_exc.OperationalError(None, None, exc)


def answered(engine: Engine) -> None:
    """A statement of ``engine``'s database succeeded on a connection SQLAlchemy does not
    see (the list-state reader's own): recorded as ``after_cursor_execute`` would."""
    outage = _outages.get(engine)
    if outage is not None and outage.down_since is not None:
        outage.answered()


def outage_of(engine: Engine) -> Outage | None:
    return _outages.get(engine)


def is_outage_error(exc: BaseException) -> bool:
    """``exc`` says the database is unreachable (then the outage log has it)."""
    if isinstance(exc, sa_exc.DBAPIError):
        return exc.connection_invalidated or isinstance(exc.orig, DatabaseNoAnswer) or (
            isinstance(exc, sa_exc.OperationalError) and exc.statement is None)
    return isinstance(exc, (sa_exc.DisconnectionError, sa_exc.TimeoutError))


def one_line(exc: BaseException) -> str:
    """An error's class and the first line of its driver's message: no SQL, no parameters."""
    original = getattr(exc, "orig", None) or exc
    first = str(original).strip().splitlines()
    return f"{type(original).__name__}: {first[0] if first else 'no message'}"


def unavailable_reason(context: ExceptionContext) -> str | None:
    """Why the database is unreachable, in one line without SQL or parameters; None when
    the error is not that (a cancelled statement, a constraint, a bug)."""
    original = context.original_exception
    if isinstance(original, DatabaseNoAnswer):
        return str(original)
    if context.is_disconnect or (context.connection is None and isinstance(
            context.sqlalchemy_exception, sa_exc.OperationalError)):
        return one_line(original)
    return None
