"""Where the service finds its database: the Flask-SQLAlchemy engine of the app it runs in.

Standalone, app.py sets Flask-SQLAlchemy up; mounted, the host's own extension serves
(``COMMENTSVC_BIND_KEY`` picks one of its binds). The service only borrows the engine.
"""

from __future__ import annotations

import hashlib
import logging
import math
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from time import perf_counter
from typing import TYPE_CHECKING, Any, TypeVar

from flask import current_app, has_app_context
from sqlalchemy import event, inspect
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import ConnectionPoolEntry

from commentsvc.storage import bulk_lock, deadline, node_writes, outage, unseen_transactions
from commentsvc.storage.database_urls import normalise_url
from commentsvc.storage.queries import connections, list_versions, schema

if TYPE_CHECKING:  # the settings are handed in; only their type is named here
    from commentsvc.settings import Settings

T = TypeVar("T")

log = logging.getLogger(__name__)

SCHEMA_FILE = Path(__file__).resolve().parent.parent / "schema.sql"

# Engines given their hooks (prepare_engine), and those also given their deadline and
# outage log (protect): each set gets an engine only once that is complete, so a thread
# that finds it there may use the engine at once; the lock makes others wait meanwhile.
_prepared: weakref.WeakSet[Engine] = weakref.WeakSet()
_served: weakref.WeakSet[Engine] = weakref.WeakSet()
_setting_up = threading.RLock()


def get_engine() -> Engine:
    """The engine of the current app's Flask-SQLAlchemy extension (a host's engine is set
    up on its first use, once, whichever threads ask at the same time); right after a
    deadline passed on it, the 503 at once (``usable``)."""
    return usable(configured_engine())


def configured_engine() -> Engine:
    """``get_engine``'s engine without the fail-fast check, for what only looks at it and
    never waits on the database (the pool's gauge in /metrics)."""
    ext = current_app.extensions["sqlalchemy"]
    engine: Engine = ext.engines[current_app.config.get("COMMENTSVC_BIND_KEY")]
    if engine not in _served:
        with _setting_up:
            if engine not in _served:
                prepare_engine(engine)
                # A host's engine (the standalone app protected its own when it made it)
                protect(engine, current_app.extensions["commentsvc"].settings, shared=True)
                _served.add(engine)
    return engine


def usable(engine: Engine) -> Engine:
    """``engine``; but right after a deadline passed on it, the 503 at once
    (storage.outage)."""
    found = outage.outage_of(engine)
    if found is not None:
        found.check()
    return engine


def protect(engine: Engine, settings: Settings, shared: bool = False) -> None:
    """Give the primary engine its wait deadline (storage.deadline; ``shared``: a host
    site's engine, where it is the service's work's alone), its outage log and fail-fast
    window (storage.outage), from the app's settings, and its pool the end of transactions
    psycopg2 lost sight of (storage.unseen_transactions). Safe to call again."""
    deadline.watch(engine, settings.db_response_timeout,
                   (settings.lock_timeout_ms or settings.statement_timeout_ms) / 1000, shared)
    outage.watch(engine, settings.db_fail_fast_seconds,
                 settings.db_response_timeout + settings.db_connect_timeout)
    unseen_transactions.watch(engine)


def snapshot(engine: Engine) -> Connection:
    """A connection whose reads share one snapshot, so a list's count and page agree.

    PostgreSQL runs the request's statements in one REPEATABLE READ, READ ONLY transaction;
    on SQLite every transaction is one snapshot already (see ``prepare_engine``).
    """
    conn = engine.connect()
    if engine in _replicas:
        # A standby is read-only by nature; asking for READ ONLY would make SQLAlchemy
        # reset the connection to READ WRITE afterwards, which a standby refuses.
        conn = conn.execution_options(isolation_level="REPEATABLE READ")
    elif engine.dialect.name == "postgresql":
        conn = conn.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
    return conn


_replicas: weakref.WeakSet[Engine] = weakref.WeakSet()


def mark_replica(engine: Engine) -> None:
    """``engine`` reaches a PostgreSQL standby (see ``snapshot``)."""
    _replicas.add(engine)


