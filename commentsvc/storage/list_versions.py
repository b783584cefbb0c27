"""Lists' states known without asking the database, while nothing can have changed them.

A cached page, or a 304, costs one round trip: the list's counter row, read to name the
answer's ETag (storage.counters). Most of the time nothing changed the list since this
process last read it, and the round trip is most of the answer's cost. A process may skip
it, and use the state it read last, when it knows that no write to the list committed
since it began that read:

* Every write to the lists' counter rows notifies the list's key when it commits (a
  trigger; queries.list_versions). A thread of the process listens on a connection of
  its own, and each request takes in what has arrived before it looks: a notified list's
  mark changes.
* A write committed by a process of this machine also changes a word in shared memory
  before its answer is sent (storage.node_writes), so a client that got its 201 never
  reads the list as it was, even before the notification has come.
* A state is used for ``trust_seconds`` at most (``COMMENTSVC_LIST_TRUST_SECONDS``), so
  what neither could tell (a partition that keeps the notifications away, SQL that writes
  with triggers disabled) lasts no longer than that.

The listener's connection is opened when a state is first asked for; until it is listening
(and the triggers are found enabled), and from the moment it fails until it listens again,
every state is read. PostgreSQL only: elsewhere, and with replicas (whose states may lag
the notifications), every state is read as before.
"""

from __future__ import annotations

import functools
import logging
import os
import select
import threading
import weakref
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from time import monotonic
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

from commentsvc.storage import deadline, node_writes
from commentsvc.storage.queries.list_versions import LISTEN, NAME_LISTENER, TRIGGERS_ENABLED
from commentsvc.storage.store import ListState

log = logging.getLogger(__name__)

# Lists share marks by a digest of their key: a notification for one of them makes the
# others read again, never the other way round.
_SLOTS = 4096
# The most states a process keeps (all are forgotten when there are more).
_KEPT = 65536
# Seconds between attempts to listen again after a failure, and between the listener's
# looks at its connection when nothing arrives.
_RETRY_SECONDS = 1.0
_WAKE_SECONDS = 1.0
# Seconds before looking again for triggers found missing or disabled.
_MISSING_SECONDS = 30.0


# Listeners' connections inherited across fork() belong to the parent; closing them (or
# letting them be collected) in a child would end the parent's session, so they are kept
# here, unused, for the process's life.
_inherited: list[Any] = []


def _slot(list_key: str) -> int:
    return zlib.crc32(list_key.encode("utf-8", "surrogatepass")) % _SLOTS


@dataclass(frozen=True, slots=True)
class _Known:
    mark: tuple[int, int, int]
    read_at: float
    state: ListState


