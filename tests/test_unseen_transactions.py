"""A transaction the server holds open on a connection psycopg2 takes for idle (a COMMIT
refused before it started leaves one) is ended before the connection goes back to the
pool, so the next request on it is not refused "current transaction is aborted"."""

from __future__ import annotations

import psycopg2
import pytest
from psycopg2 import extensions

from commentsvc.storage import engine as db
from commentsvc.storage.unseen_transactions import unseen
from conftest import Community

POST = {"content_type": "comics.comicpage", "object_id": 10, "body": "after the refusal"}


def leave_unseen(connection: extensions.connection, failed: bool) -> None:
    """Put ``connection`` where a refused COMMIT leaves it: the server inside a
    transaction (aborted, if ``failed``), psycopg2 taking it for none."""
    connection.autocommit = True
    with connection.cursor() as cursor:
        cursor.execute("BEGIN")
        if failed:
            with pytest.raises(psycopg2.errors.DivisionByZero):
                cursor.execute("SELECT 1 / 0")
    connection.autocommit = False
    assert unseen(connection)


@pytest.mark.parametrize("failed", [True, False])
def test_a_connection_goes_back_to_the_pool_outside_any_transaction(pg_app, failed):
    with pg_app.app_context():
        engine = db.get_engine()
    with engine.connect() as conn:
        connection = conn.connection.dbapi_connection
        leave_unseen(connection, failed)
    assert connection.get_transaction_status() == extensions.TRANSACTION_STATUS_IDLE
    with engine.connect() as conn:  # and it serves the next transaction
        assert conn.exec_driver_sql("SELECT 1").scalar() == 1


def test_posts_after_a_refused_commit_are_written(pg_app):
    """Every pooled connection left so, then a post on each: all written."""
    community = Community(pg_app)
    client = pg_app.test_client()
    with pg_app.app_context():
        engine = db.get_engine()
    held = [engine.connect() for _ in range(engine.pool.size())]
    for conn in held:
        leave_unseen(conn.connection.dbapi_connection, failed=True)
    for conn in held:
        conn.close()
    for n in range(engine.pool.size()):
        response = client.post("/api/comments/", json={**POST, "body": f"post {n}"},
                               headers=community.auth("ann"))
        assert response.status_code == 201, response.get_json()