def read_snapshot(engine: Engine, work: Callable[[Connection], T]) -> T:
    """``work(conn)`` in a snapshot; once more on a new connection if the first was dead.

    A pooled connection can have died with the server (a restart, a failover). Rather
    than ping every connection before use, which costs a round trip per request, a read
    that finds its connection gone (SQLAlchemy then drops the pool's others too) simply
    runs again; reads change nothing, so running twice is safe. Not when the database
    did not answer at all (``hung``).
    """
    try:
        with snapshot(engine) as conn:
            return work(conn)
    except DBAPIError as exc:
        if not exc.connection_invalidated or hung(exc):
            raise
    with snapshot(engine) as conn:
        return work(conn)


def hung(exc: DBAPIError) -> bool:
    """The database did not answer in time: another connection would wait as long, so
    the request gives up rather than trying again."""
    return isinstance(exc.orig, deadline.DatabaseNoAnswer)


def prepare_engine(engine: Engine) -> None:
    """Give SQLite real transactions, foreign keys, WAL and a busy timeout.

    pysqlite runs SELECTs outside any transaction and upgrades a reader to a writer only at
    its first write, where two writers deadlock. So the driver's own handling is switched
    off and every transaction starts with BEGIN, or BEGIN IMMEDIATE for writers (see
    ``writing``), which queue on the database lock instead. PostgreSQL needs none of this.
    Once per engine (safe to call again).
    """
    with _setting_up:
        if engine not in _prepared:
            if engine.dialect.name == "sqlite":
                _add_sqlite_hooks(engine)
            _prepared.add(engine)


