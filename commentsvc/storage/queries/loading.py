"""SQL that takes the comment table's indexes and foreign keys off for a load into an
empty table, and puts them back (the indexes themselves are defined in schema.sql)."""

from __future__ import annotations

from sqlalchemy import text

# The comment table's indexes other than its primary key, as named in schema.sql.
SECONDARY_INDEXES = (
    "commentsvc_comment_site_pos",
    "commentsvc_comment_kind_pos",
    "commentsvc_comment_target_pos",
    "commentsvc_comment_reply_threads",
)

# The comment table's foreign keys (PostgreSQL only: SQLite cannot drop a constraint).
FOREIGN_KEYS = {
    "commentsvc_comment_parent_id_fkey": "FOREIGN KEY (parent_id) "
                                         "REFERENCES commentsvc_comment (id)",
    "commentsvc_comment_author_id_fkey": "FOREIGN KEY (author_id) "
                                         "REFERENCES commentsvc_user (id)",
}

# Take the foreign keys off before the load, and put them back after it (which checks every
# loaded row in one join against the parent and user primary keys). No rows.
DROP_FOREIGN_KEYS = tuple(f"""
    ALTER TABLE commentsvc_comment DROP CONSTRAINT {name}
""" for name in FOREIGN_KEYS)
ADD_FOREIGN_KEYS = tuple(f"""
    ALTER TABLE commentsvc_comment ADD CONSTRAINT {name} {definition}
""" for name, definition in FOREIGN_KEYS.items())

# Take the secondary indexes off before the load (engine.create_schema builds them again
# from schema.sql after it). No rows.
DROP_SECONDARY_INDEXES = tuple(f"""
    DROP INDEX {name}
""" for name in SECONDARY_INDEXES)

# Memory for the sorts of the load's index builds and window functions (this transaction
# only); the server's defaults suit small queries, not sorting ten million rows.
TUNE_POSTGRESQL = (
    text("SET LOCAL maintenance_work_mem = '512MB'"),
    text("SET LOCAL work_mem = '256MB'"),
)

ANALYZE_COMMENTS = text("ANALYZE commentsvc_comment")

# After a load has committed (PostgreSQL; storage.upkeep): every table a seed or import
# fills, vacuumed and analysed. Rows loaded in bulk carry no hint bits yet, so whoever reads
# a page of them first marks and dirties it, and the page has to be written out again.
# Vacuum also sets the visibility map. Not in a transaction: no VACUUM can be.
VACUUM_LOADED = """
    VACUUM (ANALYZE) commentsvc_user, commentsvc_comicpage, commentsvc_comment,
                     commentsvc_list_count
"""
