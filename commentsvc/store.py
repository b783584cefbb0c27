"""Runs the queries and returns plain data; knows nothing of requests or HTTP."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.engine import Connection

from .lists import CommentList
from .queries import listing, positions


@dataclass(slots=True)
class Comment:
    """One stored comment as the schemas need it; ``replies`` is None for a reply."""

    id: int
    parent_id: int | None
    username: str
    avatar: str | None
    body: str
    date_added: datetime
    is_deleted: bool
    is_anonymous: bool
    is_read: bool
    replies: list[Comment] | None = None


def count(conn: Connection, comments: CommentList) -> int:
    """The number of comments in a list, read from its counter row."""
    return conn.execute(listing.LIST_COUNT, {"list_key": comments.key}).scalar() or 0


def page(conn: Connection, comments: CommentList, lo: int, hi: int) -> list[Comment]:
    """The comments at positions lo..hi of a list, newest first, roots with their replies."""
    if hi < lo:
        return []
    params: dict = {"lo": lo, "hi": hi}
    if comments.content_type is None:
        statement = listing.SITE_PAGE
    elif comments.object_id is None:
        statement, params["content_type"] = listing.KIND_PAGE, comments.content_type
    else:
        statement = listing.TARGET_PAGE
        params.update(content_type=comments.content_type, object_id=comments.object_id)
    entries = [Comment(*row) for row in conn.execute(statement, params)]
    roots = {entry.id: entry for entry in entries if entry.parent_id is None}
    for root in roots.values():
        root.replies = []
    if roots:
        for row in conn.execute(listing.REPLIES, {"root_ids": list(roots)}):
            roots[row.parent_id].replies.append(Comment(*row))
    return entries


def renumber(conn: Connection) -> None:
    """Recompute every position and every list count after a bulk change."""
    conn.execute(positions.RENUMBER_ALL)
    conn.execute(positions.CLEAR_COUNTS)
    conn.execute(positions.RECOUNT_ALL)
