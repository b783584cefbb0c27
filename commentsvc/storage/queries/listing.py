"""SQL that serves a list request: the list's size, one page of it, the page's replies."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import BigInteger, Boolean, DateTime, Integer, Text, bindparam, text
from sqlalchemy.types import TypeEngine

from commentsvc.storage.queries.renders import LEGACY_RENDER_KEY, RENDER_KEY

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

# The plain slice of a page (store.page: the service itself reads pages in one statement,
# page_read below; tests read with these, independently). A page's slice is a range of
# positions; each row also carries the list's version (its counter row, primary key).
# LIMIT repeats its size so that the planner,
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

# The date of each of a feed's comments (primary key): a page read sends a fresh stored
# render without the raw columns, and the render shows the date in the display zone, to
# the minute.
COMMENT_DATES = text("""
    SELECT id, date_added FROM commentsvc_comment WHERE id IN :ids
""").bindparams(bindparam("ids", expanding=True)).columns(date_added=DateTime())

# The replies of a page's roots, each thread newest first (index
# commentsvc_comment_reply_threads).
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
# over the roots' replies (index commentsvc_comment_reply_threads).
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


# A whole list page in one statement, so in one round trip and one snapshot: the list's
# size and version, the page's comments (positions computed from that size: :page is the
# page number, or 0 for the last page) and each root's newest :cap replies (0: all). Every
# row carries the list's size and version; an empty page still gives one row, with no
# comment. Comment rows come in list order: the page's entries newest first (part 1), then
# the replies, each thread newest first (part 2).
#
# A comment's stored render (``shown``) is sent only when its key matches what it would be
# rendered from now (the display settings in :display and the author's current name and
# avatar, rules.rendered.render_key); otherwise the raw columns are, for rendering on the
# spot. Every join is a per-row index lookup, whatever plan a prepared statement gets.
PAGE_READ_PARAMETERS = {
    "site": ("list_key", "page", "size", "cap", "display"),
    "kind": ("list_key", "page", "size", "cap", "display", "content_type"),
    "target": ("list_key", "page", "size", "cap", "display", "content_type", "object_id"),
}
# The columns of a page read's rows, typed for SQLAlchemy (psycopg2 types them itself).
PAGE_ROW_TYPES: dict[str, TypeEngine[Any]] = {
    "n": BigInteger(), "version": BigInteger(), "part": Integer(), "id": BigInteger(),
    "parent_id": BigInteger(), "author_id": BigInteger(), "is_deleted": Boolean(),
    "shown": Text(), "username": Text(), "avatar": Text(), "body": Text(),
    "date_added": DateTime(), "is_anonymous": Boolean(), "is_read": Boolean(),
}
_PAGE_FILTERS = {
    "site": ("site_pos", ""),
    "kind": ("kind_pos", "c.content_type = :content_type AND"),
    "target": ("target_pos",
               "c.object_id = :object_id AND c.content_type = :content_type AND"),
}
_ENTRY_COLUMNS = """c.id, c.parent_id, c.author_id, c.body, c.date_added, c.is_deleted,
               c.is_anonymous, c.is_read, c.shown, c.shown_key"""
# A stored render is fresh when its key is the one it would be rendered under now
# (queries.renders.RENDER_KEY, the display settings' tag computed once a page in
# ``state``), or the earlier form of that key, computed only for a comment whose key is
# not the first: a CASE, since SQLite evaluates both sides of an OR.
_FRESH = f"""CASE WHEN e.shown_key = {RENDER_KEY} THEN TRUE
                 ELSE e.shown_key = {LEGACY_RENDER_KEY} END"""
_SHOWN_COLUMNS = """b.n, b.version, e.part, e.id, e.parent_id, e.author_id, e.is_deleted,
           CASE WHEN e.fresh THEN e.shown END AS shown,
           CASE WHEN e.fresh THEN NULL ELSE e.username END AS username,
           CASE WHEN e.fresh THEN NULL ELSE e.avatar END AS avatar,
           CASE WHEN e.fresh THEN NULL ELSE e.body END AS body,
           CASE WHEN e.fresh THEN NULL ELSE e.date_added END AS date_added,
           CASE WHEN e.fresh THEN NULL ELSE e.is_anonymous END AS is_anonymous,
           CASE WHEN e.fresh THEN NULL ELSE e.is_read END AS is_read"""
_STATE = """state AS MATERIALIZED (
        SELECT COALESCE(MAX(n), 0) AS n, COALESCE(MAX(version), 0) AS version,
               substr(md5(:display), 1, 16) AS tag
        FROM commentsvc_list_count WHERE list_key = :list_key
    )"""
_HIGHEST = """n - ((CASE WHEN :page > 0 THEN :page
                      ELSE {greatest}(1, (n + :size - 1) / :size) END) - 1) * :size"""

_PAGE_READ_POSTGRESQL = f"""
    WITH {_STATE},
    bounds AS MATERIALIZED (
        SELECT n, version, tag, {_HIGHEST.format(greatest="GREATEST")} AS hi FROM state
    ),
    page AS MATERIALIZED (
        SELECT x.* FROM bounds AS b CROSS JOIN LATERAL (
            SELECT {_ENTRY_COLUMNS}, c.{{pos}} AS pos
            FROM commentsvc_comment AS c
            WHERE {{filter}} c.{{pos}} BETWEEN b.hi - :size + 1 AND b.hi
            ORDER BY c.{{pos}} DESC
            LIMIT :size
        ) AS x
    ),
    entries AS (
        SELECT 1 AS part, p.* FROM page AS p
        UNION ALL
        SELECT 2, r.* FROM page AS p CROSS JOIN LATERAL (
            SELECT {_ENTRY_COLUMNS}, CAST(NULL AS BIGINT) AS pos
            FROM commentsvc_comment AS c
            WHERE c.parent_id = p.id
            ORDER BY c.date_added DESC, c.id DESC
            LIMIT NULLIF(:cap, 0)
        ) AS r
        WHERE p.parent_id IS NULL
    )
    SELECT {_SHOWN_COLUMNS}
    FROM bounds AS b
    LEFT JOIN LATERAL (
        SELECT e.*, u.username, u.avatar,
               {_FRESH.format(tag="b.tag")} AS fresh
        FROM entries AS e
        CROSS JOIN LATERAL (
            SELECT username, avatar FROM commentsvc_user WHERE id = e.author_id OFFSET 0
        ) AS u
    ) AS e ON TRUE
    ORDER BY e.part, e.pos DESC, e.date_added DESC, e.id DESC
