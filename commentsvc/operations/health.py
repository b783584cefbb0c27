"""Liveness and readiness for a process manager or a load balancer.

``/healthz`` says the process answers and never touches the database, so a database
outage does not get healthy workers restarted. ``/readyz`` says whether this worker can
serve: the database answers ``SELECT 1`` within the connect timeout
(``COMMENTSVC_DB_CONNECT_TIMEOUT``) and the service's tables exist. Neither is cached.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
from flask import Response
from sqlalchemy import exc as sa_exc
from sqlalchemy import inspect
from sqlalchemy.engine import Connection

from commentsvc.storage.engine import get_engine, read_snapshot
from commentsvc.storage.queries.health import PING
from commentsvc.web import current
from commentsvc.web.exceptions import DATABASE_DOWN
from commentsvc.web.responses import NOSNIFF, READ_ONLY_ALLOW

log = logging.getLogger("commentsvc")

# Every table the service reads or writes (schema.sql); init-db creates them.
SERVICE_TABLES = ("commentsvc_user", "commentsvc_comicpage", "commentsvc_comment",
                  "commentsvc_list_count", "commentsvc_token", "commentsvc_browser_session",
                  "commentsvc_idempotency_key", "commentsvc_event",
                  "commentsvc_webhook_endpoint", "commentsvc_webhook_failure")


def healthz() -> Response:
    """The process is alive and answering requests."""
    return _answer({"status": "ok"})


def readyz() -> Response:
    """200 when the database answers and has the service's tables; else 503 with the reason
    and Retry-After."""
    try:
        missing = read_snapshot(get_engine(), missing_tables)
    except sa_exc.SQLAlchemyError as exc:
        reason = ("database unreachable" if isinstance(exc, DATABASE_DOWN)
                  else "database error")
        log.warning("not ready: %s: %s", reason, exc)
        return _not_ready({"status": "not ready", "reason": reason})
    if missing:
        return _not_ready({"status": "not ready", "reason": "schema missing",
                           "missing_tables": missing})
    return _answer({"status": "ready"})


def missing_tables(conn: Connection) -> list[str]:
    """The service's tables the database lacks, after checking that it answers at all.

    The tables are looked up in the catalog, never read, so a lock held on one (a running
    ``init-db --drop``) cannot keep the probe waiting.
    """
    conn.execute(PING)
    present = set(inspect(conn).get_table_names())
    return [table for table in SERVICE_TABLES if table not in present]


def _not_ready(body: dict[str, Any]) -> Response:
    return _answer(body, 503, {"Retry-After": str(current.service().settings.retry_after)})


def _answer(body: dict[str, Any], status: int = 200,
            headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(body), status=status, mimetype="application/json",
                    headers={"Cache-Control": "no-store", "Allow": READ_ONLY_ALLOW,
                             **NOSNIFF, **(headers or {})})