class ListVersions:
    """The states of one database's lists this process may use without reading them."""

    def __init__(self, engine: Engine, trust_seconds: float):
        self._engine = weakref.ref(engine)
        self.trust_seconds = trust_seconds
        self._node = node_writes.for_url(engine.url)
        self._lock = threading.Lock()
        self._pid = 0  # the process whose listener thread runs (0: none runs)
        self._stopped = threading.Event()  # the running thread's
        self._connection: Any = None  # the listener's DBAPI connection, while listening
        # Changed by each notification of a list (by slot), and by each loss of the
        # listener or notice that every list changed (generation).
        self._generation = 0
        self._slots = [0] * _SLOTS
        self._known: dict[str, _Known] = {}
        event.listen(engine, "engine_disposed", functools.partial(_disposed, weakref.ref(self)))
        # A lock another thread held at fork() would never be let go in the child.
        os.register_at_fork(after_in_child=functools.partial(_forked, weakref.ref(self)))

    @property
    def listening(self) -> bool:
        return self._connection is not None and self._pid == os.getpid()

    def state(self, list_key: str, read: Callable[[], ListState]) -> ListState:
        """The list's state: the one read last when nothing can have changed it since,
        else ``read()``'s (kept for next time when the listener is listening)."""
        if self._pid != os.getpid():
            self._start()
        now = monotonic()
        mark = self._mark(list_key)
        if mark is None:
            return read()
        known = self._known.get(list_key)
        if known is not None and known.mark == mark and now - known.read_at < self.trust_seconds:
            return known.state
        state = read()
        if len(self._known) >= _KEPT:
            self._known.clear()
        self._known[list_key] = _Known(mark, now, state)
        return state

    def stop(self) -> None:
        """Stop listening (the engine's pool was disposed); the next state asked for
        starts again."""
        with self._lock:
            self._stopped.set()
            self._lost()
            self._pid = 0

    def _mark(self, list_key: str) -> tuple[int, int, int] | None:
        """What must not change while a state read now is used: taken before the read,
        after every notification that has arrived is taken in; None when not listening."""
        with self._lock:
            if not self.listening:
                return None
            self._take_in()
            if self._connection is None:
                return None
            return self._generation, self._slots[_slot(list_key)], self._node.value()

    def _take_in(self) -> None:
        """The notifications that have arrived, taken in (the lock held)."""
        connection = self._connection
        try:
            connection.poll()
            notifies = connection.notifies
            arrived, notifies[:] = notifies[:], []
        except Exception:  # noqa: BLE001 - any failure: not listening until listening again
            log.warning("the list changes listener lost its connection", exc_info=True)
            self._lost()
            return
        for notify in arrived:
            if notify.payload == "*":
                self._generation += 1
            else:
                self._slots[_slot(notify.payload)] += 1

    def _lost(self) -> None:
        """Not listening, and no state read so far to be used again (the lock held)."""
        self._generation += 1
        connection, self._connection = self._connection, None
        if connection is None:
            return
        if self._pid != os.getpid():  # a parent's: closing it would end the parent's
            _inherited.append(connection)
            return
        try:
            connection.close()
        except Exception:  # noqa: BLE001 - a broken connection may fail to close
            pass

    def _start(self) -> None:
        """Start this process's listener thread (again in a forked child, or after a
        stop)."""
        with self._lock:
            if self._pid == os.getpid():
                return
            self._lost()  # a parent's connection, if any, is kept unused
            self._pid = os.getpid()
            self._stopped = threading.Event()
            threading.Thread(target=_listen, args=(weakref.ref(self), self._stopped),
                             daemon=True, name="commentsvc list changes").start()

    def _look(self, stopped: threading.Event) -> bool:
        """One turn of the listener thread: listen, or wait for what arrives and take it
        in; False when the thread is to end."""
        if stopped.is_set():
            return False
        connection = self._connection
        if connection is None:
            if not self._connect(stopped):
                stopped.wait(_RETRY_SECONDS)
            return True
        try:
            select.select([connection], [], [], _WAKE_SECONDS)
        except (OSError, ValueError):  # closed meanwhile: taken in below as lost
            pass
        with self._lock:
            if self._connection is connection:
                self._take_in()
        return True

    def _connect(self, stopped: threading.Event) -> bool:
        """Open the listener's connection and listen; False when it could not (the
        database away, the engine gone, the triggers missing or disabled)."""
        engine = self._engine()
        if engine is None:
            stopped.set()
            return False
        try:
            fairy = engine.raw_connection()
            fairy.detach()  # ours: the pool's count is untouched
            connection: Any = fairy.dbapi_connection  # psycopg2's
            connection.autocommit = True
            with connection.cursor() as cursor:
                cursor.execute(NAME_LISTENER)  # as pg_stat_activity shows it
                cursor.execute(LISTEN)
                cursor.execute(TRIGGERS_ENABLED)
                enabled = cursor.fetchone()[0] == 2
        except Exception:  # noqa: BLE001 - tried again later
            log.debug("the list changes listener could not listen", exc_info=True)
            return False
        if not enabled:
            connection.close()
            log.warning("the lists' change triggers are missing or disabled (run init-db): "
                        "every list state is read")
            stopped.wait(_MISSING_SECONDS)
            return False
        with self._lock:
            if stopped.is_set():
                connection.close()
                return False
            self._generation += 1
            self._connection = connection
        return True


def _forked(versions: weakref.ref[ListVersions]) -> None:
    found = versions()
    if found is not None:
        found._lock = threading.Lock()  # noqa: SLF001 - its own, made anew


def _disposed(versions: weakref.ref[ListVersions], _engine: Engine) -> None:
    found = versions()
    if found is not None:
        found.stop()


def _listen(versions: weakref.ref[ListVersions], stopped: threading.Event) -> None:
    """The listener thread, which ends when it is stopped or its ListVersions is gone."""
    deadline.duty()  # the service's own thread: its waits keep the deadline
    while True:
        found = versions()
        if found is None or not found._look(stopped):  # noqa: SLF001 - its own thread
            return
        del found
