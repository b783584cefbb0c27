"""SQL that takes the comment table's indexes and foreign keys off for a load into an
empty table, and puts them back (the indexes themselves are defined in schema.sql)."""

from __future__ import annotations

from sqlalchemy import text

# The comment table's indexes other than its primary key, as named in schema.sql.
SECONDARY_INDEXES = (
    "commentsvc_comment_site_pos",
    "commentsvc_comment_kind_pos",
    "commentsvc_comment_target_pos",
    "commentsvc_comment_replies",
)

# The comment table's foreign keys (PostgreSQL only: SQLite cannot drop a constraint).
FOREIGN_KEYS = {
    "commentsvc_comment_parent_id_fkey": "FOREIGN KEY (parent_id) "
                                         "REFERENCES commentsvc_comment (id)",
    "commentsvc_comment_author_id_fkey": "FOREIGN KEY (author_id) "
                                         "REFERENCES commentsvc_user (id)",
}

# Memory for the sorts of the load's index builds and window functions (this transaction
# only); the server's defaults suit small queries, not sorting ten million rows.
TUNE_POSTGRESQL = (
    text("SET LOCAL maintenance_work_mem = '512MB'"),
    text("SET LOCAL work_mem = '256MB'"),
)

ANALYZE_COMMENTS = text("ANALYZE commentsvc_comment")