"""

_PAGE_READ_SQLITE = f"""
    WITH {_STATE},
    bounds AS MATERIALIZED (
        SELECT n, version, tag, {_HIGHEST.format(greatest="MAX")} AS hi FROM state
    ),
    page AS MATERIALIZED (
        SELECT {_ENTRY_COLUMNS}, c.{{pos}} AS pos
        FROM commentsvc_comment AS c
        WHERE {{filter}} c.{{pos}} BETWEEN (SELECT hi FROM bounds) - :size + 1
                                      AND (SELECT hi FROM bounds)
        ORDER BY c.{{pos}} DESC
        LIMIT :size
    ),
    replies AS (
        SELECT * FROM (
            SELECT {_ENTRY_COLUMNS}, NULL AS pos,
                   ROW_NUMBER() OVER (PARTITION BY c.parent_id
                                      ORDER BY c.date_added DESC, c.id DESC) AS rank
            FROM commentsvc_comment AS c
            WHERE c.parent_id IN (SELECT id FROM page WHERE parent_id IS NULL)
        ) WHERE :cap = 0 OR rank <= :cap
    ),
    entries AS (
        SELECT 1 AS part, p.* FROM page AS p
        UNION ALL
        SELECT 2, id, parent_id, author_id, body, date_added, is_deleted, is_anonymous,
               is_read, shown, shown_key, pos
        FROM replies
    )
    SELECT {_SHOWN_COLUMNS}
    FROM bounds AS b
    LEFT JOIN (
        SELECT e.*, u.username, u.avatar,
               {_FRESH.format(tag="(SELECT tag FROM bounds)")} AS fresh
        FROM entries AS e JOIN commentsvc_user AS u ON u.id = e.author_id
    ) AS e ON 1 = 1
    ORDER BY e.part, e.pos DESC, e.date_added DESC, e.id DESC
"""


def page_read(list_kind: str, dialect: str) -> str:
    """The one-statement page read of a kind of list ("site", "kind" or "target"), with
    :name parameters (PAGE_READ_PARAMETERS)."""
    pos, where = _PAGE_FILTERS[list_kind]
    template = _PAGE_READ_POSTGRESQL if dialect == "postgresql" else _PAGE_READ_SQLITE
    return template.format(pos=pos, filter=where)


# The page reads as server-side prepared statements of one kept connection (PostgreSQL;
# storage.counters), by list kind, and their executions.
PAGE_READ_PREPARED = {kind: f"commentsvc_{kind}_page" for kind in PAGE_READ_PARAMETERS}
_PARAMETER_TYPES = {"list_key": "text", "page": "bigint", "size": "bigint", "cap": "bigint",
                    "display": "text", "content_type": "text", "object_id": "bigint"}


def _numbered(sql: str, names: tuple[str, ...]) -> str:
    for number, name in enumerate(names, start=1):
        sql = re.sub(rf":{name}\b", f"${number}", sql)
    return sql


# Their plans are fixed once: every join in them is a per-row index lookup whatever the
# values, so planning again at each execution (which PostgreSQL would otherwise keep doing
# when its estimate of a range of positions makes the generic plan look dearer) only adds
# a third of a millisecond to every page.
PREPARE_PAGE_READS = "SET plan_cache_mode = force_generic_plan;" + ";".join(
    f"PREPARE {PAGE_READ_PREPARED[kind]} "
    f"({', '.join(_PARAMETER_TYPES[name] for name in names)}) AS "
    f"{_numbered(page_read(kind, 'postgresql'), names)}"
    for kind, names in PAGE_READ_PARAMETERS.items())
EXECUTE_PAGE_READ = {
    kind: f"EXECUTE {PAGE_READ_PREPARED[kind]} ({', '.join(['%s'] * len(names))})"
    for kind, names in PAGE_READ_PARAMETERS.items()}
