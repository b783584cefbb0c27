"""Runs the queries and returns plain data; knows nothing of requests or HTTP."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import TextClause, TextualSelect
from sqlalchemy.engine import Connection

from commentsvc.rules.comment_lists import CommentList, lists_of
from commentsvc.rules.identifiers import INT64_MAX
from commentsvc.storage import prepared
from commentsvc.storage.queries import listing, positions, writes


@dataclass(slots=True)
class Comment:
    """One stored comment as the schemas need it; ``replies`` is None for a reply."""

    id: int
    parent_id: int | None
    author_id: int  # never sent; decides who may delete it
    username: str
    avatar: str | None
    body: str
    date_added: datetime
    is_deleted: bool
    is_anonymous: bool
    is_read: bool
    replies: list[Comment] | None = None


@dataclass(frozen=True, slots=True)
class ListState:
    """A list's size and version: enough to number its pages and tag its responses."""

    count: int
    version: int


def state(conn: Connection, comments: CommentList) -> ListState:
    """The size and version of a list, read from its counter row (an empty list: 0, 0)."""
    row = conn.execute(listing.LIST_STATE, {"list_key": comments.key}).first()
    return ListState(row.n, row.version) if row else ListState(0, 0)


def count(conn: Connection, comments: CommentList) -> int:
    """The number of comments in a list, read from its counter row."""
    return state(conn, comments).count


def page(conn: Connection, comments: CommentList, lo: int, hi: int,
         reply_cap: int = 0) -> list[Comment]:
    """The comments at positions lo..hi of a list, newest first, roots with their replies.

    ``reply_cap`` > 0 embeds at most that many newest replies per root (all are listed on
    their own anyway), so one hugely answered comment cannot make its page huge. The
    service reads its pages in one statement (counters.ListStateReader.read_page); this
    reads them with the plain slice and reply queries, which tests use as an independent
    reader.
    """
    if hi < lo:
        return []
    params: dict[str, Any] = {"lo": lo, "hi": hi, "list_key": comments.key}
    if comments.content_type is None:
        statement = listing.SITE_PAGE
    elif comments.object_id is None:
        statement, params["content_type"] = listing.KIND_PAGE, comments.content_type
    else:
        statement = listing.TARGET_PAGE
        params.update(content_type=comments.content_type, object_id=comments.object_id)
    rows = conn.execute(statement, params).all()
    return _with_replies(conn, [Comment(*row[:_COMMENT_COLUMNS]) for row in rows], reply_cap)


# The columns of a comment row (a page's rows carry the list's version after them).
_COMMENT_COLUMNS = 10


def one(conn: Connection, comment_id: int, reply_cap: int = 0) -> Comment | None:
    """One comment as a list shows it (a root with its replies), or None if there is none."""
    row = conn.execute(listing.ONE_COMMENT, {"id": comment_id}).first()
    return _with_replies(conn, [Comment(*row)], reply_cap)[0] if row else None


def targets(conn: Connection, ids: list[int]) -> dict[int, tuple[str, int]]:
    """Each comment's (content_type, object_id), by id; ids that name none are left out."""
    if not ids:
        return {}
    return {row.id: (row.content_type, row.object_id)
            for row in conn.execute(listing.COMMENT_TARGETS, {"ids": ids})}


def dates(conn: Connection, ids: list[int]) -> dict[int, datetime]:
    """Each comment's date (naive UTC, as stored), by id; ids that name none are left out."""
    if not ids:
        return {}
    return {row.id: row.date_added for row in conn.execute(listing.COMMENT_DATES, {"ids": ids})}


def _with_replies(conn: Connection, entries: list[Comment], reply_cap: int) -> list[Comment]:
    """``entries`` with each root's replies embedded, newest first."""
    roots = {entry.id: entry for entry in entries if entry.parent_id is None}
    threads: dict[int, list[Comment]] = {}
    for root in roots.values():
        root.replies = threads[root.id] = []
    if roots:
        params = {"root_ids": list(roots), "cap": reply_cap}
        for row in conn.execute(_replies_statement(conn, reply_cap), params):
            threads[row.parent_id].append(Comment(*row))
    return entries


def _replies_statement(conn: Connection, reply_cap: int) -> TextualSelect:
    if not reply_cap:
        return listing.REPLIES
    if conn.dialect.name == "postgresql":
        return listing.REPLIES_CAPPED_POSTGRESQL
    return listing.REPLIES_CAPPED_SQLITE


def renumber(conn: Connection) -> None:
    """Recompute every position and every list count after a bulk change."""
    conn.execute(positions.RENUMBER_ALL)
    recount(conn)


def recount(conn: Connection) -> None:
    """Recompute every list count (positions already exact, as after a numbered load)."""
    conn.execute(positions.RECOUNT_ALL, {"first_version": first_version()})


def first_version() -> int:
    """The version a list new to the counter table starts at: the time in microseconds,
    so that a list whose row was dropped, emptied or loaded again never has a version
    (and with its size, an ETag, and a page cached under it) it had before."""
    return time.time_ns() // 1000


@dataclass(frozen=True)
class NewComment:
    """What a writer supplies for a comment; the store assigns its id and positions."""

    content_type: str
    object_id: int
    author_id: int
    body: str
    parent_id: int | None = None
    is_anonymous: bool = False
    date_added: datetime | None = None  # naive UTC; None means now


# For each list: the SQL reading the sort key at a position, counting the comments before
# a key, and shifting later positions; keyed by the list's position column.
_POSITION_SQL = {
    "site_pos": (positions.SITE_AT, positions.SITE_BEFORE, positions.SITE_SHIFT),
    "kind_pos": (positions.KIND_AT, positions.KIND_BEFORE, positions.KIND_SHIFT),
    "target_pos": (positions.TARGET_AT, positions.TARGET_BEFORE, positions.TARGET_SHIFT),
}


