"""Writing a new comment: the checks that need the database, then its place in its lists.

Runs inside the writer's transaction (``db.writing``), so what is checked cannot change
before the comment is written, and any refusal leaves the database as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy.engine import Connection

from commentsvc.rules.identifiers import INT64_MAX
from commentsvc.storage import store
from commentsvc.web.exceptions import ValidationFailed


def _missing(value: int) -> str:
    return f'Invalid pk "{value}" - object does not exist.'


# A host site's function (content_type, object_id) -> bool (COMMENTSVC_TARGET_EXISTS).
HostCheck = Callable[[str, int], bool]


def check_target(conn: Connection, content_type: str, object_id: int,
                 host_check: HostCheck | None = None) -> None:
    """The user, comic page or host object must exist; 400 on object_id otherwise."""
    if not (0 < object_id <= INT64_MAX
            and target_exists(conn, content_type, object_id, host_check)):
        raise ValidationFailed({"object_id": [_missing(object_id)]})


def target_exists(conn: Connection, content_type: str, object_id: int,
                  host_check: HostCheck | None = None) -> bool:
    """The service's tables answer for users and comic pages; for a host's own content
    types, the host's function (COMMENTSVC_TARGET_EXISTS), when it gave one."""
    if host_check is not None and not store.keeps_targets(content_type):
        return bool(host_check(content_type, object_id))
    return store.target_exists(conn, content_type, object_id)


def check_parent(conn: Connection, parent_id: int, content_type: str, object_id: int) -> None:
    """A reply's parent must exist, be on the same target and not be deleted."""
    parent = store.facts(conn, parent_id) if 0 < parent_id <= INT64_MAX else None
    if parent is None:
        raise ValidationFailed({"parent": [_missing(parent_id)]})
    if (parent.content_type, parent.object_id) != (content_type, object_id):
        raise ValidationFailed({"parent": ["The parent comment is on another object."]})
    if parent.is_deleted:
        raise ValidationFailed({"parent": ["A deleted comment cannot be replied to."]})


def check(conn: Connection, fields: dict[str, Any], host_check: HostCheck | None = None) -> None:
    """The loaded fields of a post, checked against the database (400 on a bad one)."""
    check_target(conn, fields["content_type"], fields["object_id"], host_check)
    if fields["parent"] is not None:
        check_parent(conn, fields["parent"], fields["content_type"], fields["object_id"])


def write(conn: Connection, author_id: int, fields: dict[str, Any]) -> int:
    """Write a checked post; its id. A reply to a reply is stored as a reply to its
    thread's root (replies nest one level)."""
    return store.add_comment(conn, store.NewComment(
        content_type=fields["content_type"], object_id=fields["object_id"],
        author_id=author_id, body=fields["body"], parent_id=fields["parent"],
        is_anonymous=fields["is_anonymous"]))
