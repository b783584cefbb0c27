"""How a view's answer is rendered: comments as the schemas dump them, as JSON or as the
browsable page, with the headers the browsable page lists for the JSON answer; and what a
write keeps rendered in its transaction: the comment's stored render and the write's
event (storage.outbox), which carries that render."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flask import Request, Response, current_app, request
from flask.globals import request_ctx
from marshmallow import Schema
from sqlalchemy.engine import Connection

from commentsvc.rules import events
from commentsvc.rules.schemas import Display, dump_comments
from commentsvc.settings import Settings
from commentsvc.storage import outbox, renders
from commentsvc.web import browsable, options_description
from commentsvc.web.negotiation import HTML, JSON
from commentsvc.web.responses import (
    ALLOW,
    DETAIL_ENDPOINT,
    api_response,
    encoded_response,
    html_response,
)

if TYPE_CHECKING:
    from commentsvc.storage.store import Comment
    from commentsvc.web.auth import Viewer
    from commentsvc.web.conditional import Respond

DETAIL_DESCRIPTION = (
    "One comment: GET shows it as lists do; PATCH {\"is_read\": true|false} marks it read "
    "or unread (the owner of the commented object); DELETE removes its text and keeps its "
    "place (its author or staff)."
)
DESCRIPTION = (
    "Comments attached to site objects (user profiles, comic pages), newest first, "
    "in numbered pages. Filter with content_type and object_id."
)


def display_of(settings: Settings, viewer: Viewer | None = None) -> Display:
    """How comments are shown to this request (time zone, default avatar, viewer)."""
    return Display(tz=settings.tzinfo, default_avatar=settings.default_avatar, viewer=viewer)


# The list a written comment is on: (content_type, object_id).
Target = tuple[str, int]


def keep_read_change(conn: Connection, comment: Comment, target: Target,
                     settings: Settings) -> None:
    """A comment marked read or unread: its stored render, and a comment.read_changed event."""
    _keep(conn, comment, settings)
    outbox.record(conn, events.READ_CHANGED, _subject(comment, target),
                  is_read=comment.is_read)


def keep_deletion(conn: Connection, comment: Comment, target: Target,
                  settings: Settings) -> None:
    """A deleted comment: its stored render (no text), a comment.deleted event, and no
    text of it left in its earlier events (storage.outbox.record)."""
    _keep(conn, comment, settings)
    outbox.record(conn, events.DELETED, _subject(comment, target))


def _keep(conn: Connection, comment: Comment, settings: Settings) -> str:
    """Store what ``comment`` shows to everyone as it is now; that render (JSON)."""
    return renders.for_settings(settings).save_one(conn, comment)


def _subject(comment: Comment, target: Target) -> events.Subject:
    return events.Subject(comment.id, target[0], target[1], comment.parent_id)


def locator() -> Callable[[int], str]:
    """A new comment's own URL (a post's Location) as this request names the service
    (host, scheme, mount point), built as ``url_for`` builds it, by a function any thread
    may call: the thread that writes a batch of posts builds each one's Location."""
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    adapter = request_ctx.url_adapter or app.create_url_adapter(request)

    def locate(comment_id: int) -> str:
        values: dict[str, Any] = {"comment_id": comment_id}
        app.inject_url_defaults(DETAIL_ENDPOINT, values)
        return str(adapter.build(DETAIL_ENDPOINT, values, force_external=True))

    return locate


def shown(comment: Comment, settings: Settings, viewer: Viewer | None) -> dict[str, Any]:
    """One comment as a list entry shows it to ``viewer``."""
    result: dict[str, Any] = dump_comments([comment], display_of(settings, viewer))[0]
    return result


def page_response(body: bytes, status: int = 200, headers: dict[str, str] | None = None,
                  allow: str = ALLOW) -> Response:
    """A list page, its post form given a fresh idempotency key (browsable.with_form_key)."""
    return html_response(browsable.with_form_key(body), status, headers, allow)


def list_responder(representation: str) -> Respond:
    """How a list body becomes a response: (body, status, headers) -> Response."""
    return {JSON: encoded_response, HTML: page_response}[representation]


def json_headers(extra: dict[str, str] | None = None, allow: str = ALLOW) -> dict[str, str]:
    """The headers the JSON answer carries, as the browsable page lists them."""
    return {"Allow": allow, "Content-Type": "application/json", "Vary": "Accept",
            **(extra or {})}


def comment_response(req: Request, payload: dict[str, Any], representation: str, *,
                     method: str, status: int, viewer: Viewer | None, name: str,
                     allow: str, headers: dict[str, str] | None = None) -> Response:
    """One comment as JSON, or as the browsable page that shows that JSON."""
    if representation == HTML:
        return html_response(browsable.comment_page(
            req, payload, method=method, status=status, viewer=viewer,
            json_headers=json_headers(headers, allow=allow), name=name,
            summary=DETAIL_DESCRIPTION), status, headers, allow=allow)
    return api_response(payload, status, headers, allow=allow)


def described_response(req: Request, name: str, summary: str, post_schema: Schema | None,
                       representation: str, viewer: Viewer | None, allow: str) -> Response:
    """An OPTIONS answer: the endpoint's description (with the fields POST takes, given
    their schema) as JSON, or as the browsable page."""
    described = options_description.describe(name, summary, post_schema)
    if representation == HTML:
        return html_response(browsable.options_page(
            req, described, json_headers=json_headers(allow=allow), viewer=viewer),
            allow=allow)
    return api_response(described, allow=allow)
