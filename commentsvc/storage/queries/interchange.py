"""SQL that loads and dumps NDJSON interchange files and seeds demo data.

An import stages each record with its line number in a TEMPORARY table, checks the
cross-references with the queries below, then merges with INSERT ... SELECT, so nothing
in memory grows with the file. Every check returns the first offending line only.
Nullable columns are compared as ``(a IS NULL) <> (b IS NULL) OR a <> b`` because
``IS DISTINCT FROM`` needs SQLite 3.39 and hosts may have an older one.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Boolean, DateTime, TextClause, text
from sqlalchemy.types import TypeEngine

# Staging tables and the columns bulk.insert_rows fills (code constants, never input).
USER_STAGE = "commentsvc_import_user"
USER_STAGE_COLUMNS = ("line", "id", "username", "avatar")
PAGE_STAGE = "commentsvc_import_comicpage"
PAGE_STAGE_COLUMNS = ("line", "id", "title")
COMMENT_STAGE = "commentsvc_import_comment"
COMMENT_STAGE_COLUMNS = ("line", "id", "content_type", "object_id", "parent_id", "author_id",
                         "body", "date_added", "is_deleted", "is_anonymous", "is_read",
                         "thread_id", "kind")

# The real tables and columns demo.seed streams into.
USER_TABLE = "commentsvc_user"
USER_COLUMNS = ("id", "username", "avatar")
PAGE_TABLE = "commentsvc_comicpage"
PAGE_COLUMNS = ("id", "title")
COMMENT_TABLE = "commentsvc_comment"
COMMENT_COLUMNS = ("id", "content_type", "object_id", "parent_id", "author_id", "body",
                   "date_added", "is_deleted", "is_anonymous", "is_read",
                   "site_pos", "kind_pos", "target_pos")
# A comment's stored render and its key (rules.rendered), when rows come with them.
RENDER_COLUMNS = ("shown", "shown_key")

# Rows in COPY's text format streamed into one table's columns (PostgreSQL), the names
# filled in as quoted identifiers by interchange.copy_rows. Returns nothing; every index
# of the table takes each row's entry as it arrives.
COPY_FROM_STDIN = """
    COPY {} ({}) FROM STDIN
"""

_COMMENT_TYPES: dict[str, TypeEngine[Any]] = {
    "date_added": DateTime(),
    "is_deleted": Boolean(),
    "is_anonymous": Boolean(),
    "is_read": Boolean(),
}

# Forget staging tables a failed import left on a pooled SQLite connection (no index).
DROP_STAGING = (
    text("""
        DROP TABLE IF EXISTS commentsvc_import_user
    """),
    text("""
        DROP TABLE IF EXISTS commentsvc_import_comicpage
    """),
    text("""
        DROP TABLE IF EXISTS commentsvc_import_comment
    """),
)

# Per-session staging tables, one row per record with its line (no index while loading).
CREATE_STAGING = (
    text("""
        CREATE TEMPORARY TABLE commentsvc_import_user (
            line      BIGINT NOT NULL,
            id        BIGINT NOT NULL,
            username  TEXT NOT NULL,
            avatar    TEXT
        )
    """),
    text("""
        CREATE TEMPORARY TABLE commentsvc_import_comicpage (
            line   BIGINT NOT NULL,
            id     BIGINT NOT NULL,
            title  TEXT NOT NULL
        )
    """),
    text("""
        CREATE TEMPORARY TABLE commentsvc_import_comment (
            line          BIGINT NOT NULL,
            id            BIGINT NOT NULL,
            content_type  VARCHAR(100) NOT NULL,
            object_id     BIGINT NOT NULL,
            parent_id     BIGINT,
            author_id     BIGINT NOT NULL,
            body          TEXT NOT NULL,
            date_added    TIMESTAMP NOT NULL,
            is_deleted    BOOLEAN NOT NULL,
            is_anonymous  BOOLEAN NOT NULL,
            is_read       BOOLEAN NOT NULL,
            thread_id     BIGINT,
            kind          SMALLINT NOT NULL
        )
    """),
)

# Indexes built once the staging tables are full (cheaper than during the load). The id
# indexes are first tried as unique ones: when that works the file repeats no id and the
# duplicate checks are skipped; otherwise they are built plain and the checks run.
def _staging_id_indexes(kind: str) -> tuple[TextClause, ...]:
    return tuple(text(f"CREATE {kind} commentsvc_import_{table}_id "
                      f"ON commentsvc_import_{table} (id)")
                 for table in ("user", "comicpage", "comment"))


UNIQUE_STAGING_IDS = _staging_id_indexes("UNIQUE INDEX")
STAGING_IDS = _staging_id_indexes("INDEX")

# The parent index, and fresh statistics: PostgreSQL's autovacuum never analyzes
# temporary tables.
INDEX_STAGING = (
    text("""
        CREATE INDEX commentsvc_import_comment_parent
            ON commentsvc_import_comment (parent_id)
    """),
    text("""
        ANALYZE commentsvc_import_user
    """),
    text("""
        ANALYZE commentsvc_import_comicpage
    """),
    text("""
        ANALYZE commentsvc_import_comment
    """),
)

# The first user given twice in the file with different content: (line, id, first line)
# (index commentsvc_import_user_id).
USER_DUPLICATE_CONFLICT = text("""
    SELECT later.line, later.id, earlier.line
    FROM commentsvc_import_user AS later
    JOIN commentsvc_import_user AS earlier
      ON earlier.id = later.id AND earlier.line < later.line
    WHERE earlier.username <> later.username
       OR (earlier.avatar IS NULL) <> (later.avatar IS NULL)
       OR earlier.avatar <> later.avatar
    ORDER BY later.line, earlier.line
    LIMIT 1
