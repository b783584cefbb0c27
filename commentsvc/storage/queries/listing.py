"""SQL that serves a list request: the list's size, one page of it, the page's replies."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Boolean, DateTime, bindparam, text
from sqlalchemy.types import TypeEngine

# The columns every comment row carries to the schemas, in one place.
_ROW_TYPES: dict[str, TypeEngine[Any]] = {
    "date_added": DateTime(),
    "is_deleted": Boolean(),
    "is_anonymous": Boolean(),
    "is_read": Boolean(),
}

# The size and version of one list, or no row for an empty list (primary key).
LIST_STATE = text("""
    SELECT n, version FROM commentsvc_list_count WHERE list_key = :list_key
""")

# LIST_STATE as a server-side prepared statement of one connection (PostgreSQL; storage.
# counters), and its execution with the list key as psycopg2's one parameter: the same
# row, by the same primary key.
LIST_STATE_PREPARED = "commentsvc_list_state"
PREPARE_LIST_STATE = f"""
    PREPARE {LIST_STATE_PREPARED} (text) AS {LIST_STATE.text.replace(":list_key", "$1")}
"""
EXECUTE_LIST_STATE = f"""
    EXECUTE {LIST_STATE_PREPARED} (%s)
"""

# A page's slice is a range of positions; each row also carries the list's version (its
# counter row, primary key), so that a page built for a version read earlier can tell
# that its snapshot is the same one. LIMIT repeats its size so that the planner,
# whose estimate of a range can be far off on a skewed list, always joins a page's authors
# by primary key (no hash join over the user table for twenty rows).

# One page of the whole site's list, newest first (index commentsvc_comment_site_pos).
SITE_PAGE = text("""
    SELECT c.id, c.parent_id, c.author_id, u.username, u.avatar, c.body, c.date_added,
           c.is_deleted, c.is_anonymous, c.is_read,
           (SELECT version FROM commentsvc_list_count WHERE list_key = :list_key)
               AS list_version
    FROM (
        SELECT * FROM commentsvc_comment AS c
        WHERE c.site_pos BETWEEN :lo AND :hi
        ORDER BY c.site_pos DESC
        LIMIT :hi - :lo + 1
    ) AS c
    JOIN commentsvc_user AS u ON u.id = c.author_id
    ORDER BY c.site_pos DESC
""").columns(**_ROW_TYPES)

# One page of one content type's list, newest first (index commentsvc_comment_kind_pos).
KIND_PAGE = text("""
    SELECT c.id, c.parent_id, c.author_id, u.username, u.avatar, c.body, c.date_added,
           c.is_deleted, c.is_anonymous, c.is_read,
           (SELECT version FROM commentsvc_list_count WHERE list_key = :list_key)
               AS list_version
    FROM (
        SELECT * FROM commentsvc_comment AS c
        WHERE c.content_type = :content_type AND c.kind_pos BETWEEN :lo AND :hi
        ORDER BY c.kind_pos DESC
        LIMIT :hi - :lo + 1
    ) AS c
    JOIN commentsvc_user AS u ON u.id = c.author_id
    ORDER BY c.kind_pos DESC
""").columns(**_ROW_TYPES)

# One page of one target's list, newest first (index commentsvc_comment_target_pos).
TARGET_PAGE = text("""
    SELECT c.id, c.parent_id, c.author_id, u.username, u.avatar, c.body, c.date_added,
           c.is_deleted, c.is_anonymous, c.is_read,
           (SELECT version FROM commentsvc_list_count WHERE list_key = :list_key)
               AS list_version
    FROM (
        SELECT * FROM commentsvc_comment AS c
        WHERE c.content_type = :content_type AND c.object_id = :object_id
      AND c.target_pos BETWEEN :lo AND :hi
        ORDER BY c.target_pos DESC
        LIMIT :hi - :lo + 1
    ) AS c
    JOIN commentsvc_user AS u ON u.id = c.author_id
    ORDER BY c.target_pos DESC
""").columns(**_ROW_TYPES)

# One comment by id, for its own URL (primary key).
ONE_COMMENT = text("""
    SELECT c.id, c.parent_id, c.author_id, u.username, u.avatar, c.body, c.date_added,
           c.is_deleted, c.is_anonymous, c.is_read
    FROM commentsvc_comment AS c
    JOIN commentsvc_user AS u ON u.id = c.author_id
    WHERE c.id = :id
""").columns(**_ROW_TYPES)

# The target of each of a page's comments, for the browsable page's reply and mark-read
# controls (primary key).
COMMENT_TARGETS = text("""
    SELECT id, content_type, object_id FROM commentsvc_comment WHERE id IN :ids
""").bindparams(bindparam("ids", expanding=True))

# The replies of a page's roots, each thread newest first (index commentsvc_comment_replies).
REPLIES = text("""
    SELECT c.id, c.parent_id, c.author_id, u.username, u.avatar, c.body, c.date_added,
           c.is_deleted, c.is_anonymous, c.is_read
    FROM commentsvc_comment AS c
    JOIN commentsvc_user AS u ON u.id = c.author_id
    WHERE c.parent_id IN :root_ids
    ORDER BY c.parent_id, c.date_added DESC, c.id DESC
""").bindparams(bindparam("root_ids", expanding=True)).columns(**_ROW_TYPES)

# At most :cap newest replies of each root, PostgreSQL: one index range per root (LATERAL).
REPLIES_CAPPED_POSTGRESQL = text("""
    SELECT c.id, c.parent_id, c.author_id, u.username, u.avatar, c.body, c.date_added,
           c.is_deleted, c.is_anonymous, c.is_read
    FROM unnest(CAST(:root_ids AS BIGINT[])) AS root (id)
    CROSS JOIN LATERAL (
        SELECT x.* FROM commentsvc_comment AS x
        WHERE x.parent_id = root.id
        ORDER BY x.date_added DESC, x.id DESC
        LIMIT :cap
    ) AS c
    JOIN commentsvc_user AS u ON u.id = c.author_id
    ORDER BY c.parent_id, c.date_added DESC, c.id DESC
""").columns(**_ROW_TYPES)

# At most :cap newest replies of each root, SQLite (no LATERAL): ranked by a window function
# over the roots' replies (index commentsvc_comment_replies).
REPLIES_CAPPED_SQLITE = text("""
    SELECT c.id, c.parent_id, c.author_id, u.username, u.avatar, c.body, c.date_added,
           c.is_deleted, c.is_anonymous, c.is_read
    FROM (
        SELECT x.*, ROW_NUMBER() OVER (PARTITION BY x.parent_id
                                       ORDER BY x.date_added DESC, x.id DESC) AS rank
        FROM commentsvc_comment AS x
        WHERE x.parent_id IN :root_ids
    ) AS c
    JOIN commentsvc_user AS u ON u.id = c.author_id
    WHERE c.rank <= :cap
    ORDER BY c.parent_id, c.date_added DESC, c.id DESC
""").bindparams(bindparam("root_ids", expanding=True)).columns(**_ROW_TYPES)
