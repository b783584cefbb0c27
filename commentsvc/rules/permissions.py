"""Who may do what to a comment (contract section 2, and the write endpoints' rules).

``viewer`` is the signed-in user (``auth.Viewer``) or None; without a user nothing is
allowed. Pure functions, so the list's ``can_*`` fields and the endpoints that act on
them can never disagree.
"""

from __future__ import annotations

from typing import Protocol

from commentsvc.rules.identifiers import USER_TYPE


class User(Protocol):
    """What the rules read of a signed-in user (``auth.Viewer`` has it)."""

    @property
    def id(self) -> int: ...

    @property
    def is_staff(self) -> bool: ...


def can_reply(viewer: User | None, is_deleted: bool) -> bool:
    """Any signed-in user may answer a comment that is not deleted."""
    return viewer is not None and not is_deleted


def can_delete(viewer: User | None, author_id: int) -> bool:
    """The author may delete their own comment; staff may delete any."""
    return viewer is not None and (viewer.is_staff or viewer.id == author_id)


def can_mark_read(viewer: User | None, content_type: str, object_id: int) -> bool:
    """The owner of the commented object: the profile's own user, staff for anything else
    (comic pages belong to the site)."""
    if viewer is None:
        return False
    if content_type == USER_TYPE:
        return viewer.id == object_id
    return viewer.is_staff
