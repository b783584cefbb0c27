"""`init-db --if-missing`, what `commentsvc serve` runs before it starts: the whole of
init-db where some of the service's tables are missing, nothing where none is."""

from __future__ import annotations

import sqlalchemy as sa

from commentsvc.storage import engine as db

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