def _add_sqlite_hooks(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _sqlite_connect(dbapi_connection: sqlite3.Connection,
                        _record: ConnectionPoolEntry) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        for pragma in connections.SQLITE_PRAGMAS:
            cursor.execute(pragma)
        cursor.close()
        for name, function in _POSTGRESQL_FUNCTIONS.items():
            dbapi_connection.create_function(name, 1, _of_text(function), deterministic=True)

    @event.listens_for(engine, "begin")
    def _sqlite_begin(conn: Connection) -> None:
        immediate = conn.get_execution_options().get(WRITER_OPTION)
        conn.exec_driver_sql(connections.BEGIN_WRITER if immediate else connections.BEGIN)

    engine.dispose()  # connections made before the hooks get them on reconnect


# PostgreSQL's functions of text that a page read uses to check stored renders
# (rules.rendered), given to SQLite: md5() (the hex MD5 of the text's UTF-8),
# octet_length() (its UTF-8 bytes) and char_length() (its characters; SQLite's own
# length() stops at a NUL character, which these count).
_POSTGRESQL_FUNCTIONS: dict[str, Callable[[str], str | int]] = {
    "md5": lambda text: hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest(),
    "octet_length": lambda text: len(text.encode("utf-8")),
    "char_length": len,
}


def _of_text(function: Callable[[str], str | int]) -> Callable[[object], str | int | None]:
    """``function`` as SQLite calls it: on the value as text, NULL for NULL."""
    return lambda value: None if value is None else function(str(value))


WRITER_OPTION = "commentsvc_writer"

# Key of the PostgreSQL advisory lock that serialises writers of list positions.
POSITIONS_LOCK = 0x636F6D6D  # "comm"


# Where an app keeps what it is told of each writers' transaction (operations.metrics):
# a function of (seconds waited for the lock, seconds it was held).
WRITERS_LOCK_OBSERVER = "commentsvc.writers_lock"


@contextmanager
def writing(engine: Engine, unlimited: bool = False,
            bulk: bool = False) -> Iterator[Connection]:
    """A transaction that holds the one writer's lock on list positions until it ends.

    Every list position depends on every earlier comment, so writers take turns: SQLite
    by BEGIN IMMEDIATE, PostgreSQL by a transaction-scoped advisory lock. ``unlimited``
    (commands) lifts the statement timeout first, also for the wait for the lock.
    ``bulk`` (import, seed) raises the bulk writers' flag, and while it is up any other
    writer gets bulk_lock.WritesPaused (503) at once instead of waiting (see bulk_lock).

    The app's observer (``WRITERS_LOCK_OBSERVER``), if any, is told how long the lock was
    waited for and how long it was held, to the transaction's end: one lock serves the
    whole site, so its share of the time is what the site's writes can grow into.
    """
    started = perf_counter()
    locked = None
    try:
        with bulk_lock.sqlite_flag(engine, bulk), \
                _locked_writer(engine, unlimited, bulk) as conn:
            locked = perf_counter()
            yield conn
    finally:
        if locked is not None:
            if engine.dialect.name == "postgresql":  # committed, or may have: say so
                node_writes.for_url(engine.url).changed()
            _tell_observer(locked - started, perf_counter() - locked)


def _tell_observer(waited: float, held: float) -> None:
    """Tell the app's observer, whose failure (a metrics file that cannot be written) is
    logged, never the writer's: its transaction has committed or failed on its own."""
    observer = current_app.extensions.get(WRITERS_LOCK_OBSERVER) if has_app_context() else None
    if observer is None:
        return
    try:
        observer(waited, held)
    except Exception:
        log.exception("the writers' lock timing was not recorded")


@contextmanager
def _locked_writer(engine: Engine, unlimited: bool = False,
                   bulk: bool = False) -> Iterator[Connection]:
    """A writer's transaction with its lock taken; a dead pooled connection is replaced.

    The lock is the transaction's first statement, so when it finds the connection gone
    nothing has been written and a new connection can start over.
    """
    for attempt in (1, 2):
        conn = engine.connect().execution_options(**{WRITER_OPTION: True})
        try:
            transaction = conn.begin()
            if unlimited:
                without_statement_timeout(conn)
            locked = True
            if engine.dialect.name == "postgresql":
                with deadline.waiting_for_lock(conn):
                    locked = bulk_lock.take_postgresql(conn, POSITIONS_LOCK, bulk)
        except DBAPIError as exc:
            conn.close()
            if attempt == 2 or not exc.connection_invalidated or hung(exc):
                raise
            continue
        with conn, transaction:
            if not locked:
                raise bulk_lock.WritesPaused()
            yield conn
        return


# Connections each process's pool keeps open: one per thread of a gunicorn.conf.py worker
# (8), since each thread holds at most one at a time (a sign-in read, then its batch's
# writer). A smaller pool would open and close its overflow connections under load, each
# a new server process (tests/test_threaded_workers.py holds the two numbers together).
POOL_SIZE = 8


def engine_options(url: str, connect_timeout: int, statement_timeout_ms: int = 0,
                   pre_ping: bool = False, response_timeout: float = 0,
                   idle_in_transaction_ms: int = 0, lock_timeout_ms: int = 0) -> dict[str, Any]:
    """Pool settings that let the service notice a lost database and recover by itself.

    No pre-ping by default: readers and writers replace a dead connection themselves (see
    ``read_snapshot`` and ``writing``), without a round trip on every checkout. The
    statement, lock and idle-in-transaction timeouts travel in the connection's start-up packet
    (``options``), so they cost no round trip either; a PgBouncer in transaction mode
    refuses that parameter (set the timeouts on the database role there, and 0 here).
    With a ``response_timeout`` the kernel gives up on a silent peer in about as long
    (keepalives on an idle connection, tcp_user_timeout on unacknowledged data); a server
    that is up but does not answer is left to deadline. SQL parameters (token digests,
    comment bodies) never appear in an error's text, hence in no log.
    """
    if url.startswith("sqlite"):
        return {"connect_args": {"timeout": connect_timeout}, "hide_parameters": True}
    connect_args: dict[str, Any] = {"connect_timeout": connect_timeout}
    server_options = []
    if statement_timeout_ms:
        server_options.append(f"-c statement_timeout={int(statement_timeout_ms)}")
    if lock_timeout_ms:
        server_options.append(f"-c lock_timeout={int(lock_timeout_ms)}")
    if idle_in_transaction_ms:
        server_options.append(
            f"-c idle_in_transaction_session_timeout={int(idle_in_transaction_ms)}")
    if server_options:
        connect_args["options"] = " ".join(server_options)
    if response_timeout:
        idle = max(1, math.ceil(response_timeout / 2))
        connect_args.update(keepalives=1, keepalives_idle=idle, keepalives_interval=1,
                            keepalives_count=max(1, math.ceil(response_timeout) - idle),
                            tcp_user_timeout=int(response_timeout * 1000))
    return {"pool_size": POOL_SIZE, "pool_recycle": 1800, "pool_pre_ping": pre_ping,
            "connect_args": connect_args, "hide_parameters": True}


def without_statement_timeout(conn: Connection) -> None:
    """Lift the request's statement, lock and idle-in-transaction timeouts for the rest of this
    transaction (commands: a bulk load or an index build runs far longer than any request
    should, and an import parses between its statements); the client's wait deadline
    (db_deadline) is lifted with them, until the connection is given back."""
    if conn.dialect.name == "postgresql":
        deadline.lift(conn)
        for statement in connections.LIFT_TIMEOUTS:
            conn.exec_driver_sql(statement)


def schema_statements() -> list[str]:
    """schema.sql split into statements (each ends with a semicolon at the end of a line)."""
    text = SCHEMA_FILE.read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("--")]
    return [stmt.strip() for stmt in "\n".join(lines).split(";\n") if stmt.strip(" \n;")]