def add_comment(conn: Connection, new: NewComment) -> int:
    """Insert a comment at its place in its three lists; returns its id.

    Run inside ``db.writing``: the id, the date and every position are decided while the
    writer's lock is held, so concurrent writers can never give two comments one position.
    A comment newer than each list's newest (the usual case) goes on top without touching
    other rows; a back-dated one shifts the later positions of that list by one.
    """
    comment_id = next_id(conn)
    date_added = new.date_added or datetime.now(UTC).replace(tzinfo=None)
    parent_id = new.parent_id
    if parent_id is not None:  # nesting is one level: a reply to a reply joins the root
        parent_id = conn.execute(positions.THREAD_ROOT, {"id": parent_id}).scalar_one()
    row = {
        "id": comment_id, "content_type": new.content_type, "object_id": new.object_id,
        "parent_id": parent_id, "author_id": new.author_id, "body": new.body,
        "date_added": date_added, "is_deleted": False, "is_anonymous": new.is_anonymous,
        "is_read": False,
    }
    scope = {"content_type": new.content_type, "object_id": new.object_id}
    for comments, column in zip(lists_of(new.content_type, new.object_id), _POSITION_SQL,
                                strict=True):
        row[column] = _place(conn, column, count(conn, comments), scope,
                             (date_added, comment_id))
    conn.execute(positions.INSERT_COMMENT, row)
    started = first_version()
    for comments in lists_of(new.content_type, new.object_id):
        conn.execute(positions.COUNT_ONE_MORE, {"list_key": comments.key,
                                                "first_version": started})
    return comment_id


def next_id(conn: Connection) -> int:
    """The id of a new comment: the next above the highest, or, once the highest is the
    largest id there is (an import may bring it), the highest free one below it."""
    highest: int = conn.execute(positions.HIGHEST_ID).scalar_one()
    if highest < INT64_MAX:
        return highest + 1
    free: int | None = conn.execute(positions.HIGHEST_FREE_ID).scalar()
    if free is None:  # every id from 1 up is taken
        raise OverflowError("no comment id is left")
    return free


def _place(conn: Connection, column: str, size: int, scope: dict[str, Any],
           key: tuple[datetime, int]) -> int:
    """The position a comment with sort ``key`` takes in a list of ``size``, making room."""
    at, before, shift = _POSITION_SQL[column]
    newest = conn.execute(at, {**scope, "pos": size}).first() if size else None
    if newest is None or key > (newest.date_added, newest.id):
        return size + 1
    position: int = conn.execute(before, {**scope, "date_added": key[0], "id": key[1]}).scalar_one()
    conn.execute(shift, {**scope, "pos": position + 1})
    return position + 1


@dataclass(frozen=True, slots=True)
class CommentFacts:
    """What deciding about one comment needs (where it is, whose it is, its state), and
    what its stored render shows."""

    id: int
    content_type: str
    object_id: int
    parent_id: int | None
    author_id: int
    is_deleted: bool
    username: str
    avatar: str | None
    date_added: datetime
    is_anonymous: bool
    is_read: bool

    def deleted(self) -> Comment:
        """The comment as it shows once deleted (no text), for its stored render."""
        return Comment(self.id, self.parent_id, self.author_id, self.username, self.avatar,
                       "", self.date_added, True, self.is_anonymous, self.is_read)


def facts(conn: Connection, comment_id: int) -> CommentFacts | None:
    """The comment's target, thread, author, state and shown fields; None if there is none.
    ``conn`` is in a transaction (a writer's: a delete's or a read mark's check)."""
    if conn.dialect.name == "postgresql":
        found = prepared.run(conn, writes.COMMENT_FACTS_PREPARED, {"id": comment_id})
    else:
        found = list(conn.execute(writes.COMMENT_FACTS, {"id": comment_id}))
    if not found:
        return None
    (found_id, content_type, object_id, parent_id, author_id, is_deleted, username, avatar,
     date_added, is_anonymous, is_read) = found[0]
    return CommentFacts(found_id, content_type, object_id, parent_id, author_id,
                        bool(is_deleted), username, avatar, date_added, bool(is_anonymous),
                        bool(is_read))


def soft_delete(conn: Connection, comment_id: int,
                target: tuple[str, int] | None = None) -> bool:
    """Mark a comment deleted and remove its text (body ""); False if already deleted.

    It keeps its place and its replies, so no position moves; its lists' versions go up.
    ``target`` (content type, object id), when the caller knows it, spares reading it.
    """
    return _change(conn, comment_id, writes.SOFT_DELETE, {"id": comment_id}, target)


def set_read(conn: Connection, comment_id: int, is_read: bool = True,
             target: tuple[str, int] | None = None) -> bool:
    """Set a comment's read flag; False if it already had that value."""
    return _change(conn, comment_id, writes.SET_READ, {"id": comment_id, "is_read": is_read},
                   target)


def _change(conn: Connection, comment_id: int, statement: TextClause,
            params: dict[str, Any], target: tuple[str, int] | None) -> bool:
    """Run an in-place change of one comment and bump the versions of its three lists."""
    if target is None:
        row = conn.execute(writes.COMMENT_TARGET, {"id": comment_id}).first()
        if row is None:
            return False
        target = (row.content_type, row.object_id)
    if conn.execute(statement, params).rowcount == 0:
        return False
    keys = [c.key for c in lists_of(*target)]
    conn.execute(writes.BUMP_VERSIONS, {"list_keys": keys})
    return True
