-- commentsvc schema. One file for SQLite and PostgreSQL: portable types only.
-- Every table is prefixed commentsvc_ so the service can share a host site's database.
--
-- Lists are served newest first by (date_added, id). Each comment carries its 1-based
-- position (1 = oldest) in the three lists it belongs to: the whole site, its kind
-- (content_type) and its target (content_type, object_id). A page is then a range of
-- positions read from an index, and each list's size is one row of commentsvc_list_count,
-- so no request scans or counts a list. Writes keep both exact.
-- Statements are separated by a semicolon at the end of a line.

CREATE TABLE IF NOT EXISTS commentsvc_user (
    id        BIGINT PRIMARY KEY,
    username  TEXT NOT NULL,
    avatar    TEXT,
    is_staff  BOOLEAN NOT NULL DEFAULT FALSE
);

-- Sign-in keys, kept only as the SHA-256 hex digest of the key.
CREATE TABLE IF NOT EXISTS commentsvc_token (
    digest   VARCHAR(64) PRIMARY KEY,
    user_id  BIGINT NOT NULL REFERENCES commentsvc_user (id),
    created  TIMESTAMP NOT NULL
);

-- Browser sign-in sessions not signed out of (standalone; docs/API.md): one row per
-- session, by the SHA-256 digest of the random id its cookie holds, with the key it
-- signed in. Sign-out deletes the row, so a saved copy of the cookie signs in nobody; the
-- read joins the key, so a revoked key's sessions sign in nobody either. Each sign-in
-- deletes the rows older than a cookie may live (31 days). No foreign key: a session must
-- never stop a key or a user from being removed.
CREATE TABLE IF NOT EXISTS commentsvc_browser_session (
    digest      VARCHAR(64) PRIMARY KEY,
    key_digest  VARCHAR(64) NOT NULL,
    created     TIMESTAMP NOT NULL
);

CREATE INDEX IF NOT EXISTS commentsvc_browser_session_created
    ON commentsvc_browser_session (created);

