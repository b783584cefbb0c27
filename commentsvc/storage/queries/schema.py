"""DDL beyond schema.sql, which defines every table and index: the columns added since a
table was first created, the indexes replaced since, and dropping the service's tables."""

from __future__ import annotations

import re

from sqlalchemy import text

# The schema's own advisory lock, held to the end of the transaction that changes it
# (PostgreSQL): a second init-db waits, then finds the tables there.
TAKE_SCHEMA_LOCK = text("""
    SELECT pg_advisory_xact_lock(:key)
""")

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
        ALTER TABLE commentsvc_comment ADD COLUMN shown_key TEXT
    """,
}

# Columns whose type was widened since, by (table, column), each with the statement that
# widens it where it is still of the earlier type (PostgreSQL; SQLite does not enforce a
# VARCHAR's length): from VARCHAR to TEXT only the catalog changes, no row is rewritten.
# shown_key held an MD5 (32 characters); it now holds the author's name and avatar
# (rules.rendered.render_key).
WIDENED_COLUMNS = {
    ("commentsvc_comment", "shown_key"): """
        ALTER TABLE commentsvc_comment ALTER COLUMN shown_key TYPE TEXT
    """,
}

# Whether a column still has a length limit (PostgreSQL: a VARCHAR(n) column's atttypmod
# is n + 4, a TEXT column's -1); no row when the table or column is missing.
COLUMN_LIMITED = text("""
    SELECT atttypmod > 0 FROM pg_attribute
    WHERE attrelid = to_regclass(:table) AND attname = :column AND NOT attisdropped
""")

# Indexes that schema.sql no longer defines, by name, each with the one that replaced it.
# On PostgreSQL init-db builds the new index CONCURRENTLY (built_concurrently), without
# holding writes, where the old one is still there, then drops the old one likewise
# (storage.upkeep.replace_indexes); create_schema drops what is left of them in its
# transaction, after schema.sql has built their replacements (SQLite, or a command run
# before init-db).
REPLACED_INDEXES = {
    "commentsvc_comment_replies": "commentsvc_comment_reply_threads",
}
DROP_REPLACED_INDEXES = tuple(f"DROP INDEX IF EXISTS {name}" for name in REPLACED_INDEXES)

# Whether an index is there (PostgreSQL, by the search path), and whether a new one is
# usable: NULL when it is missing, false when a concurrent build of it was cut off.
INDEX_STATE = text("""
    SELECT to_regclass(:old) IS NOT NULL,
           (SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(:new))
""")
# Whether an index of this name is there, by dialect: create_schema builds only the missing
# ones, since CREATE INDEX IF NOT EXISTS locks the table against writes before it finds
# the index there.
INDEX_EXISTS = {
    "postgresql": text("SELECT to_regclass(:name) IS NOT NULL"),
    "sqlite": text("SELECT EXISTS (SELECT 1 FROM sqlite_master "
                   "WHERE type = 'index' AND name = :name)"),
}
# A schema.sql statement that builds an index, and the index's name.
CREATED_INDEX = re.compile(r"CREATE (?:UNIQUE )?INDEX IF NOT EXISTS (\w+)")


def built_concurrently(statement: str) -> str:
    """schema.sql's statement that builds an index, made to build it without holding writes
    (without IF NOT EXISTS: a build cut off leaves its index there, invalid).

    >>> built_concurrently("CREATE INDEX IF NOT EXISTS i ON t (c)")
    'CREATE INDEX CONCURRENTLY i ON t (c)'
    """
    return statement.replace("INDEX IF NOT EXISTS", "INDEX CONCURRENTLY", 1)

# {name}: a name from REPLACED_INDEXES. No rows.
DROP_INDEX_CONCURRENTLY = "DROP INDEX CONCURRENTLY IF EXISTS {name}"

# The service's tables, each before the tables it points at (tests and init-db --drop);
# the host's tables are untouched. No rows.
DROP_TABLES = (
    "DROP TABLE IF EXISTS commentsvc_webhook_failure",
    "DROP TABLE IF EXISTS commentsvc_webhook_endpoint",
    "DROP TABLE IF EXISTS commentsvc_event",
    "DROP TABLE IF EXISTS commentsvc_idempotency_key",
    "DROP TABLE IF EXISTS commentsvc_browser_session",
    "DROP TABLE IF EXISTS commentsvc_token",
    "DROP TABLE IF EXISTS commentsvc_list_count",
    "DROP TABLE IF EXISTS commentsvc_comment",
    "DROP TABLE IF EXISTS commentsvc_comicpage",
    "DROP TABLE IF EXISTS commentsvc_user",
)
