"""Statements on the driver's own cursor (storage.driver_cursor): the write path's
statements run there, in the SQLAlchemy connection's transaction, and fail exactly as
SQLAlchemy's own execution fails (the writers' retry and the outage log depend on it)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from commentsvc.storage import driver_cursor, outage
from commentsvc.storage import engine as db
from conftest import terminate_backends


def test_rows_come_back_as_tuples_in_the_connections_own_transaction(pg_app):
    with pg_app.app_context(), db.get_engine().connect() as conn, conn.begin():
        own = conn.execute(sa.text("SELECT txid_current()")).scalar()
        assert driver_cursor.rows(conn, "SELECT %(n)s, txid_current()", {"n": 7}) == [(7, own)]
        assert driver_cursor.rows(conn, "SET LOCAL statement_timeout = 0") == []
        assert driver_cursor.rows(conn, "SELECT 1 WHERE FALSE") == []


def test_a_connection_without_a_transaction_is_refused(pg_app):
    with pg_app.app_context(), db.get_engine().connect() as conn:
        with pytest.raises(RuntimeError, match="transaction"):
            driver_cursor.rows(conn, "SELECT 1")


def test_a_failed_statement_is_sqlalchemys_error_without_its_parameters(pg_app):
    with pg_app.app_context(), db.get_engine().connect() as conn:
        with conn.begin(), pytest.raises(sa.exc.DataError) as failed:
            driver_cursor.rows(conn, "SELECT 1 / %(divisor)s", {"divisor": 0})
        assert "division by zero" in str(failed.value)
        assert failed.value.hide_parameters and "divisor': 0" not in str(failed.value)
        assert not failed.value.connection_invalidated
        with conn.begin():  # rolled back, and the connection still serves
            assert driver_cursor.rows(conn, "SELECT 2") == [(2,)]


def test_a_lost_connection_is_invalidated_and_the_outage_logged_then_ended(pg_app,
                                                                         monkeypatch):
    monkeypatch.setattr(outage, "SETTLE_SECONDS", 0.0)
    with pg_app.app_context():
        engine = db.get_engine()
        log = outage.watch(engine, 0)
        with engine.connect() as conn:
            conn.begin()
            terminate_backends(pg_app)
            with pytest.raises(sa.exc.OperationalError) as lost:
                driver_cursor.rows(conn, "SELECT 1")
            assert lost.value.connection_invalidated and conn.invalidated
            with pytest.raises(sa.exc.PendingRollbackError):  # as SQLAlchemy's execute
                driver_cursor.rows(conn, "SELECT 1")
            with pytest.raises(sa.exc.PendingRollbackError):
                conn.exec_driver_sql("SELECT 1")
        assert log.down_since is not None  # handle_error heard of it
        with engine.connect() as conn, conn.begin():
            assert driver_cursor.rows(conn, "SELECT 3") == [(3,)]
        assert log.down_since is None  # and of the statement that succeeded
