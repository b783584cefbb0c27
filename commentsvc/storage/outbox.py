"""The events outbox: each write records its event in the write's transaction, so an event
exists if and only if its write committed (docs/EVENTS.md). The deliverer
(operations.deliverer) sends them on; nothing here waits for a receiver.

Only writers record (inside ``engine.writing``), and writers take turns, so event ids rise
in commit order: a deliverer that has sent every id up to N has missed none.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.engine import Connection, Engine, Row

from commentsvc.rules import events
from commentsvc.rules.events import Event, Subject
from commentsvc.storage.queries import outbox as q

PRUNE_BATCH = 5000


def now() -> datetime:
    """The time events are stamped with: naive UTC, as the tables keep times."""
    return datetime.now(UTC).replace(tzinfo=None)


def record(conn: Connection, event_type: str, subject: Subject, *,
           comment_json: str | None = None, is_read: bool | None = None) -> Event:
    """Write one event in the caller's (writer's) transaction."""
    event = events.new_event(event_type, subject, now(), comment_json=comment_json,
                             is_read=is_read)
    _insert(conn, [event])
    if event_type == events.DELETED:
        forget_text(conn, [subject.comment_id])
    return event


def created_rows(made: Sequence[tuple[Subject, str]]) -> list[dict[str, Any]]:
    """The rows (``insert_rows``) of a comment.created event for each new comment (its
    subject and stored render), in the order given."""
    stamp = now()
    return _rows(events.new_event(events.CREATED, subject, stamp, comment_json=shown)
                 for subject, shown in made)


def _rows(made: Iterable[Event]) -> list[dict[str, Any]]:
    return [{"uid": event.uid, "event_type": event.type,
             "comment_id": event.subject.comment_id, "created": event.created,
             "payload": event.payload} for event in made]


def _insert(conn: Connection, made: Iterable[Event]) -> None:
    insert_rows(conn, _rows(made))


def insert_rows(conn: Connection, rows: list[dict[str, Any]]) -> None:
    """Write events' rows in the caller's (writer's) transaction, each numbered above the
    one before, in the order given."""
    if len(rows) > 1 and conn.dialect.name == "postgresql":  # one statement for them all
        conn.execute(q.INSERT_EVENTS, {name: [row[name] for row in rows] for name in rows[0]})
        return
    for row in rows:
        conn.execute(q.INSERT_EVENT, row)


def forget_text(conn: Connection, comment_ids: list[int]) -> int:
    """Give the comment.created events still kept of these comments the comments' stored
    renders as they are now (deleted: no text); how many changed. Run after the renders
    were stored, in the same transaction."""
    return _rewrite(conn, conn.execute(q.CREATED_OF_COMMENTS, {"ids": comment_ids}).all())


def record_erasure(conn: Connection, author_id: int, erased: list[Subject]) -> int:
    """After an author was erased and their comments rendered again: a comment.erased
    event for each comment that changed, and no text of theirs left in the events kept;
    how many events were written."""
    _rewrite(conn, conn.execute(q.CREATED_OF_AUTHOR, {"author_id": author_id}).all())
    stamp = now()
    _insert(conn, (events.new_event(events.ERASED, subject, stamp) for subject in erased))
    return len(erased)


def _rewrite(conn: Connection, rows: Sequence[Row[Any]]) -> int:
    changed = [{"id": row.id, "payload": events.with_comment(row.payload, row.shown)}
               for row in rows if row.shown is not None]
    if changed:
        conn.execute(q.SET_PAYLOAD, changed)
    return len(changed)


def prune(engine: Engine, retention_hours: float, batch: int | None = PRUNE_BATCH) -> int:
    """Delete events older than the retention that every active endpoint has, ``batch``
    at a time, each batch its own short transaction (all when ``batch`` is None); how
    many. Never the newest event: the next one is numbered from it."""
    cutoff = now() - timedelta(hours=retention_hours)
    limit = batch or PRUNE_BATCH
    total = 0
    while True:
        with engine.begin() as conn:
            deleted = conn.execute(q.PRUNE_BATCH, {"cutoff": cutoff, "batch": limit}).rowcount
        total += deleted
        if batch is not None or deleted < limit:
            return total


def totals(conn: Connection) -> tuple[int, int]:
    """How many events are kept, and the newest one's id (0 when none ever was)."""
    row = conn.execute(q.EVENT_TOTALS).one()
    return int(row.kept), int(row.newest)
