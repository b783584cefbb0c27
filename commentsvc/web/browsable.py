"""The browsable rendering: each JSON answer as an HTML page a person can read and use.

A page shows the request, the status and headers the JSON answer carries, that JSON
pretty-printed with its URLs as links, and beside it a preview of the comments as a site
shows them. The templates escape everything; the one exception is a comment's ``body``,
which the schemas deliver as safe HTML (``<br />`` and ``<a href rel="nofollow">``).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote_plus

import orjson
from flask import Request, render_template, url_for
from markupsafe import Markup
from marshmallow import Schema
from werkzeug.http import HTTP_STATUS_CODES

from commentsvc.rules import permissions
from commentsvc.web import current, options_description
from commentsvc.web.auth import Viewer
from commentsvc.web.request_args import last, raw_query
from commentsvc.web.responses import DETAIL_ENDPOINT, FEED_ENDPOINT, LIST_ENDPOINT

if TYPE_CHECKING:
    from commentsvc.rules.comment_lists import CommentList

# Stands in the cached page for the post form's idempotency key, which each page served
# replaces with a fresh one (``with_form_key``); no escaping changes it.
FORM_KEY_PLACEHOLDER = "commentsvc-form-key-0000000000000000"
SIGN_IN_ENDPOINT = "commentsvc_signin.login"
SIGN_OUT_ENDPOINT = "commentsvc_signin.logout"
_INDENT = "  "  # as orjson.OPT_INDENT_2, so the page shows what the JSON answer holds


def json_html(value: Any) -> Markup:
    """``value`` as pretty JSON in HTML, the URL fields' values as links.

    Each piece is escaped first; only the value of a URL field (``url``, ``…_url``,
    ``author_avatar``) that is an http(s) URL or a site path becomes a link, so nothing
    a user typed (a name, a body) is ever turned into one.

    >>> print(json_html({"next_url": "http://h/?a=1&page=2", "author": "<b>"}))
    {
      &#34;next_url&#34;: &#34;<a href="http://h/?a=1&amp;page=2">http://h/?a=1&amp;page=2</a>&#34;,
      &#34;author&#34;: &#34;&lt;b&gt;&#34;
    }
    """
    return Markup("").join(_json_parts(value, None, 0))


def _json_parts(value: Any, key: str | None, depth: int) -> Iterator[str | Markup]:
    if isinstance(value, dict | list) and value:
        opening, closing = ("{", "}") if isinstance(value, dict) else ("[", "]")
        items = list(value.items()) if isinstance(value, dict) else [(key, v) for v in value]
        inner = _INDENT * (depth + 1)
        yield opening + "\n"
        for index, (name, item) in enumerate(items):
            yield inner
            if isinstance(value, dict):
                yield _dumped(name) + ": "
            yield from _json_parts(item, name, depth + 1)
            yield ",\n" if index < len(items) - 1 else "\n"
        yield _INDENT * depth + closing
    elif isinstance(value, str) and is_url_field(key) and is_link_target(value):
        yield Markup('"<a href="{}">{}</a>"').format(value, _dumped(value)[1:-1])
    else:
        yield _dumped(value)


def _dumped(value: Any) -> str:
    return orjson.dumps(value).decode("utf-8")


def is_url_field(key: str | None) -> bool:
    """Whether a JSON key names a URL: ``url``, ``previous_url``, ``author_avatar``…"""
    return key is not None and (key == "url" or key.endswith("_url") or key == "author_avatar")


def is_link_target(value: str) -> bool:
    """An http(s) URL or a path on this site: never ``javascript:`` or another origin's
    ``//host`` path."""
    lowered = value.lower()
    return (lowered.startswith(("http://", "https://"))
            or (value.startswith("/") and not value.startswith("//")))


