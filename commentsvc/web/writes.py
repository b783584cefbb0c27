"""The three writes (post, mark read, delete), each in the writers' transaction with the
comment's stored render and the write's event (web.rendering.keep_*, storage.posting for
posts, which are written in batches: web.write_batches), and with its
Idempotency-Key: a retry within the retention gets the first answer instead, and
nothing is written twice (web.idempotency).

Each returns the first answer (``Written``), stored or replayed; the views only render it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from flask import Request, Response
from marshmallow import Schema, ValidationError
from sqlalchemy.engine import Connection

from commentsvc.rules import permissions
from commentsvc.storage import store
from commentsvc.storage.engine import get_engine
from commentsvc.web import browser_session, idempotency, write_batches
from commentsvc.web.deletion import Deletion, existing
from commentsvc.web.exceptions import NotFound, PermissionDenied, ValidationFailed
from commentsvc.web.rendering import (
    keep_read_change,
    locator,
    shown,
)

if TYPE_CHECKING:
    from commentsvc.service import CommentService
    from commentsvc.web import auth


@dataclass(frozen=True, slots=True)
class Written:
    """A write's answer: what it shows, its headers, and the stored answer when this was
    a replay of an earlier one (None when it was written now)."""

    payload: Any
    headers: dict[str, str] | None
    replay: idempotency.Stored | None
    write: idempotency.Keyed | None

    def after(self, response: Response, service: CommentService) -> Response:
        """A write that was made (not replayed) may be this process's turn to purge
        expired keys and old events, after its response is sent
        (idempotency.PurgeSchedule)."""
        if self.replay is not None:
            return response
        return service.idempotency_purge.after(response, get_engine())


def loaded(schema: Schema, fields: dict[str, Any]) -> dict[str, Any]:
    """A schema's load of the request's fields; 400 with field messages when it refuses."""
    try:
        result: dict[str, Any] = schema.load(fields)
    except ValidationError as exc:
        raise ValidationFailed.of(schema, exc) from exc
    return result


def fields_of(req: Request, viewer: auth.Viewer, service: CommentService) -> dict[str, Any]:
    """The write's fields within the size limit, its CSRF token checked for the cookie."""
    return browser_session.checked_body(req, viewer, service.settings.max_request_bytes)


def post(req: Request, viewer: auth.Viewer, service: CommentService) -> Written:
    """Add a comment: fields checked first; then, in this process's next batch of posts
    (web.write_batches), inside the writers' lock, its key looked up, its target and parent
    checked and the user's posting limit taken; any refusal writes nothing."""
    raw = fields_of(req, viewer, service)
    key = idempotency.key_of(req, raw)
    fields = loaded(service.new_comment_schema, raw)
    write = idempotency.keyed(req, key, viewer.id, fields)
    posted = write_batches.submit(service, write_batches.PostRequest(viewer, fields, write,
                                                                locator()))
    service.reads.wrote(viewer.id)
    if posted.replay is not None:
        return Written(posted.replay.payload(), posted.replay.headers(), posted.replay, write)
    assert posted.comment is not None and posted.location is not None
    return Written(posted.shown_to(viewer), {"Location": posted.location}, None, write)


def mark_read(req: Request, viewer: auth.Viewer, comment_id: int,
              service: CommentService) -> Written:
    """Set ``is_read``: only the owner of what was commented on may (staff for pages)."""
    raw = fields_of(req, viewer, service)
    key = idempotency.key_of(req, raw)
    is_read = loaded(service.read_flag_schema, raw)["is_read"]
    write = idempotency.keyed(req, key, viewer.id, {"is_read": is_read})
    changed = write_batches.submit_change(
        service, ReadMark(viewer, comment_id, is_read, write, service))
    service.reads.wrote(viewer.id)
    if changed.replay is not None:
        return Written(None, changed.replay.headers(), changed.replay, write)
    return Written(changed.result, None, None, write)


def delete(req: Request, viewer: auth.Viewer, comment_id: int,
           service: CommentService) -> Written:
    """Soft-delete: the author or staff only; its text goes, its place stays."""
    browser_session.checked_fields(req, viewer, {})  # the X-CSRFToken header
    write = idempotency.keyed(req, idempotency.key_of(req), viewer.id)
    changed = write_batches.submit_change(
        service, Deletion(viewer, comment_id, write, service.settings))
    service.reads.wrote(viewer.id)
    return Written(None, changed.replay.headers() if changed.replay else None,
                   changed.replay, write)


@dataclass(slots=True)
class ReadMark:
    """Marking a comment read or unread, as a batch applies it (write_batches.Change)."""

    viewer: auth.Viewer
    comment_id: int
    is_read: bool
    write: idempotency.Keyed | None
    service: CommentService
    facts: store.CommentFacts | None = None

    def check(self, conn: Connection) -> None:
        """404 without the comment; 403 unless the viewer owns what it is on."""
        self.facts = existing(conn, self.comment_id)
        if not permissions.can_mark_read(self.viewer, self.facts.content_type,
                                         self.facts.object_id):
            raise PermissionDenied()

    def apply(self, conn: Connection) -> dict[str, Any]:
        """The flag set (its stored render and event, when it changed); the answer."""
        assert self.facts is not None
        settings = self.service.settings
        comment = one(conn, self.comment_id, self.service)
        target = (self.facts.content_type, self.facts.object_id)
        if store.set_read(conn, self.comment_id, self.is_read, target):
            comment.is_read = self.is_read
            keep_read_change(conn, comment, target, settings)
        payload = shown(comment, settings, self.viewer)
        idempotency.remember(conn, self.write, 200, payload, None, self.comment_id)
        return payload


def one(conn: Connection, comment_id: int, service: CommentService) -> store.Comment:
    """The comment just written, as lists show it (a root with its replies)."""
    comment = store.one(conn, comment_id, service.settings.max_embedded_replies)
    if comment is None:  # it was written in this very transaction
        raise NotFound()
    return comment
