"""What a comment shows to everyone, rendered once and stored, and the list entry made of it.

Most of a list entry does not depend on who asks: the escaped body, the author's name, URL
and avatar, the date in the configured time zone. The schema (``STORED_SCHEMA``, the
comment schema's own fields) renders that part when the comment is written or imported,
and it is stored beside the comment as JSON. A page then only adds what depends on the
viewer (``can_delete``, ``can_reply``) and the replies.

What the stored part depends on besides the comment (the time zone and default avatar
settings, the author's name and avatar) is spelled out in its key (``render_key``). A page
read compares the key with the author's current row, so a stored part that is out of
date (a user renamed behind the service's back, a new time zone) is never served: that
comment is rendered again on the spot, and the ``rerender`` command brings the stored ones
up to date.
"""

from __future__ import annotations

from collections.abc import Iterator
from hashlib import md5
from typing import Any, NamedTuple, cast

import orjson
from marshmallow.experimental.context import Context

from commentsvc.rules import permissions
from commentsvc.rules.schemas import CommentSchema, Display, ReplySchema
from commentsvc.storage.store import Comment

# The fields a comment shows alike to every viewer, in the interface's order; the rest
# of a list entry (can_delete, can_reply, replies) is added per request.
STORED_FIELDS = tuple(name for name in CommentSchema().dump_fields
                      if name not in ("can_delete", "can_reply", "replies"))
STORED_SCHEMA = ReplySchema(only=STORED_FIELDS)


def display_key(time_zone: str, default_avatar: str) -> str:
    """The settings a stored part depends on, spelled so that keys cannot run together.

    >>> display_key("UTC", "/a.png")
    "17:('UTC', '/a.png')"
    """
    spelled = repr((time_zone, default_avatar))
    return f"{len(spelled)}:{spelled}"


# Hex digits of the display settings' tag in a key (the page read's left(md5(...), 16)).
TAG_LENGTH = 16


def display_tag(display: str) -> str:
    """The display settings' part of a key: a fixed-length digest of ``display``
    (``display_key``), which the page read computes once per page (``left(md5(...), 16)``).

    >>> display_tag(display_key("UTC", "/a.png"))
    'f8096ac846bd2817'
    """
    return md5(display.encode("utf-8"), usedforsecurity=False).hexdigest()[:TAG_LENGTH]


def render_key(display: str, username: str, avatar: str | None) -> str:
    """The key of a stored part: the display settings' tag, then the author's name
    (prefixed with its length in UTF-8 bytes) and avatar as they were rendered.

    The database builds the same text from the author's current row when it reads a page
    (queries.listing) and compares: no hash to compute for each comment of a page, and
    two different names or avatars never give one key. No avatar counts as an empty one
    (both show the default).

    >>> render_key(display_key("UTC", "/a.png"), "Ann", None)
    'f8096ac846bd28173:Ann'
    >>> render_key(display_key("UTC", "/a.png"), "Ann Lee", "avatars/a.png")
    'f8096ac846bd28177:Ann Leeavatars/a.png'
    >>> render_key(display_key("UTC", "/a.png"), "Zoë", None)
    'f8096ac846bd28174:Zoë'
    """
    return f"{display_tag(display)}{len(username.encode('utf-8'))}:{username}{avatar or ''}"


def legacy_render_key(display: str, username: str, avatar: str | None) -> str:
    """The key of the earlier form: an MD5 of the display settings and the author's row.

    Renders stored under it stay valid (a page read checks both forms), and it is the form
    written while ``shown_key`` is still the 32-character column of those versions (a
    database ``init-db`` has not widened yet: storage.renders).

    >>> legacy_render_key(display_key("UTC", "/a.png"), "Ann", None)
    '9ae938463d8be797d705ee7a17177a2d'
    """
    material = f"{display}{len(username)}:{username}{avatar or ''}"
    return md5(material.encode("utf-8"), usedforsecurity=False).hexdigest()


def render(comment: Comment, display: Display, key_prefix: str,
           legacy: bool = False) -> tuple[str, str]:
    """The stored part of ``comment`` (JSON text) and its key (``legacy``: of the earlier
    form)."""
    with _context(display):
        shown = STORED_SCHEMA.dump(comment)
    keyed = legacy_render_key if legacy else render_key
    return (orjson.dumps(shown).decode("utf-8"),
            keyed(key_prefix, comment.username, comment.avatar))


def with_viewer(shown: dict[str, Any], author_id: int, is_deleted: bool,
                viewer: permissions.User | None) -> dict[str, Any]:
    """The stored part completed with what ``viewer`` may do (the schema's getters ask
    the same two rules), in the interface's order; a list adds ``replies`` after them."""
    shown["can_delete"] = permissions.can_delete(viewer, author_id)
    shown["can_reply"] = permissions.can_reply(viewer, is_deleted)
    return shown