""")

# The first comic page given twice with different content: (line, id, first line)
# (index commentsvc_import_comicpage_id).
PAGE_DUPLICATE_CONFLICT = text("""
    SELECT later.line, later.id, earlier.line
    FROM commentsvc_import_comicpage AS later
    JOIN commentsvc_import_comicpage AS earlier
      ON earlier.id = later.id AND earlier.line < later.line
    WHERE earlier.title <> later.title
    ORDER BY later.line, earlier.line
    LIMIT 1
""")

# The first comment given twice with different content: (line, id, first line)
# (index commentsvc_import_comment_id).
COMMENT_DUPLICATE_CONFLICT = text("""
    SELECT later.line, later.id, earlier.line
    FROM commentsvc_import_comment AS later
    JOIN commentsvc_import_comment AS earlier
      ON earlier.id = later.id AND earlier.line < later.line
    WHERE earlier.content_type <> later.content_type
       OR earlier.object_id <> later.object_id
       OR (earlier.parent_id IS NULL) <> (later.parent_id IS NULL)
       OR earlier.parent_id <> later.parent_id
       OR earlier.author_id <> later.author_id
       OR earlier.body <> later.body
       OR earlier.date_added <> later.date_added
       OR earlier.is_deleted <> later.is_deleted
       OR earlier.is_anonymous <> later.is_anonymous
       OR earlier.is_read <> later.is_read
    ORDER BY later.line, earlier.line
    LIMIT 1
""")

# Keep only the first of identical duplicates, so every staged id is unique afterwards
# (indexes commentsvc_import_*_id).
DROP_DUPLICATES = (
    text("""
        DELETE FROM commentsvc_import_user
        WHERE EXISTS (SELECT 1 FROM commentsvc_import_user AS earlier
                      WHERE earlier.id = commentsvc_import_user.id
                        AND earlier.line < commentsvc_import_user.line)
    """),
    text("""
        DELETE FROM commentsvc_import_comicpage
        WHERE EXISTS (SELECT 1 FROM commentsvc_import_comicpage AS earlier
                      WHERE earlier.id = commentsvc_import_comicpage.id
                        AND earlier.line < commentsvc_import_comicpage.line)
    """),
    text("""
        DELETE FROM commentsvc_import_comment
        WHERE EXISTS (SELECT 1 FROM commentsvc_import_comment AS earlier
                      WHERE earlier.id = commentsvc_import_comment.id
                        AND earlier.line < commentsvc_import_comment.line)
    """),
)

# The first comment whose author is a user nowhere: (line, id, author_id)
# (index commentsvc_import_user_id and commentsvc_user's primary key).
MISSING_AUTHOR = text("""
    SELECT c.line, c.id, c.author_id
    FROM commentsvc_import_comment AS c
    WHERE NOT EXISTS (SELECT 1 FROM commentsvc_import_user AS u WHERE u.id = c.author_id)
      AND NOT EXISTS (SELECT 1 FROM commentsvc_user AS u WHERE u.id = c.author_id)
    ORDER BY c.line
    LIMIT 1
