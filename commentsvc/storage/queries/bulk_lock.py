"""SQL of the bulk writers' flag on PostgreSQL: transaction-scoped advisory locks."""

from __future__ import annotations

from sqlalchemy import text

# A bulk writer (import, seed): the schema's lock (it makes tables and indexes too), the
# flag exclusively (waits for the API writes under way), then the writers' lock on list
# positions, in that order.
BULK_WRITER = text("""
    SELECT pg_advisory_xact_lock(:schema), pg_advisory_xact_lock(:flag),
           pg_advisory_xact_lock(:positions)
""")

# Any other writer: the flag shared, without waiting; only if that was granted, the
# writers' lock (CASE evaluates its branch only when needed). False: a bulk writer has it.
# In the driver's own form (psycopg2's named parameters): every batch of writes runs it,
# on the driver's cursor (storage.driver_cursor), past SQLAlchemy's execution.
WRITER = """
    SELECT CASE WHEN pg_try_advisory_xact_lock_shared(%(flag)s)
                THEN pg_advisory_xact_lock(%(positions)s) IS NOT NULL
                ELSE FALSE END
"""
