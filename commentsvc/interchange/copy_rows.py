"""Stream many rows into one table: COPY on PostgreSQL, batched executemany elsewhere.

Imports and demo seeding both write millions of rows; one INSERT per row would take
minutes, and building every row first would hold the whole file in memory. Here rows are
pulled from the iterator one batch at a time, so memory stays flat whatever the count.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Iterator
from datetime import datetime
from itertools import islice
from typing import TYPE_CHECKING, Any, cast

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from commentsvc.storage import deadline
from commentsvc.storage.queries.interchange import COPY_FROM_STDIN

if TYPE_CHECKING:
    from psycopg2 import extensions
    from psycopg2.sql import Composed

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

def insert_rows(conn: Connection, table: str, columns: tuple[str, ...],
                rows: Iterable[tuple[Any, ...]], batch_size: int = 5000) -> int:
    """Insert every row of ``rows`` (tuples in ``columns`` order); return how many.

    Runs in the caller's transaction. ``table`` and ``columns`` must be code constants:
    they are checked to be plain identifiers because they become part of the statement.
    """
    _check_identifiers(table, columns)
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    if conn.dialect.name == "postgresql":
        return _copy(conn, table, columns, rows, batch_size)
    return _executemany(conn, table, columns, rows, batch_size)


def _check_identifiers(table: str, columns: tuple[str, ...]) -> None:
    for name in (table, *columns):
        if not _IDENTIFIER.fullmatch(name):
            raise ValueError(f"not a plain SQL identifier: {name!r}")


def _copy_statement(table: str, columns: tuple[str, ...]) -> Composed:
    """COPY_FROM_STDIN for ``table`` and ``columns`` (checked), quoted as identifiers."""
    from psycopg2 import sql

    _check_identifiers(table, columns)
    return sql.SQL(COPY_FROM_STDIN).format(
        sql.Identifier(table), sql.SQL(", ").join(map(sql.Identifier, columns)))


def _batches(rows: Iterable[tuple[Any, ...]], size: int) -> Iterator[list[tuple[Any, ...]]]:
    iterator = iter(rows)
    while batch := list(islice(iterator, size)):
        yield batch


def _copy(conn: Connection, table: str, columns: tuple[str, ...], rows: Iterable[tuple[Any, ...]],
          batch_size: int) -> int:
    """One COPY ... FROM STDIN fed batch by batch from the iterator."""
    statement = _copy_statement(table, columns)
    source = _CopySource(rows, len(columns), batch_size)
    # PostgreSQL only: SQLAlchemy types the driver's connection Any | None.
    driver_connection = cast("extensions.connection", conn.connection.driver_connection)
    with driver_connection.cursor() as cursor, deadline.suspended():
        # psycopg2 only calls read(); types-psycopg2 asks for a whole file object.
        cursor.copy_expert(statement, source)  # type: ignore[arg-type]
    return source.count


def copy_text(rows: Iterable[tuple[Any, ...]]) -> str:
    """Rows in COPY's text format, one per line (each line ends with a newline)."""
    lines = [_copy_row(row) for row in rows]
    lines.append("")
    return "\n".join(lines)


def copy_from_text(conn: Connection, table: str, columns: tuple[str, ...], text: str) -> None:
    """COPY rows already formatted by ``copy_text`` into ``table`` (PostgreSQL only).

    Used where the formatting ran elsewhere (in worker processes); ``table`` and
    ``columns`` must be code constants, as for ``insert_rows``.
    """
    statement = _copy_statement(table, columns)
    driver_connection = cast("extensions.connection", conn.connection.driver_connection)
    with driver_connection.cursor() as cursor, deadline.suspended():
        cursor.copy_expert(statement, io.StringIO(text), size=_COPY_READ_SIZE)


_COPY_READ_SIZE = 1 << 20  # psycopg2 sends the text in pieces of this many characters


class _CopySource:
    """The file COPY reads: each read() formats the next batch of rows as COPY text.

    psycopg2 sends whatever read() returns, whatever its ``size`` hint, and stops at "";
    strings are encoded in the connection's client encoding by psycopg2 itself.
    """

    def __init__(self, rows: Iterable[tuple[Any, ...]], width: int, batch_size: int) -> None:
        self._batches = _batches(rows, batch_size)
        self._width = width
        self.count = 0

    def read(self, _size: int = -1) -> str:
        batch = next(self._batches, None)
        if batch is None:
            return ""
        text = copy_text(self._checked(batch))
        self.count += len(batch)
        return text

    def _checked(self, batch: list[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
        """The batch's rows, each checked to have one value per column as it is formatted."""
        for number, row in enumerate(batch, self.count + 1):
            if len(row) != self._width:
                raise ValueError(f"row {number} has {len(row)} values, expected {self._width}")
            yield row


def _copy_row(row: tuple[Any, ...]) -> str:
    """One row in COPY's text format; strings and ints (nearly every value) inline."""
    return "\t".join([
        _copy_text(value) if (kind := type(value)) is str
        else str(value) if kind is int
        else _copy_other(value)
        for value in row
    ])


def _copy_text(value: str) -> str:
    """A string for COPY's text format, where tab, newline and carriage return would end a
    field or row and a backslash starts an escape (\\N is NULL, so it must be doubled)."""
    # Four substring tests run in C and nearly all values need none of the replacements:
    # several times faster than one str.translate per value.
    if "\\" in value or "\t" in value or "\n" in value or "\r" in value:
        return (value.replace("\\", "\\\\").replace("\t", "\\t")
                .replace("\n", "\\n").replace("\r", "\\r"))
    return value


def _copy_other(value: Any) -> str:
    if value is None:
        return "\\N"
    if value is True:
        return "t"
    if value is False:
        return "f"
    if isinstance(value, str):  # a str subclass
        return _copy_text(value)
    if isinstance(value, datetime):
        return _naive(value).isoformat(sep=" ")
    return str(value)


def _naive(value: datetime) -> datetime:
    """The value itself; an aware one is refused, since TIMESTAMP would drop its offset."""
    if value.tzinfo is not None:
        raise ValueError(f"aware datetime {value!r}: convert to naive UTC first")
    return value


def _executemany(conn: Connection, table: str, columns: tuple[str, ...],
                 rows: Iterable[tuple[Any, ...]], batch_size: int) -> int:
    """Batched executemany of one INSERT, datetimes stored as SQLAlchemy stores them."""
    statement = sa.table(table, *(sa.column(name) for name in columns)).insert()
    # Written exactly as the typed queries write them (on SQLite a text format), so that
    # comparisons and ORDER BY treat rows from both paths alike.
    to_db = sa.DateTime().bind_processor(conn.dialect) or (lambda value: value)
    count = 0
    for batch in _batches(rows, batch_size):
        params: list[dict[str, Any]] = []
        for row in batch:
            if len(row) != len(columns):
                raise ValueError(f"row {count + len(params) + 1} has {len(row)} values, "
                                 f"expected {len(columns)}")
            params.append({name: to_db(_naive(value)) if isinstance(value, datetime) else value
                           for name, value in zip(columns, row, strict=True)})
        conn.execute(statement, params)
        count += len(batch)
    return count