""")

# The first comment on a user or comic page that exists nowhere:
# (line, id, content_type, object_id) (staging id indexes and the tables' primary keys).
MISSING_TARGET = text("""
    SELECT c.line, c.id, c.content_type, c.object_id
    FROM commentsvc_import_comment AS c
    WHERE (c.content_type = :user_type
           AND NOT EXISTS (SELECT 1 FROM commentsvc_import_user AS u
                           WHERE u.id = c.object_id)
           AND NOT EXISTS (SELECT 1 FROM commentsvc_user AS u WHERE u.id = c.object_id))
       OR (c.content_type = :page_type
           AND NOT EXISTS (SELECT 1 FROM commentsvc_import_comicpage AS p
                           WHERE p.id = c.object_id)
           AND NOT EXISTS (SELECT 1 FROM commentsvc_comicpage AS p
                           WHERE p.id = c.object_id))
    ORDER BY c.line
    LIMIT 1
""")

# The first reply whose parent exists nowhere: (line, id, parent_id)
# (index commentsvc_import_comment_id and commentsvc_comment's primary key).
MISSING_PARENT = text("""
    SELECT c.line, c.id, c.parent_id
    FROM commentsvc_import_comment AS c
    WHERE c.parent_id IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM commentsvc_import_comment AS p WHERE p.id = c.parent_id)
      AND NOT EXISTS (SELECT 1 FROM commentsvc_comment AS p WHERE p.id = c.parent_id)
    ORDER BY c.line
    LIMIT 1
""")

# The first reply whose parent (from the file, else the database) is on another target:
# (line, id, parent_id, parent's content_type, parent's object_id) (same indexes).
PARENT_ON_OTHER_TARGET = text("""
    SELECT c.line, c.id, c.parent_id,
           COALESCE(p.content_type, d.content_type), COALESCE(p.object_id, d.object_id)
    FROM commentsvc_import_comment AS c
    LEFT JOIN commentsvc_import_comment AS p ON p.id = c.parent_id
    LEFT JOIN commentsvc_comment AS d ON d.id = c.parent_id
    WHERE c.parent_id IS NOT NULL
      AND (p.id IS NOT NULL OR d.id IS NOT NULL)
      AND (COALESCE(p.content_type, d.content_type) <> c.content_type
           OR COALESCE(p.object_id, d.object_id) <> c.object_id)
    ORDER BY c.line
    LIMIT 1
""")

# Every comment is staged with a first guess at its thread's root: itself for a root, its
# parent for a reply. The guess is right for nearly every line (replies answer roots); the
# three statements below correct the rest, touching only those rows.
#
# 1. A reply whose staged parent is itself a reply sits deeper than one level: its thread
#    is not known yet (NULL) (index commentsvc_import_comment_id).
FORGET_DEEP_THREADS = text("""
    UPDATE commentsvc_import_comment
    SET thread_id = NULL
    WHERE parent_id IS NOT NULL
      AND EXISTS (SELECT 1 FROM commentsvc_import_comment AS p
                  WHERE p.id = commentsvc_import_comment.parent_id
                    AND p.parent_id IS NOT NULL)
""")

# 2. A reply to a stored reply (not in the file) joins that reply's root: stored comments
#    are one level deep already (commentsvc_comment pkey, staging id index).
STORED_PARENT_THREADS = text("""
    UPDATE commentsvc_import_comment
    SET thread_id = (SELECT d.parent_id FROM commentsvc_comment AS d
                     WHERE d.id = commentsvc_import_comment.parent_id)
    WHERE parent_id IS NOT NULL
      AND EXISTS (SELECT 1 FROM commentsvc_comment AS d
                  WHERE d.id = commentsvc_import_comment.parent_id
                    AND d.parent_id IS NOT NULL)
      AND NOT EXISTS (SELECT 1 FROM commentsvc_import_comment AS p
                      WHERE p.id = commentsvc_import_comment.parent_id)
