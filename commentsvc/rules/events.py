"""What an event says (docs/EVENTS.md): its types and the Marshmallow schemas of its JSON,
which also document it as the OpenAPI document's webhooks (web.openapi).

An event names the comment and the list it is on; a ``comment.created`` event also carries
the comment as a list shows it to everyone (the stored render, rules.rendered: no
``can_delete``/``can_reply``, which depend on who asks, and no ``replies``). Deleted
comments and erased authors' comments have their text removed from the events still kept
(storage.outbox.forget_text), so an event never carries text its author took back.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from marshmallow import Schema, fields

from commentsvc.rules.rendered import STORED_FIELDS
from commentsvc.rules.schemas import ReplySchema

CREATED = "comment.created"
DELETED = "comment.deleted"
READ_CHANGED = "comment.read_changed"
ERASED = "comment.erased"
EVENT_TYPES = (CREATED, DELETED, READ_CHANGED, ERASED)


@dataclass(frozen=True, slots=True)
class Subject:
    """The comment an event is about, and the list it is on."""

    comment_id: int
    content_type: str
    object_id: int
    parent_id: int | None


class StoredComment(fields.Nested):
    """The comment's stored render, passed through as the JSON text it already is (an
    ``orjson.Fragment``); documented as the comment schema's fields it holds."""

    def _serialize(  # type: ignore[override]  # Nested and Field name it differently
            self, nested_obj: Any, attr: Any, obj: Any, **kwargs: Any) -> Any:
        return nested_obj


class EventDataSchema(Schema):
    """What every event's ``data`` holds: the comment and the list it is on."""

    comment_id = fields.Integer(metadata={"description": "The comment's id."})
    content_type = fields.String(metadata={"description": "The list's content type."})
    object_id = fields.Integer(metadata={"description": "The object commented on."})
    parent_id = fields.Integer(allow_none=True, metadata={
        "description": "The thread's root comment for a reply, null for a root."})


# The comment as a created event carries it: the comment schema's fields every viewer
# sees alike (the stored render).
STORED_COMMENT_SCHEMA = ReplySchema(only=STORED_FIELDS)


class CreatedDataSchema(EventDataSchema):
    comment = StoredComment(STORED_COMMENT_SCHEMA, metadata={
        "description": "The comment as every viewer sees it in a list; blanked (body \"\", "
                       "is_deleted true) if it was deleted or its author erased before "
                       "this event was sent."})


class ReadChangedDataSchema(EventDataSchema):
    is_read = fields.Boolean(metadata={"description": "The comment's new read flag."})


class EventSchema(Schema):
    """The body of every webhook: an event."""

    id = fields.String(metadata={
        "description": "Unique to this event, the same on every attempt (a receiver drops "
                       "an id it already has)."})
    type = fields.String(metadata={"enum": list(EVENT_TYPES)})
    created = fields.String(metadata={
        "description": "When its write committed, UTC (RFC 3339)."})
    data = fields.Nested(EventDataSchema)


class CreatedEventSchema(EventSchema):
    data = fields.Nested(CreatedDataSchema)


class ReadChangedEventSchema(EventSchema):
    data = fields.Nested(ReadChangedDataSchema)


class DeletedEventSchema(EventSchema):
    """The body of a comment.deleted webhook."""


class ErasedEventSchema(EventSchema):
    """The body of a comment.erased webhook."""


# Each type's schema and what its webhook means (the OpenAPI document's webhooks).
SCHEMAS: dict[str, tuple[type[EventSchema], str]] = {
    CREATED: (CreatedEventSchema, "A comment was posted."),
    DELETED: (DeletedEventSchema, "A comment was deleted by its author or staff: its text is "
                           "gone, its place stays."),
    READ_CHANGED: (ReadChangedEventSchema, "A comment was marked read or unread by the "
                                           "owner of what it is on."),
    ERASED: (ErasedEventSchema, "A comment's author was erased (the erase-user command): the "
                          "comment is shown deleted, with no text and a neutral name."),
}
_DUMPERS = {name: schema() for name, (schema, _) in SCHEMAS.items()}


@dataclass(frozen=True, slots=True)
class Event:
    """One event as it is stored and sent: its id, type, time and JSON body."""

    uid: str
    type: str
    subject: Subject
    created: datetime
    payload: str


def new_event(event_type: str, subject: Subject, created: datetime, *,
              comment_json: str | None = None, is_read: bool | None = None) -> Event:
    """An event with a new id; ``created`` is naive UTC. ``comment_json`` (the stored render)
    goes with comment.created, ``is_read`` with comment.read_changed."""
    uid = str(uuid.uuid4())
    data: dict[str, Any] = {"comment_id": subject.comment_id,
                            "content_type": subject.content_type,
                            "object_id": subject.object_id, "parent_id": subject.parent_id}
    if event_type == CREATED:
        data["comment"] = orjson.Fragment(comment_json or "null")
    elif event_type == READ_CHANGED:
        data["is_read"] = is_read
    body = _DUMPERS[event_type].dump({"id": uid, "type": event_type,
                                      "created": timestamp(created), "data": data})
    return Event(uid, event_type, subject, created, orjson.dumps(body).decode("utf-8"))


def timestamp(moment: datetime) -> str:
    """A naive UTC time as RFC 3339, to the microsecond.

    >>> timestamp(datetime(2026, 11, 25, 18, 0, 5, 120))
    '2026-11-25T18:00:05.000120Z'
    """
    return moment.isoformat(timespec="microseconds") + "Z"


def with_comment(payload: str, comment_json: str) -> str:
    """A comment.created body with its comment replaced by ``comment_json`` (the comment's
    stored render as it is now: deleted, or its author erased)."""
    event = orjson.loads(payload)
    event["data"]["comment"] = orjson.Fragment(comment_json)
    return orjson.dumps(event).decode("utf-8")
