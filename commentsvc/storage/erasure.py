"""Removing text for good: a deleted comment keeps no body, an erased user keeps nothing.

Soft deletion used to keep a comment's text in the table (and in every export) for ever.
Now deletion blanks it (``store.soft_delete``); ``blank_deleted`` does the same for rows
deleted before that, and ``erase_user`` is the right to erasure: every comment the user
wrote is shown as deleted with no text, the profile keeps only a neutral name, and the
user's sign-in keys are revoked. Rows and positions stay, so no list or reply moves.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.engine import Connection

from commentsvc.rules.comment_lists import lists_of
from commentsvc.rules.events import Subject
from commentsvc.storage import outbox
from commentsvc.storage.queries import erasure as q
from commentsvc.storage.queries import writes
from commentsvc.web import idempotency


def blank_deleted(conn: Connection) -> int:
    """Blank the text of every deleted comment that still has some; how many there were."""
    return conn.execute(q.BLANK_DELETED).rowcount


def placeholder_name(user_id: int, attempt: int = 1) -> str:
    """The name an erased user is shown under: neutral, with the id; from the second
    ``attempt`` on, numbered (another user may have been given the first as a name).

    >>> placeholder_name(17), placeholder_name(17, 2)
    ('erased-user-17', 'erased-user-17-2')
    """
    return f"erased-user-{user_id}" + (f"-{attempt}" if attempt > 1 else "")


def free_placeholder(conn: Connection, user_id: int, current: str) -> str:
    """The name the erased ``user_id`` keeps: ``current`` if a placeholder of it (erased
    before) no other user has since (erasing again changes nothing), else the first
    placeholder no other user has."""
    first = re.escape(placeholder_name(user_id))
    if re.fullmatch(rf"{first}(-[2-9]|-[1-9][0-9]+)?", current) and \
            not conn.execute(q.NAME_TAKEN, {"id": user_id, "username": current}).first():
        return current
    attempt = 1
    while conn.execute(q.NAME_TAKEN, {"id": user_id,
                                      "username": placeholder_name(user_id, attempt)}).first():
        attempt += 1
    return placeholder_name(user_id, attempt)


@dataclass(frozen=True, slots=True)
class Erased:
    """What erasing a user changed."""

    user_id: int
    comments: int
    tokens: int
    name: str

    def summary(self) -> str:
        return (f"User {self.user_id} erased: {self.comments} comment(s) blanked, "
                f"{self.tokens} key(s) revoked, shown as {self.name!r}.")


def erase_user(conn: Connection, user_id: int,
               rerender: Callable[[Connection, int], int]) -> Erased | None:
    """Erase a user in the caller's (writer's) transaction; None if there is no such user.

    ``rerender(conn, user_id)`` stores the renders of the user's comments again (they show
    no name and no text now); then each comment that changed gets a comment.erased event,
    and the events still kept hold none of the user's text (storage.outbox). Comments on
    the user's profile written by others are theirs and stay.
    """
    current = conn.execute(q.USERNAME, {"id": user_id}).scalar()
    if current is None:
        return None
    showing = [Subject(row.id, row.content_type, row.object_id, row.parent_id)
               for row in conn.execute(q.SHOWING_COMMENTS, {"id": user_id})]
    keys = {comments.key for shown in showing
            for comments in lists_of(shown.content_type, shown.object_id)}
    comments = conn.execute(q.ERASE_COMMENTS, {"id": user_id}).rowcount
    name = free_placeholder(conn, user_id, current)
    conn.execute(q.ANONYMISE_USER, {"id": user_id, "username": name})
    tokens = conn.execute(q.REVOKE_TOKENS, {"id": user_id}).rowcount
    idempotency.forget_user(conn, user_id)  # stored answers hold their text and name
    if keys:  # what those lists show changed: new ETags
        conn.execute(writes.BUMP_VERSIONS, {"list_keys": sorted(keys)})
    rerender(conn, user_id)
    outbox.record_erasure(conn, user_id, showing)
    return Erased(user_id, comments, tokens, name)