def entry(stored: str, author_id: int, is_deleted: bool, is_root: bool,
          viewer: permissions.User | None) -> dict[str, Any]:
    """A list entry of a comment without replies (one just written) made from its stored
    part: what the comment schema dumps for it (a root's replies ``[]``, a reply's null),
    without dumping it again."""
    shown = with_viewer(orjson.loads(stored), author_id, is_deleted, viewer)
    shown["replies"] = [] if is_root else None
    return shown


def stored_part(comment: Comment, display: Display) -> dict[str, Any]:
    """The stored part of ``comment`` rendered now, as a dict (a page that found the stored
    one out of date)."""
    with _context(display):
        return cast(dict[str, Any], STORED_SCHEMA.dump(comment))


def _context(display: Display) -> Context[Display]:
    return Context(display)


def stored_texts(rows: list[tuple[Any, ...]], display: Display) -> Iterator[Stored]:
    """Each comment of a one-statement page read (queries.listing: the page's entries in
    list order, then the replies) with the JSON text of its stored part: the stored one,
    or the schema's render of its raw columns when that is missing or out of date."""
    for row in rows:
        part, comment_id, parent_id, author_id, is_deleted, shown = row[2:8]
        if shown is None:
            shown = _rendered_now(row, display)
        yield Stored(part == 1, comment_id, parent_id, author_id, is_deleted, shown)


def _rendered_now(row: tuple[Any, ...], display: Display) -> str:
    """The JSON text of the stored part of a page read's row rendered from its raw
    columns (its stored one missing or out of date)."""
    (_n, _version, _part, comment_id, parent_id, author_id, is_deleted, _shown,
     username, avatar, body, date_added, is_anonymous, is_read) = row
    return orjson.dumps(stored_part(Comment(
        comment_id, parent_id, author_id, username, avatar, body, date_added,
        is_deleted, is_anonymous, is_read), display)).decode("utf-8")


class Stored(NamedTuple):
    """One comment of a page read: whether it is a page entry (else a reply of one), who
    wrote it, whether it is deleted, and its stored part as JSON text."""

    listed: bool
    id: int
    parent_id: int | None
    author_id: int
    is_deleted: bool
    shown: str


def results(rows: list[tuple[Any, ...]], display: Display,
            viewer: permissions.User | None) -> list[dict[str, Any]]:
    """A page's ``results`` as the comment schema dumps them for ``viewer`` (dicts: the
    browsable page shows them)."""
    entries: list[dict[str, Any]] = []
    threads: dict[int, list[dict[str, Any]]] = {}
    for stored in stored_texts(rows, display):
        entry = with_viewer(orjson.loads(stored.shown), stored.author_id, stored.is_deleted,
                            viewer)
        if stored.listed:
            entry["replies"] = (threads.setdefault(stored.id, [])
                                if stored.parent_id is None else None)
            entries.append(entry)
        else:
            threads[stored.parent_id or 0].append(entry)
    return entries


# What ``with_viewer`` adds, as JSON members, by (can_delete, can_reply).
_VIEWER_MEMBERS = {(delete, reply): orjson.dumps(
    {"can_delete": delete, "can_reply": reply})[1:-1].decode("utf-8")
    for delete in (False, True) for reply in (False, True)}


def results_json(rows: list[tuple[Any, ...]], display: Display,
                 viewer: permissions.User | None) -> list[orjson.Fragment]:
    """The same ``results`` as JSON fragments, each entry's stored JSON text completed as
    ``with_viewer`` and ``results`` complete the dict (the tests check that both give the
    same JSON), without parsing it: the JSON answer's way. Its cost is per comment, so it
    reads the rows as they come, making no object for a comment but its text."""
    entries: list[tuple[str, int | None]] = []  # (text without its closing brace, root id)
    threads: dict[int, list[str]] = {}
    can_delete, can_reply = permissions.can_delete, permissions.can_reply
    for row in rows:
        part, comment_id, parent_id, author_id, is_deleted, shown = row[2:8]
        if shown is None:
            shown = _rendered_now(row, display)
        text = (f"{shown[:-1]},"
                f"{_VIEWER_MEMBERS[can_delete(viewer, author_id), can_reply(viewer, is_deleted)]}")
        if part == 1:  # a page entry, else a reply of one
            root = comment_id if parent_id is None else None
            if root is not None:
                threads[root] = []
            entries.append((text, root))
        else:
            threads[parent_id or 0].append(text + "}")
    return [orjson.Fragment(f'{text},"replies":null}}' if root is None else
                            f'{text},"replies":[{",".join(threads[root])}]}}')
            for text, root in entries]
