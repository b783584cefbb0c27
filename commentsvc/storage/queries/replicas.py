"""SQL of choosing where reads go: how far a PostgreSQL streaming replica is behind."""

from __future__ import annotations

from sqlalchemy import text

# Seconds the replica may be behind the primary: 0 when it streams from the primary and has
# replayed all it received (an idle primary sends nothing, which is no lag), else the age
# of the last transaction it replayed. Without a WAL receiver (cut off from the primary, or
# just started) it cannot know what it misses, so that age counts too; a replica that has
# replayed no transaction yet counts as endlessly behind. Any role may ask: a WAL receiver
# shows its row (if not its details) to everyone. One row, one float; reads no table
# (recovery functions and the one-row pg_stat_wal_receiver view, no index involved).
LAG = text("""
    SELECT CASE WHEN NOT pg_is_in_recovery() THEN 0
                WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn()
                     AND EXISTS (SELECT FROM pg_stat_wal_receiver) THEN 0
                ELSE COALESCE(EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp())::float8,
                              'Infinity'::float8)
           END
""")
