"""SQL of signing in: keys (stored as digests), staff, and users first seen through a host."""

from __future__ import annotations

from sqlalchemy import Boolean, text

# The user a key digest signs in, with the name the browsable page shows (primary keys).
VIEWER_BY_DIGEST = text("""
    SELECT u.id, u.is_staff, u.username, u.avatar FROM commentsvc_token AS t
    JOIN commentsvc_user AS u ON u.id = t.user_id
    WHERE t.digest = :digest
""").columns(is_staff=Boolean())

# VIEWER_BY_DIGEST as PostgreSQL runs it for every signed-in request: a server-side
# prepared statement of each connection storage.counters keeps, executed with the digest
# as psycopg2's one parameter.
VIEWER_PREPARED = "commentsvc_viewer"
PREPARE_VIEWER = f"""
    PREPARE {VIEWER_PREPARED} (text) AS {VIEWER_BY_DIGEST.element.text.replace(":digest", "$1")}
"""
EXECUTE_VIEWER = f"""
    EXECUTE {VIEWER_PREPARED} (%s)
"""

# The user a browser session (by the digest of its id) signs in: none once the session
# was signed out of (its row deleted) or its key revoked (primary keys).
VIEWER_BY_SESSION = text("""
    SELECT u.id, u.is_staff, u.username, u.avatar FROM commentsvc_browser_session AS s
    JOIN commentsvc_token AS t ON t.digest = s.key_digest
    JOIN commentsvc_user AS u ON u.id = t.user_id
    WHERE s.digest = :digest
""").columns(is_staff=Boolean())

START_SESSION = text("""
    INSERT INTO commentsvc_browser_session (digest, key_digest, created)
    VALUES (:digest, :key_digest, :created)
""")

END_SESSION = text("DELETE FROM commentsvc_browser_session WHERE digest = :digest")

# Sessions older than any cookie may be (its signature is refused by then): by index.
FORGET_OLD_SESSIONS = text("DELETE FROM commentsvc_browser_session WHERE created < :oldest")

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
