"""DDL beyond schema.sql, which defines every table and index: the columns added since a
table was first created, the indexes replaced since, and dropping the service's tables."""

from __future__ import annotations

# Columns added after a table was first created, by (table, column), each with the
# statement that adds it: an older database gets them from init-db (CREATE TABLE IF NOT
# EXISTS leaves it as it was). No rows; rewrites nothing but the catalog (a constant
# default, or none).
ADD_LATER_COLUMNS = {
    ("commentsvc_user", "is_staff"): """
        ALTER TABLE commentsvc_user ADD COLUMN is_staff BOOLEAN NOT NULL DEFAULT FALSE
    """,
    ("commentsvc_comment", "shown"): """
        ALTER TABLE commentsvc_comment ADD COLUMN shown TEXT
    """,
    ("commentsvc_comment", "shown_key"): """
        ALTER TABLE commentsvc_comment ADD COLUMN shown_key VARCHAR(32)
    """,
}

# Indexes that schema.sql no longer defines, each replaced by one it does: init-db drops
# them once their replacement is built (in the same transaction, so a reader always has
# one of the two). No rows.
REPLACED_INDEXES = (
    # by commentsvc_comment_reply_threads, which leaves the roots out
    "DROP INDEX IF EXISTS commentsvc_comment_replies",
)

# The service's tables, each before the tables it points at (tests and init-db --drop);
# the host's tables are untouched. No rows.
DROP_TABLES = (
    "DROP TABLE IF EXISTS commentsvc_webhook_failure",
    "DROP TABLE IF EXISTS commentsvc_webhook_endpoint",
    "DROP TABLE IF EXISTS commentsvc_event",
    "DROP TABLE IF EXISTS commentsvc_idempotency_key",
    "DROP TABLE IF EXISTS commentsvc_token",
    "DROP TABLE IF EXISTS commentsvc_list_count",
    "DROP TABLE IF EXISTS commentsvc_comment",
    "DROP TABLE IF EXISTS commentsvc_comicpage",
    "DROP TABLE IF EXISTS commentsvc_user",
)
