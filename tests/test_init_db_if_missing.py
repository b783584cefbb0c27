"""`init-db --if-missing`, what `commentsvc serve` runs before it starts: the whole of
init-db where some of the service's tables are missing, nothing where none is."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import sqlalchemy as sa

from app import create_app
from commentsvc.storage import engine as db
from harness.servers import scratch_database

REPLIES_INDEX = "commentsvc_comment_reply_threads"


def indexes(app) -> set[str]:
    with app.app_context(), db.get_engine().connect() as conn:
        return {index["name"] for index in sa.inspect(conn).get_indexes("commentsvc_comment")}


def tables(app) -> set[str]:
    with app.app_context(), db.get_engine().connect() as conn:
        return set(sa.inspect(conn).get_table_names())


def drop(app, statement: str) -> None:
    with app.app_context(), db.get_engine().begin() as conn:
        conn.exec_driver_sql(statement)


def test_with_every_table_there_it_changes_nothing_and_says_nothing(app, runner):
    drop(app, f"DROP INDEX {REPLIES_INDEX}")  # what a plain init-db would build again
    done = runner.invoke(args=["init-db", "--if-missing"])
    assert (done.exit_code, done.output) == (0, "")
    assert REPLIES_INDEX not in indexes(app)
    done = runner.invoke(args=["init-db"])
    assert done.exit_code == 0, done.output
    assert REPLIES_INDEX in indexes(app)


def test_with_a_table_missing_it_runs_the_whole_of_init_db(app, runner):
    drop(app, f"DROP INDEX {REPLIES_INDEX}")
    drop(app, "DROP TABLE commentsvc_browser_session")
    done = runner.invoke(args=["init-db", "--if-missing"])
    assert done.exit_code == 0, done.output
    assert done.output.endswith("Database schema ready.\n")
    assert "commentsvc_browser_session" in tables(app)
    assert REPLIES_INDEX in indexes(app)


def test_it_refuses_to_go_with_drop_and_drops_nothing(app, runner):
    before = tables(app)
    done = runner.invoke(args=["init-db", "--drop", "--yes", "--if-missing"])
    assert done.exit_code == 2
    assert "--drop and --if-missing do not go together" in done.output
    assert tables(app) == before


@contextmanager
def making_the_schema(app, first: str) -> Iterator[None]:
    """The tables made in an open transaction as init-db makes them, or as a bulk writer
    (import, seed) does, committed when the block ends."""
    with app.app_context():
        if first == "init-db":
            with db.get_engine().begin() as conn:
                db.without_statement_timeout(conn)
                db.one_schema_change_at_a_time(conn)
                db.create_schema(conn)
                yield
        else:
            with db.writing(db.get_engine(), unlimited=True, bulk=True) as conn:
                db.create_schema(conn)
                yield


@pytest.mark.parametrize(("first", "second_one"), [
    ("init-db", ["init-db"]), ("init-db", ["events"]),
    ("init-db", ["seed", "--comments", "5", "--targets", "1"]), ("bulk writer", ["init-db"])])
def test_a_second_one_on_a_new_postgresql_database_waits_for_the_first(first, second_one):
    """Nodes started together each run init-db (commentsvc serve); the deliverer and the
    events command make the tables they read too, an import or a seed what it needs.
    Without the schema's own lock the second, the tables already being made in the
    first's open transaction, waited on the catalog, then failed on its unique index
    (pg_type) once the first committed."""
    with scratch_database("commentsvc_init_race") as url:
        app = create_app({"TESTING": True, "COMMENTSVC_DATABASE_URL": url})
        failures: list[object] = []

        def second() -> None:
            try:
                done = app.test_cli_runner().invoke(args=second_one)
            except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
                failures.append(exc)
            else:
                if done.exit_code != 0:
                    failures.append(done.output)

        with making_the_schema(app, first):
            waiting = threading.Thread(target=second)
            waiting.start()
            waiting.join(1.0)
            assert waiting.is_alive()  # it waits for the first to finish
        waiting.join(60)
        assert not waiting.is_alive() and failures == []
        assert "commentsvc_comment" in tables(app)
        with app.app_context():
            db.get_engine().dispose()
