"""SQL of deleting one comment on PostgreSQL in two statements (web.deletion, run prepared
by storage.deleting): the comment blanked with its new stored render, its lists' versions
raised and its comment.deleted event numbered, in one; then the texts of it still kept
elsewhere (its comment.created events, the keyed answers that show it) rewritten, in the
other. SQLite runs the same steps one statement each (web.deletion.Deletion)."""

from __future__ import annotations

from commentsvc.storage.queries.prepared import Prepared

# Blank the comment (when not yet deleted) and store its render; if it changed, raise its
# lists' versions and record its comment.deleted event, numbered one above the newest.
# Then the texts to rewrite, a row each: its comment.created events kept ('event': id,
# payload) and the keyed answers showing it or its thread root ('answer': user, key,
# body), with whether it changed (primary keys, the event and key comment indexes).
# Prepared once on a connection, as a batch of posts' statements are (storage.prepared):
# planning it took longer than running it.
DELETE = Prepared("commentsvc_delete", """
    WITH blanked AS (
        UPDATE commentsvc_comment
        SET is_deleted = TRUE, body = '', shown = :shown, shown_key = :shown_key
        WHERE id = :id AND is_deleted = FALSE
        RETURNING id
    ), versions AS (
        UPDATE commentsvc_list_count SET version = version + 1
        WHERE list_key = ANY(:list_keys) AND EXISTS (SELECT 1 FROM blanked)
    ), recorded AS (
        INSERT INTO commentsvc_event (id, event_uid, event_type, comment_id, created, payload)
        SELECT COALESCE(MAX(id), 0) + 1, :uid, :event_type, :id, :created, :payload
        FROM commentsvc_event
        HAVING EXISTS (SELECT 1 FROM blanked)
    )
    SELECT 'event' AS kind, e.id, CAST(NULL AS TEXT) AS idem_key, e.payload AS body,
           EXISTS (SELECT 1 FROM blanked) AS changed
    FROM commentsvc_event AS e
    WHERE e.comment_id = :id AND e.event_type = 'comment.created'
      AND EXISTS (SELECT 1 FROM blanked)
    UNION ALL
    SELECT 'answer', k.user_id, k.idem_key, k.body, EXISTS (SELECT 1 FROM blanked)
    FROM commentsvc_idempotency_key AS k
    WHERE k.comment_id = :id OR k.comment_id = :parent_id
    UNION ALL
    SELECT 'changed', NULL, NULL, NULL, EXISTS (SELECT 1 FROM blanked)
""", {"id": "bigint", "parent_id": "bigint", "shown": "text", "shown_key": "text",
      "list_keys": "text[]", "uid": "varchar(36)", "event_type": "varchar(40)",
      "created": "timestamp", "payload": "text"})

# The rewritten texts, each parameter an array: events' bodies by id, answers by (user,
# key) (primary keys).
REWRITE = Prepared("commentsvc_rewrite", """
    WITH events AS (
        UPDATE commentsvc_event AS e SET payload = v.payload
        FROM unnest(:event_ids, :payloads) AS v (id, payload)
        WHERE e.id = v.id
    )
    UPDATE commentsvc_idempotency_key AS k SET body = v.body
    FROM unnest(:user_ids, :idem_keys, :bodies) AS v (user_id, idem_key, body)
    WHERE k.user_id = v.user_id AND k.idem_key = v.idem_key
""", {"event_ids": "bigint[]", "payloads": "text[]", "user_ids": "bigint[]",
      "idem_keys": "text[]", "bodies": "text[]"})
