"""Deleting a comment, as a batch of writes applies it (web.write_batches.Change): checked
(404 without it, 403 unless the viewer wrote it or is staff), then applied: its text gone
from it, its lists' versions raised, a comment.deleted event, and its text gone from the
comment.created events and the keyed answers still kept.

PostgreSQL applies it in two prepared statements (storage.deleting), since the writers'
lock is held meanwhile; SQLite runs in process and takes the steps one statement each.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import orjson
from sqlalchemy.engine import Connection

from commentsvc.rules import events, permissions
from commentsvc.rules.comment_lists import lists_of
from commentsvc.storage import deleting, renders, store
from commentsvc.web import idempotency
from commentsvc.web.exceptions import NotFound, PermissionDenied
from commentsvc.web.rendering import keep_deletion

if TYPE_CHECKING:
    from commentsvc.settings import Settings
    from commentsvc.web.auth import Viewer


@dataclass(slots=True)
class Deletion:
    """One delete request's change."""

    viewer: Viewer
    comment_id: int
    write: idempotency.Keyed | None
    settings: Settings
    facts: store.CommentFacts | None = None

    def check(self, conn: Connection) -> None:
        """404 without the comment; 403 unless the viewer wrote it or is staff."""
        self.facts = existing(conn, self.comment_id)
        if not permissions.can_delete(self.viewer, self.facts.author_id):
            raise PermissionDenied()

    def apply(self, conn: Connection) -> None:
        """Its text gone from it, its events and the keyed answers showing it."""
        assert self.facts is not None
        if conn.dialect.name == "postgresql":
            _apply_postgresql(conn, self.facts, self.settings)
        else:
            target = (self.facts.content_type, self.facts.object_id)
            if store.soft_delete(conn, self.comment_id, target):
                keep_deletion(conn, self.facts.deleted(), target, self.settings)
            idempotency.forget_text(conn, [self.comment_id])
        idempotency.remember(conn, self.write, 204, None, None, self.comment_id)


def existing(conn: Connection, comment_id: int) -> store.CommentFacts:
    """The comment's facts, read in the writer's transaction; 404 if there is none (a
    delete's check, and a read mark's: web.writes)."""
    facts = store.facts(conn, comment_id)
    if facts is None:
        raise NotFound()
    return facts


def _apply_postgresql(conn: Connection, facts: store.CommentFacts, settings: Settings) -> None:
    """The same steps in two statements: the comment blanked with its render, its lists'
    versions and its event (when it changed), and the texts of it kept elsewhere read;
    then those rewritten."""
    deleted = facts.deleted()
    shown, shown_key = renders.for_settings(settings).render(deleted,
                                                             renders.legacy_keys(conn))
    subject = events.Subject(facts.id, facts.content_type, facts.object_id, facts.parent_id)
    event = events.new_event(events.DELETED, subject,
                             datetime.now(UTC).replace(tzinfo=None))  # as outbox.now()
    rows = deleting.blank(conn, {
        "id": facts.id, "parent_id": facts.parent_id, "shown": shown, "shown_key": shown_key,
        "list_keys": [c.key for c in lists_of(facts.content_type, facts.object_id)],
        "uid": event.uid, "event_type": event.type, "created": event.created,
        "payload": event.payload})
    event_ids, payloads, user_ids, keys, bodies = [], [], [], [], []
    for kind, row_id, idem_key, body, _changed in rows:
        if kind == "event":
            event_ids.append(row_id)
            payloads.append(events.with_comment(body, shown))
        elif kind == "answer" and body:
            answer = orjson.loads(body)
            if idempotency.blank(answer, {facts.id}):
                user_ids.append(row_id)
                keys.append(idem_key)
                bodies.append(orjson.dumps(answer).decode("utf-8"))
    if event_ids or user_ids:
        deleting.rewrite(conn, {"event_ids": event_ids, "payloads": payloads,
                                "user_ids": user_ids, "idem_keys": keys, "bodies": bodies})
