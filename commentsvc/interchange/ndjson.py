"""NDJSON import and export of users, comic pages and comments (contract section 5).

Import is all or nothing and streams: each line is checked on its own and staged with
its line number in temporary tables, cross-references are checked in SQL, and only then
is anything merged into the real tables. The caller's transaction holds it together, so
raising ImportFailed leaves the database as it was. Nothing is ever overwritten: a record
equal to a stored row is skipped, one that differs stops the import.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import chain, islice
from typing import Any

import orjson
from sqlalchemy.engine import Connection, Row
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql.expression import Executable

from commentsvc import settings
from commentsvc.interchange import copy_rows, empty_table, parallel
from commentsvc.rules.formatting import EARLIEST_DATE, LATEST_DATE
from commentsvc.rules.identifiers import INT64_MAX, PAGE_TYPE, USER_TYPE
from commentsvc.storage import store
from commentsvc.storage.queries import interchange as q

BATCH_SIZE = 5000  # rows per executemany (SQLite)
CHUNK_LINES = 10_000  # lines per COPY chunk (PostgreSQL), parsed by one worker

# Export's JSON: one encoder for every line, separators as in the contract's sample.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": "))


class ImportFailed(Exception):
    """A line of the file cannot be imported; nothing was."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(line, reason)
        self.line = line
        self.reason = reason

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What an import did: records added, and records skipped as already stored."""

    users_added: int = 0
    users_unchanged: int = 0
    comicpages_added: int = 0
    comicpages_unchanged: int = 0
    comments_added: int = 0
    comments_unchanged: int = 0

    @property
    def added(self) -> int:
        return self.users_added + self.comicpages_added + self.comments_added

    @property
    def unchanged(self) -> int:
        return self.users_unchanged + self.comicpages_unchanged + self.comments_unchanged

    def summary(self) -> str:
        """One line for the CLI, e.g. ``Imported 12 users, 4 comic pages, 60 comments
        (0 already present).``"""
        return (f"Imported {_plural(self.users_added, 'user')}, "
                f"{_plural(self.comicpages_added, 'comic page')}, "
                f"{_plural(self.comments_added, 'comment')} "
                f"({self.unchanged} already present).")


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


# ---------------------------------------------------------------------------- import


def load(conn: Connection, lines: Iterable[bytes | str], *,
         content_types: Iterable[str] | None = None, max_body_length: int | None = None,
         workers: int = 1,
         after_merge: Callable[[Connection], object] | None = None) -> ImportReport:
    """Import NDJSON ``lines`` in the caller's transaction; raise ImportFailed on a bad line.

    ``after_merge(conn)`` runs once the records are in, in the same transaction (the
    import command renders the new comments: storage.renders).

    ``content_types`` and ``max_body_length`` (the API's own rules) default to the
    settings' defaults; the import command passes the app's. ``workers`` > 1 checks the
    lines of a big file on that many processes (PostgreSQL; see ``_stage_by_copy``).
    """
    if content_types is None:
        content_types = settings.BY_NAME["CONTENT_TYPES"].default
    if max_body_length is None:
        max_body_length = settings.BY_NAME["MAX_BODY_LENGTH"].default
    parser = _RecordParser(frozenset(content_types), max_body_length)
    _run_all(conn, q.DROP_STAGING)  # left over if an earlier import here ended oddly
    _run_all(conn, q.CREATE_STAGING)
    try:
        _stage(conn, lines, parser, workers)
        if not _index_unique_ids(conn):
            _run_all(conn, q.STAGING_IDS)
            _check_duplicates(conn)
        _run_all(conn, q.INDEX_STAGING)
        _check_references(conn)
        _run_all(conn, q.RESOLVE_THREADS)
        _check_cycles(conn)
        _check_unchanged(conn)
        with empty_table.deferred_indexes(conn) as first_load:
            report = _merge(conn, numbered=first_load)
            if after_merge is not None:
                after_merge(conn)
        if first_load:
            store.recount(conn)
        elif report.added:
            store.renumber(conn)
    except ImportFailed:
        _run_all(conn, q.DROP_STAGING)
        raise
    _run_all(conn, q.DROP_STAGING)
    return report


def record_count(conn: Connection) -> int:
    """How many records an export of this database writes."""
    return int(sum(conn.execute(q.RECORD_COUNTS).one()))


def _run_all(conn: Connection, statements: Iterable[Executable]) -> None:
    for statement in statements:
        conn.execute(statement)


_STAGES = {
    "user": (q.USER_STAGE, q.USER_STAGE_COLUMNS),
    "comicpage": (q.PAGE_STAGE, q.PAGE_STAGE_COLUMNS),
    "comment": (q.COMMENT_STAGE, q.COMMENT_STAGE_COLUMNS),
}


def _stage(conn: Connection, lines: Iterable[bytes | str], parser: _RecordParser,
           workers: int) -> None:
    """Check each line and stage its record, holding only a few batches at a time."""
    # A small number per content type: the numbering sorts on it (q.MERGE_NUMBERED).
    kinds = {name: number for number, name in enumerate(sorted(parser.content_types))}
    if conn.dialect.name == "postgresql":
        _stage_by_copy(conn, lines, parser, kinds, workers)
    else:
        _stage_rows(conn, lines, parser, kinds)


def _staged(kind: str, row: tuple[Any, ...], kinds: dict[str, int]) -> tuple[Any, ...]:
    """The staging row of a parsed record: a comment also gets its first guess at its
    thread (itself, or its parent) and its kind's number."""
    if kind == "comment":
        return (*row, row[1] if row[4] is None else row[4], kinds[row[2]])
    return row


def _stage_rows(conn: Connection, lines: Iterable[bytes | str], parser: _RecordParser,
                kinds: dict[str, int]) -> None:
    """One line after the other, inserted in batches of BATCH_SIZE rows per type."""
    pending: dict[str, list[tuple[Any, ...]]] = {kind: [] for kind in _STAGES}

    def flush(kind: str) -> None:
        table, columns = _STAGES[kind]
        copy_rows.insert_rows(conn, table, columns, pending[kind], batch_size=BATCH_SIZE)
        pending[kind] = []

    for number, raw in enumerate(lines, start=1):
        parsed = parser.parse(number, raw)
        if parsed is None:
            continue
        kind, row = parsed
        pending[kind].append(_staged(kind, row, kinds))
        if len(pending[kind]) >= BATCH_SIZE:
            flush(kind)
    for kind in _STAGES:
        if pending[kind]:
            flush(kind)


def _stage_by_copy(conn: Connection, lines: Iterable[bytes | str], parser: _RecordParser,
                   kinds: dict[str, int], workers: int) -> None:
    """Chunks of CHUNK_LINES lines turned into COPY text, on ``workers`` processes when
    the file has more than one chunk, and copied in file order."""
    chunks = _numbered_chunks(lines, CHUNK_LINES)
    first = next(chunks, None)
    if first is None:
        return
    second = next(chunks, None)
    if second is None:
        workers = 1  # a small file: starting processes would cost more than they save
    rules = (parser.content_types, parser.max_body_length)
    items = ((rules, kinds, start, chunk)
             for start, chunk in chain([first], [second] if second else [], chunks))
    with closing(parallel.ordered_map(copy_text_of_chunk, items, workers=workers)) as texts:
        for chunk_texts in texts:
            for kind, text in chunk_texts.items():
                table, columns = _STAGES[kind]
                copy_rows.copy_from_text(conn, table, columns, text)


def _numbered_chunks(lines: Iterable[bytes | str],
                     size: int) -> Iterator[tuple[int, list[bytes | str]]]:
    """(number of the first line, up to ``size`` lines) for consecutive slices."""
    iterator = iter(lines)
    start = 1
    while chunk := list(islice(iterator, size)):
        yield start, chunk
        start += len(chunk)


def copy_text_of_chunk(rules: tuple[frozenset[str], int], kinds: dict[str, int], start: int,
                       lines: list[bytes | str]) -> dict[str, str]:
    """The COPY text of each record type in ``lines``, the first of which is line
    ``start``; ImportFailed at the first bad line. Runs in worker processes; ``rules`` are
    the parser's (content types, maximum body length)."""
    parser = _RecordParser(*rules)
    rows: dict[str, list[tuple[Any, ...]]] = {kind: [] for kind in _STAGES}
    for number, raw in enumerate(lines, start=start):
        parsed = parser.parse(number, raw)
        if parsed is not None:
            kind, row = parsed
            rows[kind].append(_staged(kind, row, kinds))
    return {kind: copy_rows.copy_text(kind_rows) for kind, kind_rows in rows.items() if kind_rows}


def _index_unique_ids(conn: Connection) -> bool:
    """Index the staged ids as unique; False (and no index) if the file repeats an id."""
    try:
        with conn.begin_nested():
            _run_all(conn, q.UNIQUE_STAGING_IDS)
    except IntegrityError:
        return False
    return True


def _first_failure(conn: Connection,
                   checks: Iterable[tuple[Executable, dict[str, Any],
                                          Callable[[Row[Any]], str]]]) -> None:
    """Run (query, params, describe) checks; raise for the earliest offending line."""
    failures = []
    for statement, params, describe in checks:
        row = conn.execute(statement, params).first()
        if row is not None:
            failures.append((row[0], describe(row)))
    if failures:
        line, reason = min(failures, key=lambda failure: failure[0])
        raise ImportFailed(line, reason)


def _check_duplicates(conn: Connection) -> None:
    """The same id twice in the file must mean the same record; then keep one copy."""

    def again(noun: str) -> Callable[[Any], str]:
        return lambda row: (f"{noun} {row[1]} appears again with different content "
                            f"(first on line {row[2]})")

    _first_failure(conn, [
        (q.USER_DUPLICATE_CONFLICT, {}, again("user")),
        (q.PAGE_DUPLICATE_CONFLICT, {}, again("comic page")),
        (q.COMMENT_DUPLICATE_CONFLICT, {}, again("comment")),
    ])
    _run_all(conn, q.DROP_DUPLICATES)


def _check_references(conn: Connection) -> None:
    """Every author, target and parent must exist in the file or the database."""
    _first_failure(conn, [
        (q.MISSING_AUTHOR, {}, lambda row: (
            f"comment {row[1]}: author {row[2]} is not a user in the file or the database")),
        (q.MISSING_TARGET, {"user_type": USER_TYPE, "page_type": PAGE_TYPE}, lambda row: (
            f"comment {row[1]}: target {row[2]} {row[3]} does not exist "
            f"(no such {'user' if row[2] == USER_TYPE else 'comic page'} "
            "in the file or the database)")),
        (q.MISSING_PARENT, {}, lambda row: (
            f"comment {row[1]}: parent comment {row[2]} does not exist "
            "in the file or the database")),
        (q.PARENT_ON_OTHER_TARGET, {}, lambda row: (
            f"comment {row[1]}: parent comment {row[2]} is on another target "
            f"({row[3]} {row[4]})")),
    ])


def _check_cycles(conn: Connection) -> None:
    """A comment whose parents never reach a root cannot be placed in any thread."""
    _first_failure(conn, [
        (q.UNRESOLVED_THREAD, {}, lambda row: (
            f"comment {row[1]}: parent cycle (its parent chain through comment {row[2]} "
            "never reaches a root comment)")),
    ])


def _check_unchanged(conn: Connection) -> None:
    """A record already stored must be identical: the import never overwrites."""

    def stored(noun: str) -> Callable[[Any], str]:
        return lambda row: (f"{noun} {row[1]} already exists in the database with "
                            "different content (import never overwrites)")

    _first_failure(conn, [
        (q.CHANGED_USER, {}, stored("user")),
        (q.CHANGED_PAGE, {}, stored("comic page")),
        (q.CHANGED_COMMENT, {}, stored("comment")),
    ])


def _merge(conn: Connection, numbered: bool) -> ImportReport:
    """Insert the staged records that are not stored yet; count both kinds.

    ``numbered``: the comment table is empty and has no foreign keys for now, so every
    staged comment goes in at once with its list positions (no renumbering after).
    """
    users, pages, comments = conn.execute(q.COUNT_STAGED).one()
    users_added = conn.execute(q.MERGE_USERS).rowcount
    pages_added = conn.execute(q.MERGE_PAGES).rowcount
    if numbered:
        comments_added = conn.execute(q.MERGE_NUMBERED).rowcount
    else:
        comments_added = conn.execute(q.MERGE_ROOTS).rowcount
        comments_added += conn.execute(q.MERGE_REPLIES).rowcount
    return ImportReport(
        users_added=users_added, users_unchanged=users - users_added,
        comicpages_added=pages_added, comicpages_unchanged=pages - pages_added,
        comments_added=comments_added, comments_unchanged=comments - comments_added,
    )


class _Invalid(Exception):
    """One line's problem; the caller adds the line number."""


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _object_without_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json.loads keeps the last of repeated keys silently; an import must not guess."""
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _Invalid(f"duplicate key {key!r}")
        result[key] = value
    return result


def _reject_constant(name: str) -> Any:
    raise _Invalid(f"invalid JSON: {name} is not a JSON value")


def _id(field: str, value: Any) -> int:
    if type(value) is not int:
        raise _Invalid(f"field {field!r} must be an integer, not {_json_type(value)}")
    if not 1 <= value <= INT64_MAX:
        raise _Invalid(f"field {field!r} must be an integer from 1 to {INT64_MAX}, not {value}")
    return value


def _optional_id(field: str, value: Any) -> int | None:
    if value is None:
        return None
    if type(value) is not int:
        raise _Invalid(f"field {field!r} must be an integer or null, not {_json_type(value)}")
    return _id(field, value)


def _string(field: str, value: Any) -> str:
    if not isinstance(value, str):
        raise _Invalid(f"field {field!r} must be a string, not {_json_type(value)}")
    return value


def _name(field: str, value: Any) -> str:
    """A user's name: a comment shows it in its author's URL and avatar path, which an
    empty name would leave without a segment (/user//)."""
    name = _string(field, value)
    if not name:
        raise _Invalid(f"field {field!r} must not be empty")
    return name


def _optional_string(field: str, value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise _Invalid(f"field {field!r} must be a string or null, not {_json_type(value)}")


def _boolean(field: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _Invalid(f"field {field!r} must be a boolean (true or false), "
                       f"not {_json_type(value)}")
    return value


def _utc_datetime(field: str, value: Any) -> datetime:
    """ISO 8601 with an offset or Z, as the naive UTC datetime the tables store."""
    if not isinstance(value, str):
        raise _Invalid(f"field {field!r} must be an ISO 8601 date string, "
                       f"not {_json_type(value)}")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise _Invalid(f"field {field!r} is not an ISO 8601 date and time: {value!r}") from None
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        # A naive time could be any zone's; guessing would shift comments by hours.
        raise _Invalid(f"field {field!r} has no time zone offset (add Z or +HH:MM): {value!r}")
    try:
        when = parsed.astimezone(UTC).replace(tzinfo=None)
    except OverflowError:
        raise _Invalid(f"field {field!r} is out of range in UTC: {value!r}") from None
    if not EARLIEST_DATE <= when < LATEST_DATE:
        raise _Invalid(f"field {field!r} must be from {format_utc(EARLIEST_DATE)} up to "
                       f"{format_utc(LATEST_DATE)} (excluded), which every time zone can "
                       f"show: {value!r}")
    return when


Check = Callable[[str, Any], Any]

# A comment record: "type" and its ten fields.
_COMMENT_KEYS = 11
# Where a key may end: every key of a line is followed by one, so a line with as many of
# these as its parsed record has keys repeats none (a string value may only add more).
_KEY_END = re.compile(rb'"[ \t\r\n]*:')


def _key_endings(raw: bytes) -> int:
    """How many matches of _KEY_END the line holds; counted without the regular expression
    when no quote is followed by white space (nearly always: it is several times faster)."""
    if b'" ' in raw or b'"\t' in raw or b'"\n' in raw or b'"\r' in raw:
        return len(_KEY_END.findall(raw))
    return raw.count(b'":')


class _RecordParser:
    """Turns one line into (record type, staging row), or raises ImportFailed."""

    def __init__(self, content_types: frozenset[str], max_body_length: int) -> None:
        self.content_types = content_types
        self.max_body_length = max_body_length
        self.fields: dict[str, tuple[tuple[str, Check], ...]] = {
            "user": (("id", _id), ("username", _name), ("avatar", _optional_string)),
            "comicpage": (("id", _id), ("title", _string)),
            "comment": (
                ("id", _id), ("content_type", self._content_type), ("object_id", _id),
                ("parent_id", _optional_id), ("author_id", _id), ("body", _string),
                ("date_added", _utc_datetime), ("is_deleted", _boolean),
                ("is_anonymous", _boolean), ("is_read", _boolean),
            ),
        }

    def _content_type(self, field: str, value: Any) -> str:
        if not isinstance(value, str):
            raise _Invalid(f"field {field!r} must be a string, not {_json_type(value)}")
        if value not in self.content_types:
            allowed = ", ".join(sorted(self.content_types))
            raise _Invalid(f"unknown content_type {value!r} (allowed: {allowed})")
        return value

    def parse(self, number: int, raw: bytes | str) -> tuple[str, tuple[Any, ...]] | None:
        """The staged row of line ``number``; None for a blank line."""
        if type(raw) is bytes:
            row = self._well_formed_comment(number, raw)
            if row is not None:
                return "comment", row
        try:
            return self._parse(number, raw)
        except _Invalid as exc:
            raise ImportFailed(number, str(exc)) from None

    def _well_formed_comment(self, number: int, raw: bytes) -> tuple[Any, ...] | None:
        """The staged row of a comment line that passes every check; None otherwise.

        Nearly every line of a big file is such a comment, and this path is three times
        faster than ``_parse``. It accepts exactly what ``_parse`` would accept and the
        same way; on anything else, or on doubt, it returns None and ``_parse`` decides
        and explains. orjson refuses what ``_parse`` refuses (invalid UTF-8, NaN, lone
        surrogates, a byte order mark) but keeps the last of repeated keys silently, so
        the line must hold no more key endings (``"`` then ``:``) than the record has keys.
        """
        if b"\\u0000" in raw or b"\x00" in raw:
            return None
        try:
            record = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return None
        if (type(record) is not dict or len(record) != _COMMENT_KEYS
                or record.get("type") != "comment"
                or _key_endings(raw) != _COMMENT_KEYS):
            return None
        try:
            comment_id, object_id, author_id = (record["id"], record["object_id"],
                                                record["author_id"])
            content_type, parent_id, body = (record["content_type"], record["parent_id"],
                                             record["body"])
            date_added, is_deleted = record["date_added"], record["is_deleted"]
            is_anonymous, is_read = record["is_anonymous"], record["is_read"]
        except KeyError:
            return None
        if not (type(comment_id) is int and 1 <= comment_id <= INT64_MAX
                and type(object_id) is int and 1 <= object_id <= INT64_MAX
                and type(author_id) is int and 1 <= author_id <= INT64_MAX
                and (parent_id is None or type(parent_id) is int and 1 <= parent_id <= INT64_MAX)
                and type(content_type) is str and content_type in self.content_types
                and type(body) is str and type(date_added) is str
                and type(is_deleted) is bool and type(is_anonymous) is bool
                and type(is_read) is bool):
            return None
        try:
            parsed = datetime.fromisoformat(date_added)
            if parsed.tzinfo is None or parsed.utcoffset() is None:
                return None
            when = parsed.astimezone(UTC).replace(tzinfo=None)
        except (ValueError, OverflowError):
            return None
        if not EARLIEST_DATE <= when < LATEST_DATE:
            return None
        if is_deleted:
            body = ""
        elif not body.strip() or len(body) > self.max_body_length:
            return None
        return (number, comment_id, content_type, object_id, parent_id, author_id, body,
                when, is_deleted, is_anonymous, is_read)

    def _parse(self, number: int, raw: bytes | str) -> tuple[str, tuple[Any, ...]] | None:
        if isinstance(raw, bytes):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise _Invalid(f"invalid UTF-8 (byte 0x{raw[exc.start]:02x} "
                               f"at column {exc.start + 1})") from None
        else:
            text = raw
        if number == 1:
            text = text.removeprefix("\ufeff")  # a byte order mark some editors write
        if not text.strip():
            return None
        if "\x00" in text:
            raise _Invalid("NUL byte in the line")
        try:
            record = json.loads(text, object_pairs_hook=_object_without_duplicate_keys,
                                parse_constant=_reject_constant)
        except json.JSONDecodeError as exc:
            raise _Invalid(f"invalid JSON: {exc.msg} (column {exc.colno})") from None
        except (ValueError, RecursionError) as exc:
            raise _Invalid(f"invalid JSON: {exc}") from None
        if not isinstance(record, dict):
            raise _Invalid(f"not a JSON object but {_json_type(record)}")
        self._check_strings(record)
        if "type" not in record:
            raise _Invalid("missing field 'type'")
        kind = record["type"]
        if not isinstance(kind, str) or kind not in self.fields:
            raise _Invalid(f"unknown type {kind!r} (expected one of: comicpage, comment, user)")
        fields = self.fields[kind]
        names = [name for name, _ in fields]
        missing = [name for name in names if name not in record]
        if missing:
            raise _Invalid(f"missing field(s) for a {kind}: {', '.join(missing)}")
        extra = [key for key in record if key != "type" and key not in names]
        if extra:
            raise _Invalid(f"unknown field(s) for a {kind}: {', '.join(map(repr, extra))}")
        row = (number, *(check(name, record[name]) for name, check in fields))
        return kind, self._comment_body(row) if kind == "comment" else row

    def _comment_body(self, row: tuple[Any, ...]) -> tuple[Any, ...]:
        """The API's body rules: a deleted comment keeps no text (its body is stored as
        ""); any other may not be blank or longer than the configured maximum."""
        body, is_deleted = row[6], row[8]
        if is_deleted:
            return (*row[:6], "", *row[7:])
        if not body.strip():
            raise _Invalid("field 'body' may not be blank (unless is_deleted is true)")
        if len(body) > self.max_body_length:
            raise _Invalid(f"field 'body' has {len(body)} characters; at most "
                           f"{self.max_body_length} are allowed (COMMENTSVC_MAX_BODY_LENGTH)")
        return row

    @staticmethod
    def _check_strings(record: dict[str, Any]) -> None:
        """NUL and lone surrogates would fail (or be cut) in the database: refuse them here."""
        for key, value in record.items():
            for text, where in ((key, "a key"), (value, f"field {key!r}")):
                if not isinstance(text, str):
                    continue
                if "\x00" in text:
                    raise _Invalid(f"NUL character (\\u0000) in {where}")
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError:
                    raise _Invalid(f"unpaired surrogate in {where} (not valid Unicode)") from None


# ---------------------------------------------------------------------------- export

_STREAM = {"stream_results": True, "yield_per": 1000}


def dump(conn: Connection) -> Iterator[str]:
    """Every user, comic page and comment as NDJSON lines, each kind in id order.

    Rows come from server-side cursors, so memory stays flat whatever the table sizes.
    """
    if conn.dialect.name == "postgresql" and not conn.in_transaction():
        # One snapshot for all three queries: no comment without its author in the file.
        conn.execution_options(isolation_level="REPEATABLE READ")
    for row in conn.execute(q.DUMP_USERS, execution_options=_STREAM):
        yield _line({"type": "user", "id": row.id, "username": row.username,
                     "avatar": row.avatar})
    for row in conn.execute(q.DUMP_PAGES, execution_options=_STREAM):
        yield _line({"type": "comicpage", "id": row.id, "title": row.title})
    for row in conn.execute(q.DUMP_COMMENTS, execution_options=_STREAM):
        yield _line({
            "type": "comment", "id": row.id, "content_type": row.content_type,
            "object_id": row.object_id, "parent_id": row.parent_id,
            # A deleted comment's text is gone (an older database may still hold some
            # until init-db blanks it): never send it on.
            "author_id": row.author_id, "body": "" if row.is_deleted else row.body,
            "date_added": format_utc(row.date_added), "is_deleted": bool(row.is_deleted),
            "is_anonymous": bool(row.is_anonymous), "is_read": bool(row.is_read),
        })


def _line(record: dict[str, Any]) -> str:
    """One record as a line: non-ASCII as itself, separators as in the contract's sample."""
    text = _ENCODER.encode(record)
    # U+0085, U+2028 and U+2029 are valid in JSON strings but end a line for
    # str.splitlines() and JavaScript; escaped, every record stays on one line for any
    # reader. Testing first is far cheaper than a str.translate on every line.
    if "\x85" in text or "\u2028" in text or "\u2029" in text:
        text = (text.replace("\x85", "\\u0085").replace("\u2028", "\\u2028")
                .replace("\u2029", "\\u2029"))
    return text + "\n"


def format_utc(value: datetime) -> str:
    """A stored (naive UTC) time as ISO 8601 with Z; microseconds only when there are some.

    >>> format_utc(datetime(2024, 3, 5, 14, 7)), format_utc(datetime(2024, 3, 5, 14, 7, 0, 50))
    ('2024-03-05T14:07:00Z', '2024-03-05T14:07:00.000050Z')
    """
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value.isoformat(timespec="microseconds" if value.microsecond else "seconds") + "Z"
