"""/healthz answers without the database; /readyz says whether the database and the
service's tables are there, on SQLite and PostgreSQL."""

from __future__ import annotations

import socket
import time

from app import create_app
from commentsvc.operations.health import SERVICE_TABLES
from commentsvc.storage import engine


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def unreachable_app(**config):
    """A standalone app whose PostgreSQL server refuses every connection."""
    url = f"postgresql://postgres@127.0.0.1:{closed_port()}/comments"
    return create_app({"TESTING": True, "COMMENTSVC_DATABASE_URL": url,
                       "COMMENTSVC_DB_CONNECT_TIMEOUT": 1, **config})


def test_healthz_is_ok_and_not_cached(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.get_json() == {"status": "ok"}
    assert response.headers["Content-Type"] == "application/json"
    assert response.headers["Cache-Control"] == "no-store"


def test_healthz_never_touches_the_database():
    app = unreachable_app()
    response = app.test_client().get("/healthz")
    assert response.status_code == 200
    assert response.get_json() == {"status": "ok"}


def test_readyz_with_the_schema_in_place(client):
    response = client.get("/readyz")
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.get_json() == {"status": "ready"}
    assert response.headers["Cache-Control"] == "no-store"
    assert "Retry-After" not in response.headers


def test_readyz_without_the_schema_names_the_missing_tables(app):
    with app.app_context(), engine.get_engine().begin() as conn:
        engine.drop_schema(conn)
    response = app.test_client().get("/readyz")
    assert response.status_code == 503
    assert response.get_json() == {"status": "not ready", "reason": "schema missing",
                                   "missing_tables": list(SERVICE_TABLES)}
    assert response.headers["Retry-After"] == "5"
    assert response.headers["Cache-Control"] == "no-store"


def test_lists_without_the_schema_answer_503_on_both_databases(app):
    """Not ready, as /readyz says and as SQLite's driver had it: PostgreSQL's "relation
    does not exist" was a 500 (a new database whose init-db has not run yet)."""
    with app.app_context(), engine.get_engine().begin() as conn:
        engine.drop_schema(conn)
    response = app.test_client().get("/api/comments/")
    assert response.status_code == 503
    assert response.get_json() == {"detail": "The database is unavailable. Try again shortly."}
    assert response.headers["Retry-After"] == "5"


def test_readyz_with_one_table_missing(app):
    with app.app_context(), engine.get_engine().begin() as conn:
        conn.exec_driver_sql("DROP TABLE commentsvc_token")
    body = app.test_client().get("/readyz").get_json()
    assert body["missing_tables"] == ["commentsvc_token"]


def test_readyz_with_the_database_unreachable_is_a_quick_503():
    app = unreachable_app(COMMENTSVC_RETRY_AFTER=7)
    started = time.monotonic()
    response = app.test_client().get("/readyz")
    assert time.monotonic() - started < 3
    assert response.status_code == 503
    assert response.get_json() == {"status": "not ready", "reason": "database unreachable"}
    assert response.headers["Retry-After"] == "7"
    assert response.headers["Cache-Control"] == "no-store"
    assert "Traceback" not in response.get_data(as_text=True)


def test_ops_routes_take_get_and_head_only(client):
    assert client.head("/healthz").status_code == 200
    for method in ("POST", "OPTIONS", "DELETE"):
        response = client.open("/readyz", method=method)
        assert response.status_code == 405
        assert response.get_json() == {"detail": f'Method "{method}" not allowed.'}
        assert response.headers["Allow"] == "GET, HEAD"


def test_standalone_errors_outside_the_api_are_json_too(client):
    response = client.get("/no/such/page")
    assert response.status_code == 404
    assert response.get_json() == {"detail": "Not found."}
    assert client.post("/api/schema/").headers["Allow"] == "GET, HEAD"


def test_readiness_knows_every_table_of_the_schema():
    """A database upgraded without init-db (a table of a newer version missing) is not
    ready: every table schema.sql creates is one readiness looks for."""
    import re

    from commentsvc.storage import engine as db

    created = {match for statement in db.schema_statements()
               for match in re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", statement)}
    assert created == set(SERVICE_TABLES)
