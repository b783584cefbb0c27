"""Which list a request names: the whole site, one kind of target, or one target.

Each list has a key in ``commentsvc_list_count`` and its own position column, so the
store can read its size and any page of it without scanning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SITE_KEY = "site"


@dataclass(frozen=True)
class CommentList:
    """A list of comments: all of them, those of one content type, or of one target."""

    content_type: str | None = None
    object_id: int | None = None

    @property
    def key(self) -> str:
        """The list's row in commentsvc_list_count.

        >>> CommentList().key, CommentList("users.user").key, CommentList("users.user", 7).key
        ('site', 'kind:users.user', 'target:users.user:7')
        """
        return list_key(self.content_type, self.object_id)

    @property
    def filters(self) -> dict[str, Any]:  # Any: url_for takes them as keywords
        """The query parameters that name the list in its URLs (none for the whole site).

        >>> CommentList().filters, CommentList("users.user", 7).filters
        ({}, {'content_type': 'users.user', 'object_id': 7})
        """
        named = {"content_type": self.content_type, "object_id": self.object_id}
        return {name: value for name, value in named.items() if value is not None}


def list_key(content_type: str | None, object_id: int | None) -> str:
    """The counter key of a list; the SQL that recounts lists builds the same strings."""
    if content_type is None:
        return SITE_KEY
    if object_id is None:
        return f"kind:{content_type}"
    return f"target:{content_type}:{object_id}"


def lists_of(content_type: str, object_id: int) -> tuple[CommentList, ...]:
    """The three lists one comment belongs to, widest first."""
    return (CommentList(), CommentList(content_type), CommentList(content_type, object_id))
