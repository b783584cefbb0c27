"""SQL of writes that change a comment but not its place (soft delete, marking read).
(A new comment's checks and placing: queries.posting.)"""

from __future__ import annotations

from sqlalchemy import bindparam, text

# The lists a comment belongs to: its target (primary key).
COMMENT_TARGET = text("""
    SELECT content_type, object_id FROM commentsvc_comment WHERE id = :id
""")

# What the permissions and a reply's checks need to know of one comment (primary key).
COMMENT_FACTS = text("""
    SELECT id, content_type, object_id, parent_id, author_id, is_deleted
    FROM commentsvc_comment WHERE id = :id
""")

# Soft-delete a comment, removing its text; no row when it was already deleted (primary
# key).
SOFT_DELETE = text("""
    UPDATE commentsvc_comment SET is_deleted = TRUE, body = ''
    WHERE id = :id AND is_deleted = FALSE
""")

# Set a comment's read flag; no row when it already had that value (primary key).
SET_READ = text("""
    UPDATE commentsvc_comment SET is_read = :is_read WHERE id = :id AND is_read <> :is_read
""")

# A write changed what these lists show: their ETags must change (primary key).
BUMP_VERSIONS = text("""
    UPDATE commentsvc_list_count SET version = version + 1 WHERE list_key IN :list_keys
""").bindparams(bindparam("list_keys", expanding=True))
