"""SQL of signing in: keys (stored as digests), staff, and users first seen through a host."""

from __future__ import annotations

from sqlalchemy import Boolean, text

from commentsvc.storage.queries.prepared import Prepared

# The user a key digest signs in, with the name the browsable page shows (primary keys).
VIEWER_BY_DIGEST = text("""
    SELECT u.id, u.is_staff, u.username, u.avatar FROM commentsvc_token AS t
    JOIN commentsvc_user AS u ON u.id = t.user_id
    WHERE t.digest = :digest
""").columns(is_staff=Boolean())

# VIEWER_BY_DIGEST as PostgreSQL runs it for every signed-in request: prepared once per
# connection (storage.prepared).
VIEWER_PREPARED = Prepared("commentsvc_viewer", VIEWER_BY_DIGEST.element.text,
                           {"digest": "text"})

# Whether a user exists: one row or none (primary key). Also erasure's check.
USER_EXISTS = text("""
    SELECT 1 FROM commentsvc_user WHERE id = :id
""")

ADD_TOKEN = text("""
    INSERT INTO commentsvc_token (digest, user_id, created) VALUES (:digest, :user_id, :created)
""")

REVOKE_TOKEN = text("DELETE FROM commentsvc_token WHERE digest = :digest")

SET_STAFF = text("UPDATE commentsvc_user SET is_staff = :on WHERE id = :id")

# A host's user the service has not seen: added once, an existing row is never changed.
ADD_USER_IF_MISSING = text("""
    INSERT INTO commentsvc_user (id, username, avatar) VALUES (:id, :username, :avatar)
    ON CONFLICT (id) DO NOTHING
""")