def with_format(query: str, fmt: str) -> str:
    """The query string with its ``format`` replaced by ``fmt``, the rest kept as sent.

    >>> with_format("format=api&content_type=users.user&format=x", "json")
    'content_type=users.user&format=json'
    """
    kept = [segment for segment in query.split("&")
            if segment and unquote_plus(segment.partition("=")[0]) != "format"]
    return "&".join([*kept, f"format={fmt}"])


def status_line(status: int) -> str:
    """``200 OK``, ``201 Created``…"""
    return f"{status} {HTTP_STATUS_CODES.get(status, '')}".rstrip()


def _frame(req: Request, *, method: str, status: int, json_headers: dict[str, str],
           data: Any, name: str, summary: str, viewer: Viewer | None) -> dict[str, Any]:
    """What every page shows: the request, the JSON answer's status, headers and body."""
    query = raw_query(req)
    path = req.script_root + req.path
    return {
        "name": name,
        "summary": summary,
        "request_line": f"{method} {path}" + (f"?{query}" if query else ""),
        "status_line": "HTTP " + status_line(status),
        "headers": [(header, _linked_header(header, value))
                    for header, value in json_headers.items()],
        "json": json_html(data),
        "json_url": f"{path}?{with_format(query, 'json')}",
        "list_url": url_for(LIST_ENDPOINT, format="api"),
        "stylesheet": url_for("commentsvc.static", filename="browsable.css"),
        "script": url_for("commentsvc.static", filename="browsable.js"),
        "viewer": viewer,
        "viewer_name": None if viewer is None else (viewer.username or f"user {viewer.id}"),
        "csrf_token": None if viewer is None else viewer.csrf_token,
        **sign_in_links(req, viewer),
    }


def sign_in_links(req: Request, viewer: Viewer | None) -> dict[str, Any]:
    """The header's sign-in link (back to this page after) or sign-out form: standalone
    only, where the sign-in page exists; a token or a host's login has neither."""
    if not current.service().browser_sign_in:
        return {"sign_in_url": None, "sign_out": None}
    if viewer is None:
        query = raw_query(req)
        here = req.script_root + req.path + (f"?{query}" if query else "")
        return {"sign_in_url": url_for(SIGN_IN_ENDPOINT, next=here), "sign_out": None}
    if viewer.csrf_token is None:
        return {"sign_in_url": None, "sign_out": None}
    return {"sign_in_url": None, "sign_out": {"action": url_for(SIGN_OUT_ENDPOINT),
                                              "csrf_token": viewer.csrf_token}}


def comment_actions(comments: list[dict[str, Any]], viewer: Viewer | None,
                    targets: dict[int, tuple[str, int]]) -> dict[int, dict[str, Any]]:
    """What the viewer may do to each shown comment (replies too), by id: reply (a form
    posting to the comment's target), delete, and mark read or unread (buttons that
    browsable.js sends as DELETE and PATCH). Nothing without a viewer."""
    if viewer is None:
        return {}
    actions = {}
    for comment in [*comments, *(r for c in comments for r in c.get("replies") or [])]:
        target = targets.get(comment["id"])
        reply = None
        if comment["can_reply"] and target is not None:
            reply = {"action": url_for(LIST_ENDPOINT, format="api"),
                     "content_type": target[0], "object_id": target[1]}
        may_mark = target is not None and permissions.can_mark_read(viewer, *target)
        actions[comment["id"]] = {
            "id": comment["id"],
            "url": url_for(DETAIL_ENDPOINT, comment_id=comment["id"]),
            "reply": reply,
            "delete": comment["can_delete"] and not comment["is_deleted"],
            "mark_read": (not comment["is_read"]) if may_mark else None,
            "csrf_token": viewer.csrf_token,
        }
    return actions


def _linked_header(name: str, value: str) -> str | Markup:
    if name == "Location" and is_link_target(value):
        return Markup('<a href="{}">{}</a>').format(value, value)
    return value


def _render(template: str, context: dict[str, Any]) -> bytes:
    return render_template(f"commentsvc/{template}", **context).encode("utf-8")


