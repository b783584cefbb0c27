"""Deleting one comment on PostgreSQL (web.deletion): the two statements of
queries.deletion, each prepared once on a connection and then run by name
(storage.prepared), since the writers' lock is held while they run and planning them took
longer than running them."""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Connection

from commentsvc.storage import prepared
from commentsvc.storage.queries import deletion as q


def blank(conn: Connection, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The comment blanked, its lists' versions raised, its comment.deleted event kept
    (queries.deletion.DELETE); the texts of it to rewrite, as (kind, id, key, body,
    changed) rows."""
    return prepared.run(conn, q.DELETE, params)


def rewrite(conn: Connection, params: dict[str, Any]) -> None:
    """Those texts rewritten (queries.deletion.REWRITE)."""
    prepared.run(conn, q.REWRITE, params)
