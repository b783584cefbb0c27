"""SQL of writes that change a comment but not its place (soft delete, marking read).
(A new comment's checks and placing: queries.posting.)"""

from __future__ import annotations

from sqlalchemy import Boolean, DateTime, bindparam, text

from commentsvc.storage.queries.prepared import Prepared

# The lists a comment belongs to: its target (primary key).
COMMENT_TARGET = text("""
    SELECT content_type, object_id FROM commentsvc_comment WHERE id = :id
""")

# What the permissions need to know of one comment, and what its stored render shows
# (primary keys). PostgreSQL runs it prepared (storage.prepared), under the writers' lock.
_COMMENT_FACTS_BODY = """
    SELECT c.id, c.content_type, c.object_id, c.parent_id, c.author_id, c.is_deleted,
           u.username, u.avatar, c.date_added, c.is_anonymous, c.is_read
    FROM commentsvc_comment AS c JOIN commentsvc_user AS u ON u.id = c.author_id
    WHERE c.id = :id
"""
COMMENT_FACTS = text(_COMMENT_FACTS_BODY).columns(
    date_added=DateTime(), is_deleted=Boolean(), is_anonymous=Boolean(), is_read=Boolean())
COMMENT_FACTS_PREPARED = Prepared("commentsvc_comment_facts", _COMMENT_FACTS_BODY,
                                  {"id": "bigint"})

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
