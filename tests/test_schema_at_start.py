"""operations.schema_at_start: a database that takes the connection and then says
nothing must not keep `commentsvc serve` from starting."""

from __future__ import annotations

import os
import sqlite3

import sqlalchemy as sa

from commentsvc.operations import schema_at_start
from harness.servers import scratch_database, silent_database
from harness.waiting import within


def test_a_silent_database_is_given_up_on_after_its_time(capsys):
    with silent_database() as url:
        env = {**os.environ, "DATABASE_URL": url, "COMMENTSVC_DB_CONNECT_TIMEOUT": "60"}
        assert schema_at_start.prepare(env, seconds=5) is False
    assert ("The service's tables could not be checked (init-db did not finish within 5 s); "
            "starting anyway") in capsys.readouterr().err


def test_a_database_that_answers_is_checked(tmp_path, capsys):
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'new.sqlite3'}"}
    assert schema_at_start.prepare(env) is True
    assert "could not be checked" not in capsys.readouterr().err
    with sqlite3.connect(tmp_path / "new.sqlite3") as db:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
    assert {"commentsvc_comment", "commentsvc_list_count", "commentsvc_user"} <= tables


def test_the_retry_makes_the_tables_once_the_database_is_there():
    """A new PostgreSQL database that did not exist when the stack started (or a server
    that was down): the launcher's retries make its tables once it answers."""
    with scratch_database("commentsvc_retry") as url:
        missing = url.rsplit("/", 1)[0] + "/" + url.rsplit("/", 1)[1] + "_later"
        retry = schema_at_start.Retry({**os.environ, "DATABASE_URL": missing}, pause=0.2)
        try:
            assert not within(8, lambda: tick(retry))  # it keeps failing meanwhile
            admin = sa.create_engine(url.rsplit("/", 1)[0] + "/postgres",
                                     isolation_level="AUTOCOMMIT")
            with admin.connect() as conn:
                conn.exec_driver_sql(f'CREATE DATABASE "{missing.rsplit("/", 1)[1]}"')
            try:
                assert within(90, lambda: tick(retry))
                checked = sa.create_engine(missing)
                with checked.connect() as conn:
                    assert "commentsvc_comment" in sa.inspect(conn).get_table_names()
                checked.dispose()
            finally:
                with admin.connect() as conn:
                    conn.exec_driver_sql(
                        f'DROP DATABASE IF EXISTS "{missing.rsplit("/", 1)[1]}" WITH (FORCE)')
                admin.dispose()
        finally:
            retry.stop()


def test_stopping_the_retry_ends_its_run():
    with silent_database() as url:  # a run that would wait long
        env = {**os.environ, "DATABASE_URL": url, "COMMENTSVC_DB_CONNECT_TIMEOUT": "60"}
        retry = schema_at_start.Retry(env, pause=0)
        retry.tick()
        run = retry.run
        assert run is not None and run.poll() is None
        retry.stop()
        assert run.poll() is not None and retry.run is None


def tick(retry: schema_at_start.Retry) -> bool:
    retry.tick()
    return retry.done



def test_the_retries_come_less_often_while_they_fail(tmp_path):
    """A run costs a Python start: a long outage must not keep a core busy."""
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'no' / 'folder.sqlite3'}"}
    retry = schema_at_start.Retry(env, pause=0.5)
    pauses = []
    try:
        while len(pauses) < 3:
            before = retry.pause
            retry.next_at = 0  # the next run now
            retry.tick()
            assert retry.run is not None
            retry.run.wait(60)
            retry.tick()
            assert not retry.done
            pauses.append(before)
    finally:
        retry.stop()
    assert pauses == [0.5, 1.0, 2.0]
    retry.pause = 50
    retry.next_at = 0
    retry.tick()
    assert retry.run is not None
    retry.run.wait(60)
    retry.tick()
    assert retry.pause == schema_at_start.MAX_RETRY_SECONDS
