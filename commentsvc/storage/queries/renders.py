"""SQL that keeps each comment's stored render (rules.rendered) up to date."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Boolean, DateTime, bindparam, text
from sqlalchemy.types import TypeEngine

from commentsvc.rules.identifiers import INT64_MAX

_ROW_TYPES: dict[str, TypeEngine[Any]] = {
    "date_added": DateTime(), "is_deleted": Boolean(), "is_anonymous": Boolean(),
    "is_read": Boolean(),
}
_COLUMNS = """c.id, c.parent_id, c.author_id, u.username, u.avatar, c.body, c.date_added,
           c.is_deleted, c.is_anonymous, c.is_read"""
# The key a render of its author's row ``u`` would be stored under now (rules.rendered
# .render_key), {tag} being the display settings' tag; and the key of the earlier form,
# an MD5 (rules.rendered.legacy_render_key). The name's length: in bytes, and in
# characters for the earlier form (octet_length and char_length: storage.engine gives
# SQLite both, whose own length() stops at a NUL). The page read checks both
# (queries.listing), rerender only the first unless :legacy.
RENDER_KEY = "{tag} || octet_length(u.username) || ':' || u.username || COALESCE(u.avatar, '')"
LEGACY_RENDER_KEY = """md5(:display || char_length(u.username) || ':' || u.username
                           || COALESCE(u.avatar, ''))"""

# Whether a comment's stored render is missing or was made from other display settings,
# or another name or avatar of its author (the page read's check: queries.listing). A key
# of the earlier form (an MD5) counts as current only given :legacy (a database whose
# shown_key column cannot hold the new form yet); otherwise it is made again in the new
# form, which pages check without computing a hash.
_STALE = f"""(c.shown_key IS NULL
             OR NOT (c.shown_key = {RENDER_KEY.format(tag=":tag")}
                     OR (:legacy AND c.shown_key = {LEGACY_RENDER_KEY})))"""

# The stored render and the target of each comment (primary key): which lists a new
# render changes.
STORED_RENDERS = text("""
    SELECT id, shown, content_type, object_id FROM commentsvc_comment WHERE id IN :ids
""").bindparams(bindparam("ids", expanding=True))

# The id :span comments after :after in id order, where the next window of a walk of the
# primary key ends; none when fewer are left (a scan of :span index entries).
WINDOW_END = text("""
    SELECT id FROM commentsvc_comment WHERE id > :after ORDER BY id LIMIT 1 OFFSET :span
""")

# The next comments after :after, up to :end (NULL: the last), in id order, whose render
# is missing or out of date (a walk of the primary key, a batch at a time, never more
# than a window's rows read by one statement, however few of them are stale). The end is
# a plain bound of the primary key's range, the largest id for the last window: SQLite
# would not bound its scan by an OR of a NULL test.
STALE_AFTER = text(f"""
    SELECT {_COLUMNS}
    FROM commentsvc_comment AS c JOIN commentsvc_user AS u ON u.id = c.author_id
    WHERE c.id > :after AND c.id <= COALESCE(CAST(:end AS BIGINT), {INT64_MAX}) AND {_STALE}
    ORDER BY c.id
    LIMIT :batch
""").bindparams(bindparam("legacy", type_=Boolean())).columns(**_ROW_TYPES)

# The same, only comments without a render at all (after an import).
MISSING_AFTER = text(f"""
    SELECT {_COLUMNS}
    FROM commentsvc_comment AS c JOIN commentsvc_user AS u ON u.id = c.author_id
    WHERE c.id > :after AND c.shown_key IS NULL
    ORDER BY c.id
    LIMIT :batch
""").columns(**_ROW_TYPES)

# Every comment of one author (a scan: author_id has no index; renames and erasure are
# rare).
BY_AUTHOR = text(f"""
    SELECT {_COLUMNS}
    FROM commentsvc_comment AS c JOIN commentsvc_user AS u ON u.id = c.author_id
    WHERE c.author_id = :author_id
""").columns(**_ROW_TYPES)

# Fresh statistics for the comment table, so that right after a bulk load (no statistics
# yet) the batches above walk the primary key instead of scanning the table each time
# (PostgreSQL; a sample of the table).
ANALYZE_COMMENTS = text("ANALYZE commentsvc_comment")

# After rerender has committed (PostgreSQL; storage.upkeep): the comment table vacuumed and
# analysed. Each render stored is a new version of its comment's row, the old one left dead
# and the new one without hint bits, which its first reader would set, dirtying the page.
# Not in a transaction: no VACUUM can be.
VACUUM_RENDERED = "VACUUM (ANALYZE) commentsvc_comment"

# Store one comment's render (primary key; SQLite runs it for many at once).
SAVE = text("""
    UPDATE commentsvc_comment SET shown = :shown, shown_key = :shown_key WHERE id = :id
""")

# Store the renders of many comments in one statement (PostgreSQL; primary key).
SAVE_MANY = text("""
    UPDATE commentsvc_comment AS c SET shown = v.shown, shown_key = v.shown_key
    FROM unnest(CAST(:ids AS BIGINT[]), CAST(:shown AS TEXT[]), CAST(:keys AS TEXT[]))
         AS v (id, shown, shown_key)
    WHERE c.id = v.id
""")
