"""SQL of idempotency keys: the first answer of a keyed write, kept for its retries."""

from __future__ import annotations

from sqlalchemy import DateTime, bindparam, text

# The stored answer of one user's key (primary key).
FIND_KEY = text("""
    SELECT method, target, request_digest, comment_id, status, body, location, created
    FROM commentsvc_idempotency_key WHERE user_id = :user_id AND idem_key = :idem_key
""").columns(created=DateTime())

# Written in the same transaction as the write it answers: it exists iff that committed.
ADD_KEY = text("""
    INSERT INTO commentsvc_idempotency_key
        (user_id, idem_key, method, target, request_digest, comment_id, status, body,
         location, created)
    VALUES (:user_id, :idem_key, :method, :target, :request_digest, :comment_id, :status,
            :body, :location, :created)
""").bindparams(bindparam("created", type_=DateTime()))

# A key found past its retention, dropped so that it can be used again (primary key).
DROP_KEY = text("""
    DELETE FROM commentsvc_idempotency_key WHERE user_id = :user_id AND idem_key = :idem_key
""")

# At most :batch keys older than :cutoff, oldest first (index on created).
PURGE_BATCH = text("""
    DELETE FROM commentsvc_idempotency_key WHERE (user_id, idem_key) IN (
        SELECT user_id, idem_key FROM commentsvc_idempotency_key
        WHERE created < :cutoff ORDER BY created LIMIT :batch)
""").bindparams(bindparam("cutoff", type_=DateTime()))

# Stored answers that may hold these comments' text: those of the comments themselves and
# of their threads' roots (a root's answer carries its replies). Primary-key lookups of
# the comments, then the answers by comment id (index on comment_id).
ANSWERS_HOLDING = text("""
    SELECT user_id, idem_key, method, body FROM commentsvc_idempotency_key
    WHERE comment_id IN :ids OR comment_id IN (
        SELECT parent_id FROM commentsvc_comment WHERE id IN :ids AND parent_id IS NOT NULL)
""").bindparams(bindparam("ids", expanding=True))

# One stored answer rewritten (primary key).
REWRITE_ANSWER = text("""
    UPDATE commentsvc_idempotency_key SET body = :body
    WHERE user_id = :user_id AND idem_key = :idem_key
""")

# For erasure: the user's own keys, and the answers others were given that show one of the
# user's comments, or a thread root carrying one as a reply (the comments by a scan:
# author_id has no index and erasure is rare; the keys by their comment_id index).
DROP_KEYS_SHOWING_USER = text("""
    DELETE FROM commentsvc_idempotency_key
    WHERE user_id = :user_id
       OR comment_id IN (SELECT id FROM commentsvc_comment WHERE author_id = :user_id)
       OR comment_id IN (SELECT parent_id FROM commentsvc_comment
                         WHERE author_id = :user_id AND parent_id IS NOT NULL)
""")
