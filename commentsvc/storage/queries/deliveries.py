"""SQL of webhook delivery (storage.deliveries): each endpoint's place in the events, the
lease of the deliverer sending to it, its attempts, and what it was given up on.

Times are naive UTC, passed in by the deliverer (the same clock for all its decisions).
Every change a deliverer makes to an endpoint names it as the lease holder, so one whose
lease ran out (it froze, another took over) changes nothing any more.
"""

from __future__ import annotations

from sqlalchemy import DateTime, TextClause, bindparam, text


def _timed(statement: str, *names: str) -> TextClause:
    """A statement whose named parameters are times."""
    return text(statement).bindparams(*(bindparam(name, type_=DateTime()) for name in names))


# A configured endpoint: a new one starts before the first event kept; a known one is
# made active again (primary key).
REGISTER = _timed("""
    INSERT INTO commentsvc_webhook_endpoint (url, active, delivered_through, next_attempt)
    VALUES (:url, TRUE, 0, :now)
    ON CONFLICT (url) DO UPDATE SET active = TRUE
""", "now")

# Endpoints no longer configured: they no longer keep events from being pruned.
DEACTIVATE_OTHERS = text("""
    UPDATE commentsvc_webhook_endpoint SET active = FALSE
    WHERE active = TRUE AND url NOT IN :urls
""").bindparams(bindparam("urls", expanding=True))

# Take an endpoint whose next attempt is due, unless another deliverer's lease on it
# still runs: a PostgreSQL deliverer skips a row another is taking at this very moment
# (FOR UPDATE SKIP LOCKED) instead of queueing behind it (primary key).
CLAIM_POSTGRESQL = _timed("""
    UPDATE commentsvc_webhook_endpoint SET lease_owner = :owner, lease_until = :until
    WHERE url = (SELECT url FROM commentsvc_webhook_endpoint
                 WHERE url = :url AND active = TRUE AND next_attempt <= :now
                   AND (lease_until IS NULL OR lease_until < :now OR lease_owner = :owner)
                 FOR UPDATE SKIP LOCKED)
""", "now", "until")
# SQLite has one writer at a time, so the plain conditional update is enough.
CLAIM_SQLITE = _timed("""
    UPDATE commentsvc_webhook_endpoint SET lease_owner = :owner, lease_until = :until
    WHERE url = :url AND active = TRUE AND next_attempt <= :now
      AND (lease_until IS NULL OR lease_until < :now OR lease_owner = :owner)
""", "now", "until")

# What a claimed endpoint's deliverer needs to go on (primary key).
CLAIMED = text("""
    SELECT delivered_through, attempts, first_failure
    FROM commentsvc_webhook_endpoint WHERE url = :url AND lease_owner = :owner
""").columns(first_failure=DateTime())

# The next events after an endpoint's place, in order (primary key range).
EVENTS_AFTER = text("""
    SELECT id, event_uid, event_type, payload FROM commentsvc_event
    WHERE id > :after ORDER BY id LIMIT :batch
""")

# One event delivered: the endpoint moves past it, its lease renewed (primary key).
DELIVERED = _timed("""
    UPDATE commentsvc_webhook_endpoint
    SET delivered_through = :event_id, attempts = 0, first_failure = NULL,
        last_error = NULL, delivered = delivered + 1, lease_until = :until
    WHERE url = :url AND lease_owner = :owner AND delivered_through < :event_id
""", "until")

# An attempt failed: try again at :next_attempt; the lease is given back meanwhile.
FAILED = _timed("""
    UPDATE commentsvc_webhook_endpoint
    SET attempts = attempts + 1, first_failure = COALESCE(first_failure, :now),
        last_error = :error, next_attempt = :next_attempt,
        failed_attempts = failed_attempts + 1, lease_owner = NULL, lease_until = NULL
    WHERE url = :url AND lease_owner = :owner
""", "now", "next_attempt")

# An event failed for the whole retry window: kept as given up, and the endpoint moves
# past it (primary keys).
GIVEN_UP = _timed("""
    INSERT INTO commentsvc_webhook_failure (url, event_id, attempts, last_error, given_up_at)
    VALUES (:url, :event_id, :attempts, :error, :now)
    ON CONFLICT (url, event_id) DO UPDATE
    SET attempts = excluded.attempts, last_error = excluded.last_error,
        given_up_at = excluded.given_up_at
""", "now")
PASSED_GIVEN_UP = _timed("""
    UPDATE commentsvc_webhook_endpoint
    SET delivered_through = :event_id, attempts = 0, first_failure = NULL,
        last_error = :error, given_up = given_up + 1,
        failed_attempts = failed_attempts + 1, lease_until = :until
    WHERE url = :url AND lease_owner = :owner AND delivered_through < :event_id
""", "until")

# A deliverer with nothing to send, or stopping, gives its lease back (primary key).
RELEASE = text("""
    UPDATE commentsvc_webhook_endpoint SET lease_owner = NULL, lease_until = NULL
    WHERE url = :url AND lease_owner = :owner
""")

# Every endpoint's URL, active or not (the deliverer names them as the metrics do).
URLS = text("SELECT url FROM commentsvc_webhook_endpoint ORDER BY url")

# Every endpoint's state, with how many events it lacks and when the oldest of them was
# written (a primary key range per endpoint).
STATES = text("""
    SELECT p.url, p.active, p.delivered_through, p.attempts, p.first_failure,
           p.next_attempt, p.last_error, p.lease_owner, p.lease_until, p.delivered,
           p.failed_attempts, p.given_up,
           (SELECT COUNT(*) FROM commentsvc_event AS e
            WHERE e.id > p.delivered_through) AS pending,
           (SELECT e.created FROM commentsvc_event AS e WHERE e.id > p.delivered_through
            ORDER BY e.id LIMIT 1) AS oldest_pending
    FROM commentsvc_webhook_endpoint AS p
    ORDER BY p.url
""").columns(first_failure=DateTime(), next_attempt=DateTime(), lease_until=DateTime(),
             oldest_pending=DateTime())

# The events given up on, newest first, with what is still kept of them.
GIVEN_UP_EVENTS = text("""
    SELECT f.url, f.event_id, e.event_uid, e.event_type, f.attempts, f.last_error,
           f.given_up_at
    FROM commentsvc_webhook_failure AS f
    LEFT JOIN commentsvc_event AS e ON e.id = f.event_id
    ORDER BY f.given_up_at DESC, f.event_id DESC
    LIMIT :limit
""").columns(given_up_at=DateTime())