""")

# 3. The deeper replies take their thread from their parent, walking down from the ones
#    whose parent's thread is known. A comment in or below a parent cycle is never reached
#    and keeps NULL (indexes commentsvc_import_comment_parent and _id).
RESOLVE_DEEP_THREADS = text("""
    WITH RECURSIVE tree (id, thread_id) AS (
        SELECT s.id, p.thread_id
        FROM commentsvc_import_comment AS s
        JOIN commentsvc_import_comment AS p ON p.id = s.parent_id
        WHERE s.thread_id IS NULL AND p.thread_id IS NOT NULL
        UNION ALL
        SELECT s.id, t.thread_id
        FROM commentsvc_import_comment AS s
        JOIN tree AS t ON s.parent_id = t.id
    )
    UPDATE commentsvc_import_comment
    SET thread_id = tree.thread_id
    FROM tree
    WHERE tree.id = commentsvc_import_comment.id
""")

RESOLVE_THREADS = (FORGET_DEEP_THREADS, STORED_PARENT_THREADS, RESOLVE_DEEP_THREADS)

# The first comment whose parent chain never reaches a root: (line, id, parent_id)
# (full scan of the staging table, only once).
UNRESOLVED_THREAD = text("""
    SELECT line, id, parent_id
    FROM commentsvc_import_comment
    WHERE thread_id IS NULL
    ORDER BY line
    LIMIT 1
""")

# The first staged user that exists with other content: (line, id) (commentsvc_user pkey).
CHANGED_USER = text("""
    SELECT s.line, s.id
    FROM commentsvc_import_user AS s
    JOIN commentsvc_user AS u ON u.id = s.id
    WHERE u.username <> s.username
       OR (u.avatar IS NULL) <> (s.avatar IS NULL)
       OR u.avatar <> s.avatar
    ORDER BY s.line
    LIMIT 1
""")

# The first staged comic page that exists with other content: (line, id)
# (commentsvc_comicpage pkey).
CHANGED_PAGE = text("""
    SELECT s.line, s.id
    FROM commentsvc_import_comicpage AS s
    JOIN commentsvc_comicpage AS p ON p.id = s.id
    WHERE p.title <> s.title
    ORDER BY s.line
    LIMIT 1
""")

# The first staged comment that exists with other content, its parent taken as stored
# (the thread's root): (line, id) (commentsvc_comment pkey).
CHANGED_COMMENT = text("""
    SELECT s.line, s.id
    FROM commentsvc_import_comment AS s
    JOIN commentsvc_comment AS c ON c.id = s.id
    WHERE c.content_type <> s.content_type
       OR c.object_id <> s.object_id
       OR (c.parent_id IS NULL) <> (s.thread_id = s.id)
       OR c.parent_id <> s.thread_id
       OR c.author_id <> s.author_id
       OR c.body <> s.body
       OR c.date_added <> s.date_added
       OR c.is_deleted <> s.is_deleted
       OR c.is_anonymous <> s.is_anonymous
       OR c.is_read <> s.is_read
    ORDER BY s.line
    LIMIT 1
""")

# How many distinct users, comic pages and comments the file holds (after deduplication).
COUNT_STAGED = text("""
    SELECT (SELECT COUNT(*) FROM commentsvc_import_user),
           (SELECT COUNT(*) FROM commentsvc_import_comicpage),
           (SELECT COUNT(*) FROM commentsvc_import_comment)
""")

# Add the staged users that are not stored yet (commentsvc_user pkey).
MERGE_USERS = text("""
    INSERT INTO commentsvc_user (id, username, avatar)
    SELECT s.id, s.username, s.avatar
    FROM commentsvc_import_user AS s
    WHERE NOT EXISTS (SELECT 1 FROM commentsvc_user AS u WHERE u.id = s.id)
""")

# Add the staged comic pages that are not stored yet (commentsvc_comicpage pkey).
MERGE_PAGES = text("""
    INSERT INTO commentsvc_comicpage (id, title)
    SELECT s.id, s.title
    FROM commentsvc_import_comicpage AS s
    WHERE NOT EXISTS (SELECT 1 FROM commentsvc_comicpage AS p WHERE p.id = s.id)
