"""The webhooks of the OpenAPI document (OpenAPI 3.1): what the deliver command POSTs to
each endpoint, an event type at a time, with the Marshmallow schemas of the events
(rules.events) as components."""

from __future__ import annotations

import re
from typing import Any

from apispec import APISpec

from commentsvc import webhooks as signing
from commentsvc.rules import events


def add_event_schemas(spec: APISpec) -> None:
    """Each event type's body, and the comment a created event carries, as components."""
    spec.components.schema("StoredComment", schema=events.STORED_COMMENT_SCHEMA)
    for event_type, (schema, _meaning) in events.SCHEMAS.items():
        spec.components.schema(_event_schema_name(event_type), schema=schema)


def _event_schema_name(event_type: str) -> str:
    """comment.read_changed -> CommentReadChangedEvent"""
    words = re.split(r"[._]", event_type)
    return "".join(word.capitalize() for word in words) + "Event"


_WEBHOOK_HEADERS = (
    (signing.SIGNATURE_HEADER, "t=<unix seconds>,v1=<hex HMAC-SHA256 of '<t>.<body>' keyed "
                                "with COMMENTSVC_WEBHOOK_SECRET> (docs/EVENTS.md); check it "
                                "with commentsvc.webhooks.verify."),
    (signing.EVENT_ID_HEADER, "The event's id, as in the body: drop one already received."),
    (signing.EVENT_TYPE_HEADER, "The event's type, as in the body."),
    (signing.ATTEMPT_HEADER, "1 on the first attempt, then 2, 3, ..."),
    ("User-Agent", "commentsvc-webhooks/<version>"),
)
# The components every event's body is made of: each sends all its fields.
_PARTS = ("StoredComment", "EventData", "CreatedData", "ReadChangedData")


def add_webhooks(document: dict[str, Any]) -> None:
    """The document's webhooks, and its event components made exact: each event schema
    names its one type, and every field of an event is required (all are always sent)."""
    document["webhooks"] = webhooks()
    schemas = document["components"]["schemas"]
    for event_type in events.SCHEMAS:
        schema = schemas[_event_schema_name(event_type)]
        schema["properties"]["type"]["enum"] = [event_type]
        schema["required"] = list(schema["properties"])
    for name in _PARTS:
        schemas[name]["required"] = list(schemas[name]["properties"])


def webhooks() -> dict[str, Any]:
    """What the deliver command POSTs to each COMMENTSVC_WEBHOOK_URLS endpoint, by event
    type (OpenAPI 3.1 webhooks)."""
    return {event_type: {"post": {
        "summary": meaning,
        "description": "Sent at least once, in order per endpoint; any answer but 2xx, or "
                       "none within WEBHOOK_TIMEOUT_SECONDS, is tried again with "
                       "exponential backoff for WEBHOOK_RETRY_HOURS.",
        "parameters": [{"name": name, "in": "header", "required": True,
                        "schema": {"type": "string"}, "description": description}
                       for name, description in _WEBHOOK_HEADERS],
        "requestBody": {"required": True, "content": {"application/json": {"schema": {
            "$ref": f"#/components/schemas/{_event_schema_name(event_type)}"}}}},
        "responses": {"2XX": {"description": "Received: not sent again."}},
    }} for event_type, (_schema, meaning) in events.SCHEMAS.items()}