CREATE TABLE IF NOT EXISTS commentsvc_comicpage (
    id     BIGINT PRIMARY KEY,
    title  TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS commentsvc_comment (
    id            BIGINT PRIMARY KEY,
    content_type  VARCHAR(100) NOT NULL,
    object_id     BIGINT NOT NULL,
    parent_id     BIGINT,
    author_id     BIGINT NOT NULL,
    body          TEXT NOT NULL,
    date_added    TIMESTAMP NOT NULL,
    is_deleted    BOOLEAN NOT NULL DEFAULT FALSE,
    is_anonymous  BOOLEAN NOT NULL DEFAULT FALSE,
    is_read       BOOLEAN NOT NULL DEFAULT FALSE,
    site_pos      BIGINT NOT NULL DEFAULT 0,
    kind_pos      BIGINT NOT NULL DEFAULT 0,
    target_pos    BIGINT NOT NULL DEFAULT 0,
    -- What the comment shows to every viewer, rendered by the schema when it was written
    -- (JSON), and the key of what that depended on (commentsvc.rules.rendered).
    shown         TEXT,
    shown_key     TEXT,
    -- Named as PostgreSQL would name them: a bulk load drops and re-adds them by name.
    CONSTRAINT commentsvc_comment_parent_id_fkey
        FOREIGN KEY (parent_id) REFERENCES commentsvc_comment (id),
    CONSTRAINT commentsvc_comment_author_id_fkey
        FOREIGN KEY (author_id) REFERENCES commentsvc_user (id)
);

-- One index per list: a page is a range scan of at most page_size entries.
CREATE INDEX IF NOT EXISTS commentsvc_comment_site_pos
    ON commentsvc_comment (site_pos);

CREATE INDEX IF NOT EXISTS commentsvc_comment_kind_pos
    ON commentsvc_comment (content_type, kind_pos);

-- object_id first: the same lookups, and building it sorts on a number before any text.
CREATE INDEX IF NOT EXISTS commentsvc_comment_target_pos
    ON commentsvc_comment (object_id, content_type, target_pos);

-- A page's replies in one query, already in list order. Replies only: a root has no
-- parent to be found by, and most comments are roots (a smaller index, and a root
-- written without it). It replaced commentsvc_comment_replies, which held every comment
-- (queries.schema.REPLACED_INDEXES).
CREATE INDEX IF NOT EXISTS commentsvc_comment_reply_threads
    ON commentsvc_comment (parent_id, date_added, id) WHERE parent_id IS NOT NULL;

-- The size of every non-empty list, keyed by commentsvc.rules.comment_lists.list_key(), and a version
-- bumped by every write that changes what the list shows (for ETags).
CREATE TABLE IF NOT EXISTS commentsvc_list_count (
    list_key  VARCHAR(200) PRIMARY KEY,
    n         BIGINT NOT NULL,
    version   BIGINT NOT NULL DEFAULT 1
);

-- The first answer of each write sent with an Idempotency-Key, per user, so that a retry
-- gets that answer instead of writing again. Written in the write's transaction; kept
-- IDEMPOTENCY_RETENTION_HOURS, then purged. No foreign keys: a key outlives nothing it
-- names, and must never stop a user or comment from being removed.
CREATE TABLE IF NOT EXISTS commentsvc_idempotency_key (
    user_id         BIGINT NOT NULL,
    idem_key        VARCHAR(255) NOT NULL,
    method          VARCHAR(10) NOT NULL,
    target          TEXT NOT NULL,
    request_digest  VARCHAR(64) NOT NULL,
    comment_id      BIGINT,
    status          INTEGER NOT NULL,
    body            TEXT NOT NULL,
    location        TEXT,
    created         TIMESTAMP NOT NULL,
    PRIMARY KEY (user_id, idem_key)
);

CREATE INDEX IF NOT EXISTS commentsvc_idempotency_key_created
    ON commentsvc_idempotency_key (created);

-- The answers that show a comment, found when it is deleted or its author erased (their
-- text must leave the table too) without scanning a day of keyed writes.
CREATE INDEX IF NOT EXISTS commentsvc_idempotency_key_comment
    ON commentsvc_idempotency_key (comment_id);

-- Events (docs/EVENTS.md): one row per committed write a host site may want to hear of,
-- written in that write's transaction (a transactional outbox), so an event exists
-- if and only if its write committed. Writers take turns (the writers' lock), so ids rise
-- in commit order and a deliverer that has sent every id up to N has missed none. The
-- payload is the JSON body sent, with the comment's text removed once it is deleted or
-- its author erased. Kept EVENT_RETENTION_HOURS at least, and until every endpoint has it.
CREATE TABLE IF NOT EXISTS commentsvc_event (
    id          BIGINT PRIMARY KEY,
    event_uid   VARCHAR(36) NOT NULL,
    event_type  VARCHAR(40) NOT NULL,
    comment_id  BIGINT NOT NULL,
    created     TIMESTAMP NOT NULL,
    payload     TEXT NOT NULL
);

-- The events of one comment, found when its text must go (deletion, erasure).
CREATE INDEX IF NOT EXISTS commentsvc_event_comment
    ON commentsvc_event (comment_id);

-- Each webhook endpoint's place in the events (every id up to delivered_through was
-- delivered or given up on), the state of its next event's delivery, the lease of the
-- deliverer now sending to it, and its running totals (metrics).
CREATE TABLE IF NOT EXISTS commentsvc_webhook_endpoint (
    url                TEXT PRIMARY KEY,
    active             BOOLEAN NOT NULL DEFAULT TRUE,
    delivered_through  BIGINT NOT NULL DEFAULT 0,
    attempts           INTEGER NOT NULL DEFAULT 0,
    first_failure      TIMESTAMP,
    next_attempt       TIMESTAMP NOT NULL,
    last_error         TEXT,
    lease_owner        VARCHAR(64),
    lease_until        TIMESTAMP,
    delivered          BIGINT NOT NULL DEFAULT 0,
    failed_attempts    BIGINT NOT NULL DEFAULT 0,
    given_up           BIGINT NOT NULL DEFAULT 0
);

-- Events an endpoint never accepted within WEBHOOK_RETRY_HOURS: given up on, kept here
-- (the events command lists them).
CREATE TABLE IF NOT EXISTS commentsvc_webhook_failure (
    url          TEXT NOT NULL,
    event_id     BIGINT NOT NULL,
    attempts     INTEGER NOT NULL,
    last_error   TEXT,
    given_up_at  TIMESTAMP NOT NULL,
    PRIMARY KEY (url, event_id)
);
