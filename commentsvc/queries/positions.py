"""SQL that keeps every comment's list positions and every list's count exact.

Position 1 is the oldest comment of a list by (date_added, id); the newest holds the
list's count. After a bulk load the window functions below renumber in one statement.
"""

from __future__ import annotations

from sqlalchemy import text

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

# Forget every list count before RECOUNT_ALL writes them again.
CLEAR_COUNTS = text("""
    DELETE FROM commentsvc_list_count
""")

# Count every non-empty list; keys as built by commentsvc.lists.list_key (full scan, bulk only).
RECOUNT_ALL = text("""
    INSERT INTO commentsvc_list_count (list_key, n)
    SELECT 'site', COUNT(*) FROM commentsvc_comment HAVING COUNT(*) > 0
    UNION ALL
    SELECT 'kind:' || content_type, COUNT(*)
    FROM commentsvc_comment GROUP BY content_type
    UNION ALL
    SELECT 'target:' || content_type || ':' || CAST(object_id AS VARCHAR(30)), COUNT(*)
    FROM commentsvc_comment GROUP BY content_type, object_id
""")
