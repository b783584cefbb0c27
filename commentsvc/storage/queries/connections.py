"""SQL that sets up connections and transactions (storage.engine): SQLite's pragmas and
BEGIN, and PostgreSQL's request timeouts lifted for a command's transaction."""

from __future__ import annotations

# Run on each new SQLite connection: foreign keys enforced, a write-ahead log, fsync at
# checkpoints only, and up to 10 s of waiting for the database lock (no rows, no table).
SQLITE_PRAGMAS = (
    "PRAGMA foreign_keys = ON",
    "PRAGMA journal_mode = WAL",
    "PRAGMA synchronous = NORMAL",
    "PRAGMA busy_timeout = 10000",
)

# A SQLite transaction: a reader's, or a writer's that takes the database lock at once and
# so queues on it rather than deadlocking at its first write (no rows, no table).
BEGIN = """
    BEGIN
"""
BEGIN_WRITER = """
    BEGIN IMMEDIATE
"""

# The request's statement, idle-in-transaction and lock timeouts lifted for the rest of
# one PostgreSQL transaction (commands; no rows, no table).
LIFT_TIMEOUTS = (
    "SET LOCAL statement_timeout = 0",
    "SET LOCAL idle_in_transaction_session_timeout = 0",
    "SET LOCAL lock_timeout = 0",
)
# The same for a whole session, where no transaction can hold them (a VACUUM after a load,
# storage.upkeep, whose connection is closed afterwards).
LIFT_SESSION_TIMEOUTS = (
    "SET statement_timeout = 0",
    "SET lock_timeout = 0",
)

# The end of a PostgreSQL transaction the driver no longer knows is open (storage.
# unseen_transactions), sent in autocommit so that no BEGIN goes before it.
END_UNSEEN_TRANSACTION = """
    ROLLBACK
"""
