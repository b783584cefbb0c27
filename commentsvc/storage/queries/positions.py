"""SQL that keeps every comment's list positions and every list's count exact.

Position 1 is the oldest comment of a list by (date_added, id); the newest holds the
list's count. After a bulk load the window functions below renumber in one statement.
"""

from __future__ import annotations

from sqlalchemy import DateTime, bindparam, text

# Renumber the three positions of every comment whose place changed (full scan, bulk only).
RENUMBER_ALL = text("""
    UPDATE commentsvc_comment
    SET site_pos = ranked.site_pos,
        kind_pos = ranked.kind_pos,
        target_pos = ranked.target_pos
    FROM (
        SELECT id,
               ROW_NUMBER() OVER (ORDER BY date_added, id) AS site_pos,
               ROW_NUMBER() OVER (PARTITION BY content_type
                                  ORDER BY date_added, id) AS kind_pos,
               ROW_NUMBER() OVER (PARTITION BY content_type, object_id
                                  ORDER BY date_added, id) AS target_pos
        FROM commentsvc_comment
    ) AS ranked
    WHERE commentsvc_comment.id = ranked.id
      AND (commentsvc_comment.site_pos <> ranked.site_pos
           OR commentsvc_comment.kind_pos <> ranked.kind_pos
           OR commentsvc_comment.target_pos <> ranked.target_pos)
""")

# Count every non-empty list, bumping the version of each list whose size changed; keys as
# built by rules.comment_lists.list_key (full scan, bulk only). A list new to the table
# starts at :first_version (store.first_version). "WHERE TRUE" lets SQLite parse the
# upsert after a SELECT.
RECOUNT_ALL = text("""
    INSERT INTO commentsvc_list_count (list_key, n, version)
    SELECT list_key, n, :first_version FROM (
        SELECT 'site' AS list_key, COUNT(*) AS n FROM commentsvc_comment HAVING COUNT(*) > 0
        UNION ALL
        SELECT 'kind:' || content_type, COUNT(*)
        FROM commentsvc_comment GROUP BY content_type
        UNION ALL
        SELECT 'target:' || content_type || ':' || CAST(object_id AS VARCHAR(30)), COUNT(*)
        FROM commentsvc_comment GROUP BY content_type, object_id
    ) AS counted
    WHERE TRUE
    ON CONFLICT (list_key) DO UPDATE
    SET n = excluded.n, version = commentsvc_list_count.version + 1
    WHERE commentsvc_list_count.n <> excluded.n
""")

# One more comment in a list: its size and version go up (primary key of the counter).
COUNT_ONE_MORE = text("""
    INSERT INTO commentsvc_list_count (list_key, n, version)
    VALUES (:list_key, 1, :first_version)
    ON CONFLICT (list_key) DO UPDATE
    SET n = commentsvc_list_count.n + 1, version = commentsvc_list_count.version + 1
""")

# The highest comment id (primary key index: reads one entry); a new comment gets the next.
HIGHEST_ID = text("""
    SELECT COALESCE(MAX(id), 0) FROM commentsvc_comment
""")

# The highest free id below the highest one, once that is the largest id there is (an
# import may hold it): the primary key read downwards to its first gap.
HIGHEST_FREE_ID = text("""
    SELECT c.id - 1 FROM commentsvc_comment AS c
    WHERE c.id > 1
      AND NOT EXISTS (SELECT 1 FROM commentsvc_comment AS d WHERE d.id = c.id - 1)
    ORDER BY c.id DESC
    LIMIT 1
""")

# The thread root of a comment: itself, or its parent (primary key).
THREAD_ROOT = text("""
    SELECT COALESCE(parent_id, id) FROM commentsvc_comment WHERE id = :id
""")

# The sort key of the comment at one position of each list (the list's position index).
SITE_AT = text("""
    SELECT date_added, id FROM commentsvc_comment WHERE site_pos = :pos
""").columns(date_added=DateTime())
KIND_AT = text("""
    SELECT date_added, id FROM commentsvc_comment
    WHERE content_type = :content_type AND kind_pos = :pos
""").columns(date_added=DateTime())
TARGET_AT = text("""
    SELECT date_added, id FROM commentsvc_comment
    WHERE content_type = :content_type AND object_id = :object_id AND target_pos = :pos
""").columns(date_added=DateTime())

# The position of the last comment of each list that sorts before (date_added, id) (0:
# none), for a comment dated before the newest one (a slow clock, a comment dated ahead
# of it): the list's position index read downwards from its newest, so it reads only the
# comments that sort after the key and the one before them (a full count of what sorts
# before would read the whole list for every such post).
SITE_BEFORE = text("""
    SELECT COALESCE(MAX(site_pos), 0) FROM (
        SELECT site_pos FROM commentsvc_comment
        WHERE date_added < :date_added OR (date_added = :date_added AND id < :id)
        ORDER BY site_pos DESC LIMIT 1
    ) AS last_before
""").bindparams(bindparam("date_added", type_=DateTime()))
KIND_BEFORE = text("""
    SELECT COALESCE(MAX(kind_pos), 0) FROM (
        SELECT kind_pos FROM commentsvc_comment
        WHERE content_type = :content_type
          AND (date_added < :date_added OR (date_added = :date_added AND id < :id))
        ORDER BY kind_pos DESC LIMIT 1
    ) AS last_before
""").bindparams(bindparam("date_added", type_=DateTime()))
TARGET_BEFORE = text("""
    SELECT COALESCE(MAX(target_pos), 0) FROM (
        SELECT target_pos FROM commentsvc_comment
        WHERE content_type = :content_type AND object_id = :object_id
          AND (date_added < :date_added OR (date_added = :date_added AND id < :id))
        ORDER BY target_pos DESC LIMIT 1
    ) AS last_before
""").bindparams(bindparam("date_added", type_=DateTime()))

# Make room at a position of each list for a back-dated comment (the list's position index).
SITE_SHIFT = text("""
    UPDATE commentsvc_comment SET site_pos = site_pos + 1 WHERE site_pos >= :pos
""")
KIND_SHIFT = text("""
    UPDATE commentsvc_comment SET kind_pos = kind_pos + 1
    WHERE content_type = :content_type AND kind_pos >= :pos
""")
TARGET_SHIFT = text("""
    UPDATE commentsvc_comment SET target_pos = target_pos + 1
    WHERE content_type = :content_type AND object_id = :object_id AND target_pos >= :pos
""")

# A new comment at its positions.
INSERT_COMMENT = text("""
    INSERT INTO commentsvc_comment
        (id, content_type, object_id, parent_id, author_id, body, date_added,
         is_deleted, is_anonymous, is_read, site_pos, kind_pos, target_pos)
    VALUES
        (:id, :content_type, :object_id, :parent_id, :author_id, :body, :date_added,
         :is_deleted, :is_anonymous, :is_read, :site_pos, :kind_pos, :target_pos)
""").bindparams(bindparam("date_added", type_=DateTime()))
