"""Seed and import end with the loaded tables vacuumed, and rerender with the comment table
vacuumed (storage.upkeep): the first read of what they wrote dirties no page, and no
request connection is left without its timeouts."""

from __future__ import annotations

import sqlalchemy as sa
from test_interchange import import_file, invoke

from app import create_app
from commentsvc.operations import load_commands, user_commands
from commentsvc.storage import engine, upkeep
from conftest import checkpoint, sample_path

READ_EVERY_COMMENT = "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT * FROM commentsvc_comment"


def dirtied_by_first_read(app) -> int:
    """Pages of the comment table that reading all of it dirtied (hint bits set now), once
    every page was written out (a page still dirty from the load is not counted again)."""
    checkpoint(app)
    with app.app_context(), engine.get_engine().connect() as conn:
        plan = conn.exec_driver_sql(READ_EVERY_COMMENT).scalar()
    return int(plan[0]["Plan"]["Shared Dirtied Blocks"])


def seeded(app, *args: str) -> None:
    result = invoke(app.test_cli_runner(), ["seed", "--comments", "300", "--targets", "5",
                                            *args])
    assert result.exit_code == 0, result.output
    assert result.stderr == ""


def test_a_seed_leaves_nothing_for_its_first_reader_to_mark(pg_app):
    seeded(pg_app)
    assert dirtied_by_first_read(pg_app) == 0
    seeded(pg_app, "--seed", "2")  # onto existing comments: the indexes kept, vacuumed too
    assert dirtied_by_first_read(pg_app) == 0


def test_an_import_leaves_nothing_for_its_first_reader_to_mark(pg_app):
    result = import_file(pg_app.test_cli_runner(), sample_path())
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert dirtied_by_first_read(pg_app) == 0


def test_a_rerender_leaves_nothing_for_its_first_reader_to_mark(pg_app):
    seeded(pg_app)
    paris = create_app({"TESTING": True, "COMMENTSVC_TIME_ZONE": "Europe/Paris",
                        "COMMENTSVC_DATABASE_URL": pg_app.config["COMMENTSVC_DATABASE_URL"]})
    try:
        result = invoke(paris.test_cli_runner(), ["rerender"])
    finally:
        with paris.app_context():
            engine.get_engine().dispose()
    assert (result.stdout, result.stderr) == ("Rendered 300 comments.\n", "")
    assert dirtied_by_first_read(pg_app) == 0


def test_a_rerender_that_renders_nothing_vacuums_nothing(pg_app, monkeypatch):
    seeded(pg_app)
    monkeypatch.setattr(user_commands.upkeep, "vacuum_rendered", failing)
    result = invoke(pg_app.test_cli_runner(), ["rerender"])
    assert (result.stdout, result.stderr) == ("Rendered 0 comments.\n", "")


def failing(_engine):
    raise sa.exc.OperationalError("VACUUM", {}, Exception("server closed the connection"))


def test_a_failed_vacuum_after_rerender_is_said_and_the_renders_stand(pg_app, monkeypatch):
    seeded(pg_app)
    with pg_app.app_context(), engine.get_engine().begin() as conn:
        conn.exec_driver_sql("UPDATE commentsvc_comment SET shown = NULL, shown_key = NULL")
    monkeypatch.setattr(user_commands.upkeep, "vacuum_rendered", failing)
    result = invoke(pg_app.test_cli_runner(), ["rerender"])
    assert (result.exit_code, result.stdout) == (0, "Rendered 300 comments.\n")
    assert "Rendered, but vacuuming the comment table failed (OperationalError)" in (
        result.stderr)
    with pg_app.app_context(), engine.get_engine().connect() as conn:
        assert conn.exec_driver_sql(
            "SELECT count(*) FROM commentsvc_comment WHERE shown IS NULL").scalar() == 0


def test_request_connections_keep_their_timeouts_after_a_vacuum(pg_app):
    with pg_app.app_context():
        database = engine.get_engine()
        with database.connect() as conn:
            configured = conn.exec_driver_sql("SHOW statement_timeout").scalar()
        assert configured not in (None, "0")
        assert upkeep.vacuum_loaded(database)
        for _ in range(database.pool.size() + 1):  # every pooled connection, and a new one
            with database.connect() as conn:
                assert conn.exec_driver_sql("SHOW statement_timeout").scalar() == configured


def test_a_failed_vacuum_is_said_and_the_load_stands(pg_app, monkeypatch):
    monkeypatch.setattr(load_commands.upkeep, "vacuum_loaded", failing)
    result = invoke(pg_app.test_cli_runner(), ["seed", "--comments", "40", "--targets", "2"])
    assert result.exit_code == 0
    assert result.stdout.startswith("Seeded ")
    assert "vacuuming the loaded tables failed (OperationalError)" in result.stderr
    with pg_app.app_context(), engine.get_engine().connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM commentsvc_comment").scalar() == 40


def test_sqlite_needs_no_vacuum(app):
    with app.app_context():
        database = engine.get_engine()
        vacuumed = [upkeep.vacuum_loaded(database), upkeep.vacuum_rendered(database)]
    assert vacuumed == [database.dialect.name != "sqlite"] * 2
