"""SQL of the readiness probe."""

from __future__ import annotations

from sqlalchemy import text

# Returns 1 without touching any table (so no index): the database is there and answering.
PING = text("""
    SELECT 1
""")