""")

# Add the staged root comments not stored yet, before the replies that point at them
# (commentsvc_comment pkey).
MERGE_ROOTS = text("""
    INSERT INTO commentsvc_comment (id, content_type, object_id, parent_id, author_id, body,
                                    date_added, is_deleted, is_anonymous, is_read)
    SELECT s.id, s.content_type, s.object_id, NULL, s.author_id, s.body,
           s.date_added, s.is_deleted, s.is_anonymous, s.is_read
    FROM commentsvc_import_comment AS s
    WHERE s.thread_id = s.id
      AND NOT EXISTS (SELECT 1 FROM commentsvc_comment AS c WHERE c.id = s.id)
""")

# Add the staged replies not stored yet, each under its thread's root
# (commentsvc_comment pkey).
MERGE_REPLIES = text("""
    INSERT INTO commentsvc_comment (id, content_type, object_id, parent_id, author_id, body,
                                    date_added, is_deleted, is_anonymous, is_read)
    SELECT s.id, s.content_type, s.object_id, s.thread_id, s.author_id, s.body,
           s.date_added, s.is_deleted, s.is_anonymous, s.is_read
    FROM commentsvc_import_comment AS s
    WHERE s.thread_id <> s.id
      AND NOT EXISTS (SELECT 1 FROM commentsvc_comment AS c WHERE c.id = s.id)
""")

# Add every staged comment, numbered in its three lists, to an empty comment table: one
# pass with no renumbering after it (a first load; see interchange.empty_table). The
# numbers are computed on narrow rows, and lists are told apart by the staged kind number rather
# than by content_type: sorting ten million rows on a text key, or with their bodies,
# costs several times more.
MERGE_NUMBERED = text("""
    INSERT INTO commentsvc_comment (id, content_type, object_id, parent_id, author_id, body,
                                    date_added, is_deleted, is_anonymous, is_read,
                                    site_pos, kind_pos, target_pos)
    SELECT s.id, s.content_type, s.object_id, NULLIF(s.thread_id, s.id), s.author_id, s.body,
           s.date_added, s.is_deleted, s.is_anonymous, s.is_read,
           n.site_pos, n.kind_pos, n.target_pos
    FROM (
        SELECT id,
               ROW_NUMBER() OVER (ORDER BY date_added, id) AS site_pos,
               ROW_NUMBER() OVER (PARTITION BY kind ORDER BY date_added, id) AS kind_pos,
               ROW_NUMBER() OVER (PARTITION BY kind, object_id
                                  ORDER BY date_added, id) AS target_pos
        FROM commentsvc_import_comment
    ) AS n
    JOIN commentsvc_import_comment AS s ON s.id = n.id
""")

# Every user in id order, for export (commentsvc_user pkey).
DUMP_USERS = text("""
    SELECT id, username, avatar FROM commentsvc_user ORDER BY id
""")

# Every comic page in id order, for export (commentsvc_comicpage pkey).
DUMP_PAGES = text("""
    SELECT id, title FROM commentsvc_comicpage ORDER BY id
""")

# Every comment in id order, for export (commentsvc_comment pkey).
DUMP_COMMENTS = text("""
    SELECT id, content_type, object_id, parent_id, author_id, body, date_added,
           is_deleted, is_anonymous, is_read
    FROM commentsvc_comment
    ORDER BY id
""").columns(**_COMMENT_TYPES)

# One row if any comment exists, for seed --if-empty (commentsvc_comment pkey).
ANY_COMMENT = text("""
    SELECT 1 FROM commentsvc_comment LIMIT 1
""")

# The largest id of each table (0 when empty), where seeded ids start (the primary keys).
MAX_IDS = text("""
    SELECT (SELECT COALESCE(MAX(id), 0) FROM commentsvc_user),
           (SELECT COALESCE(MAX(id), 0) FROM commentsvc_comicpage),
           (SELECT COALESCE(MAX(id), 0) FROM commentsvc_comment)
""")

# Every stored username, so that seeding onto existing users draws no name twice
# (a sequential scan of commentsvc_user, once per seeding).
USERNAMES = text("""
    SELECT username FROM commentsvc_user
""")

# How many records an export will write, for its progress bar (primary key scans).
RECORD_COUNTS = text("""
    SELECT (SELECT COUNT(*) FROM commentsvc_user),
           (SELECT COUNT(*) FROM commentsvc_comicpage),
           (SELECT COUNT(*) FROM commentsvc_comment)
""")
