"""SQL of the events outbox (storage.outbox): writing an event in its write's transaction,
removing a comment's text from the events kept, and pruning what every endpoint has."""

from __future__ import annotations

from sqlalchemy import DateTime, bindparam, text

# A new event, numbered one above the newest. Run only by writers, who take turns, so ids
# rise in commit order (primary key: reads one index entry).
INSERT_EVENT = text("""
    INSERT INTO commentsvc_event (id, event_uid, event_type, comment_id, created, payload)
    SELECT COALESCE(MAX(id), 0) + 1, :uid, :event_type, :comment_id, :created, :payload
    FROM commentsvc_event
""").bindparams(bindparam("created", type_=DateTime()))

# Several new events at once, numbered upwards from the newest in the order given
# (PostgreSQL: each parameter an array with one entry per event).
INSERT_EVENTS = text("""
    INSERT INTO commentsvc_event (id, event_uid, event_type, comment_id, created, payload)
    SELECT top.id + v.n, v.uid, v.event_type, v.comment_id, v.created, v.payload
    FROM (SELECT COALESCE(MAX(id), 0) AS id FROM commentsvc_event) AS top,
         unnest(CAST(:uid AS VARCHAR(36)[]), CAST(:event_type AS VARCHAR(40)[]),
                CAST(:comment_id AS BIGINT[]), CAST(:created AS TIMESTAMP[]),
                CAST(:payload AS TEXT[]))
         WITH ORDINALITY AS v (uid, event_type, comment_id, created, payload, n)
""")

# The comment.created events still kept of some comments, with each comment's stored
# render as it is now (event comment index, then primary key).
CREATED_OF_COMMENTS = text("""
    SELECT e.id, e.payload, c.shown
    FROM commentsvc_event AS e JOIN commentsvc_comment AS c ON c.id = e.comment_id
    WHERE e.comment_id IN :ids AND e.event_type = 'comment.created'
""").bindparams(bindparam("ids", expanding=True))

# The same for every comment of one author (erasure: a scan of the events kept).
CREATED_OF_AUTHOR = text("""
    SELECT e.id, e.payload, c.shown
    FROM commentsvc_event AS e JOIN commentsvc_comment AS c ON c.id = e.comment_id
    WHERE c.author_id = :author_id AND e.event_type = 'comment.created'
""")

# An event's body rewritten (primary key).
SET_PAYLOAD = text("""
    UPDATE commentsvc_event SET payload = :payload WHERE id = :id
""")

# Up to :batch of the oldest events written before :cutoff that every active endpoint has
# (delivered or given up; with no endpoint, any), never the newest event, whose id the
# next one counts on (primary key range).
PRUNE_BATCH = text("""
    DELETE FROM commentsvc_event WHERE id IN (
        SELECT id FROM commentsvc_event
        WHERE created < :cutoff
          AND id < (SELECT MAX(id) FROM commentsvc_event)
          AND id <= COALESCE((SELECT MIN(delivered_through)
                              FROM commentsvc_webhook_endpoint WHERE active = TRUE), id)
        ORDER BY id
        LIMIT :batch
    )
""").bindparams(bindparam("cutoff", type_=DateTime()))

# How many events are kept, and the newest one's id (primary key).
EVENT_TOTALS = text("""
    SELECT COUNT(*) AS kept, COALESCE(MAX(id), 0) AS newest FROM commentsvc_event
""")