def post_form(req: Request, viewer: Viewer | None, schema: Schema) -> dict[str, Any] | None:
    """The post form for a signed-in viewer: its action and the fields OPTIONS describes,
    the target prefilled from the list's filter. None for a request without a user."""
    if viewer is None:
        return None
    return {
        "action": url_for(LIST_ENDPOINT, format="api"),
        "fields": options_description.field_descriptions(schema),
        "values": {"content_type": last(req, "content_type") or "",
                   "object_id": last(req, "object_id") or ""},
        "key_placeholder": FORM_KEY_PLACEHOLDER,
        "csrf_token": viewer.csrf_token,
    }


def with_form_key(body: bytes) -> bytes:
    """The page with a new random idempotency key in its post form, if it has one.

    Rendered pages are cached by ETag, so the key cannot be rendered into them: each page
    served gets its own here, whether built or from the cache. The tag does not cover the
    key; a 304 leaves the browser the copy (and key) it has, so sending that copy's form
    again posts once, as a form sent twice should.
    """
    placeholder = FORM_KEY_PLACEHOLDER.encode()
    if placeholder not in body:
        return body
    return body.replace(placeholder, secrets.token_urlsafe(24).encode())


def kind_links(req: Request, content_types: tuple[str, ...]) -> list[dict[str, str]]:
    """A link to each kind's whole list (the filter form names one target only, since an
    empty object_id is refused), keeping the page size asked for."""
    page_size = last(req, "page_size")
    extra: dict[str, Any] = {} if page_size is None else {"page_size": page_size}
    return [{"content_type": kind,
             "url": url_for(LIST_ENDPOINT, format="api", content_type=kind, **extra)}
            for kind in content_types]


def list_page(req: Request, data: dict[str, Any], *, page: int, listed: CommentList,
              json_headers: dict[str, str], viewer: Viewer | None,
              content_types: tuple[str, ...], new_comment_schema: Schema,
              max_body_length: int, name: str, summary: str,
              targets: dict[int, tuple[str, int]] | None = None) -> bytes:
    """A page of the list: filter form, pager, the comments' preview (with what the viewer
    may do to each, given the comments' ``targets``), the JSON, and the link to the
    ``listed`` list's Atom feed (web.feed) that feed readers find in the head."""
    context = _frame(req, method="GET", status=200, json_headers=json_headers, data=data,
                     name=name, summary=summary, viewer=viewer)
    context.update(
        comments=data["results"],
        p8n=data["p8n"],
        page=page,
        filters={name: last(req, name) or "" for name in ("content_type", "object_id",
                                                           "page_size")},
        content_types=content_types,
        kind_links=kind_links(req, content_types),
        filter_action=url_for(LIST_ENDPOINT),
        post=post_form(req, viewer, new_comment_schema),
        actions=comment_actions(data["results"], viewer, targets or {}),
        max_body_length=max_body_length,
        feed_url=url_for(FEED_ENDPOINT, **listed.filters),
    )
    return _render("list.html", context)


def comment_page(req: Request, comment: dict[str, Any], *, method: str, status: int,
                 json_headers: dict[str, str], viewer: Viewer | None, name: str,
                 summary: str) -> bytes:
    """One comment (a GET of it, or the 201 of a POST): its preview and its JSON."""
    context = _frame(req, method=method, status=status, json_headers=json_headers,
                     data=comment, name=name, summary=summary, viewer=viewer)
    context.update(comments=[comment])
    return _render("comment.html", context)


def options_page(req: Request, described: dict[str, Any], *, json_headers: dict[str, str],
                 viewer: Viewer | None) -> bytes:
    """An endpoint's description (OPTIONS): what it renders and parses, its POST fields."""
    context = _frame(req, method="OPTIONS", status=200, json_headers=json_headers,
                     data=described, name=described["name"],
                     summary=described["description"], viewer=viewer)
    context.update(described=described)
    return _render("options.html", context)