def index_statement(name: str) -> str:
    """The statement of schema.sql that builds the index ``name``."""
    for statement in schema_statements():
        created = schema.CREATED_INDEX.match(statement)
        if created is not None and created[1] == name:
            return statement.rstrip(";")
    raise LookupError(f"schema.sql builds no index {name}")


def create_schema(conn: Connection) -> None:
    """Create every table and index that does not exist yet, and drop the indexes they
    replaced; safe to run again. Never a request's work: the request timeouts are lifted
    for the rest of the transaction (the inspection of the columns pauses between its
    statements, on a busy machine for longer than the idle-in-transaction allowance)."""
    without_statement_timeout(conn)
    for statement in schema_statements():
        if not _index_there(conn, statement):
            conn.exec_driver_sql(statement.rstrip(";"))
    for statement in schema.DROP_REPLACED_INDEXES:  # after their replacements are built
        conn.exec_driver_sql(statement)
    _add_missing_columns(conn)
    widen_columns(conn)
    if conn.dialect.name == "postgresql" and conn.exec_driver_sql(
            list_versions.TRIGGERS_PRESENT).scalar() != 2:  # storage.list_versions
        for statement in list_versions.CREATE_NOTIFY_TRIGGERS:
            conn.exec_driver_sql(statement)


def one_schema_change_at_a_time(conn: Connection) -> None:
    """Wait, to the end of the caller's transaction, for any other init-db, deliverer,
    import or seed making the tables (PostgreSQL): two making a new database's tables at
    once (nodes started together) would collide in the catalog, and one would fail. A
    bulk writer (import, seed) takes it with the writers' lock, before it (bulk_lock)."""
    if conn.dialect.name == "postgresql":
        conn.execute(schema.TAKE_SCHEMA_LOCK, {"key": bulk_lock.SCHEMA_LOCK})


def _index_there(conn: Connection, statement: str) -> bool:
    """Whether ``statement`` builds an index that is there already. PostgreSQL's CREATE
    INDEX IF NOT EXISTS takes the table's lock against writes before it finds the index,
    and init-db's transaction would hold it to the end: every post would wait, and one
    that holds another of the tables meanwhile would deadlock with it."""
    created = schema.CREATED_INDEX.match(statement)
    return created is not None and bool(conn.execute(
        schema.INDEX_EXISTS[conn.dialect.name], {"name": created[1]}).scalar())


def _add_missing_columns(conn: Connection) -> None:
    """The columns added since a table was first created (queries.schema), where missing."""
    inspector = inspect(conn)
    for (table, column), statement in schema.ADD_LATER_COLUMNS.items():
        if column not in {c["name"] for c in inspector.get_columns(table)}:
            conn.exec_driver_sql(statement)


def widen_columns(conn: Connection) -> None:
    """The columns widened since a table was first created (queries.schema), where still
    of the earlier type (PostgreSQL). Only the catalog changes, but under the table's
    lock against every read until the transaction ends: init-db runs it in a transaction
    of its own first."""
    if conn.dialect.name != "postgresql":
        return
    for (table, column), statement in schema.WIDENED_COLUMNS.items():
        if conn.execute(schema.COLUMN_LIMITED, {"table": table, "column": column}).scalar():
            conn.exec_driver_sql(statement)


def drop_schema(conn: Connection) -> None:
    """Drop the service's tables (tests and `init-db --drop`); the host's are untouched.
    Every process listening for the lists' changes hears that all of them changed."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(list_versions.EVERY_LIST_CHANGED)
    for statement in schema.DROP_TABLES:
        conn.exec_driver_sql(statement)
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(list_versions.DROP_FUNCTION)


def database_config(settings: Settings, default_url: str) -> tuple[str, dict[str, Any]]:
    """The database URL (DATABASE_URL, else ``default_url``) with its driver named, and
    the engine options for it."""
    url = normalise_url(settings.database_url or default_url)
    return url, engine_options(
        url, settings.db_connect_timeout, settings.statement_timeout_ms,
        settings.pool_pre_ping, settings.db_response_timeout,
        settings.idle_in_transaction_timeout_ms, settings.lock_timeout_ms)
