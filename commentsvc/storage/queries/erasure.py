"""SQL that removes text people asked to be rid of: a deleted comment's, and everything a
user wrote when they are erased. Rows stay, so no list position moves."""

from __future__ import annotations

from sqlalchemy import text

# Blank the text of deleted comments that still hold some (rows deleted before deletion
# blanked the body). A full scan: init-db and import only.
BLANK_DELETED = text("""
    UPDATE commentsvc_comment SET body = '' WHERE is_deleted = TRUE AND body <> ''
""")

# The user's comments that still show something, with their lists and threads: what
# erasing them changes (one scan of the table: author_id has no index, and erasure is
# rare).
SHOWING_COMMENTS = text("""
    SELECT id, content_type, object_id, parent_id FROM commentsvc_comment
    WHERE author_id = :id AND (is_deleted = FALSE OR body <> '')
    ORDER BY id
""")

# Every comment of the user shown as deleted, with no text left.
ERASE_COMMENTS = text("""
    UPDATE commentsvc_comment SET is_deleted = TRUE, body = ''
    WHERE author_id = :id AND (is_deleted = FALSE OR body <> '')
""")

# A user's name, or no row for no such user (primary key).
USERNAME = text("""
    SELECT username FROM commentsvc_user WHERE id = :id
""")

# Whether another user than :id has the name :username (a scan of the users: no index
# on names, and erasure is rare).
NAME_TAKEN = text("""
    SELECT 1 FROM commentsvc_user WHERE username = :username AND id <> :id LIMIT 1
""")

# The profile: a neutral name of its own, no avatar, no staff rights (primary key).
ANONYMISE_USER = text("""
    UPDATE commentsvc_user SET username = :username, avatar = NULL, is_staff = FALSE
    WHERE id = :id
""")

# The user's sign-in keys (a scan of the small token table).
REVOKE_TOKENS = text("""
    DELETE FROM commentsvc_token WHERE user_id = :id
""")
