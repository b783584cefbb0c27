"""Command-line commands that load data: `flask --app app import | seed`.

Each loads in one transaction (it either finishes or leaves the database as it was) and
then vacuums what it loaded (storage.upkeep).
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable
from typing import IO

import click
from flask.cli import with_appcontext
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from commentsvc.interchange import ndjson
from commentsvc.operations import demo, option_checks, progress
from commentsvc.storage import engine, erasure, renders, upkeep
from commentsvc.web import current


@click.command("import")
@with_appcontext
@click.argument("file", type=click.File("rb"))
@click.option("--workers", type=click.IntRange(min=1), default=lambda: os.cpu_count() or 1,
              show_default="the number of CPUs",
              help="Processes that check the lines of a big file (PostgreSQL).")
def import_command(file: IO[bytes], workers: int) -> None:
    """Load an NDJSON file (users, comic pages, comments): all of it, or nothing."""
    try:
        # The writer's lock: positions are renumbered, so no API write may interleave.
        with engine.writing(engine.get_engine(), unlimited=True, bulk=True) as conn, \
                progress.bar(_size(file), f"Importing {file.name}") as advance:
            engine.create_schema(conn)
            erasure.blank_deleted(conn)  # stored rows must compare as the file's do
            lines = progress.counting(file, advance, size=len)  # the bar counts bytes
            settings = current.service().settings
            report = ndjson.load(conn, lines, content_types=settings.content_types,
                                 max_body_length=settings.max_body_length, workers=workers,
                                 after_merge=renders.for_settings(settings).save_missing)
    except ndjson.ImportFailed as exc:
        click.echo(f"Import failed: {exc}", err=True)
        sys.exit(1)
    click.echo(report.summary())
    vacuum_after(upkeep.vacuum_loaded, "Loaded", "the loaded tables")


def _size(file: IO[bytes]) -> int | None:
    """Bytes in ``file`` when it is a regular file (not a pipe): the import bar's length."""
    try:
        status = os.fstat(file.fileno())
    except (OSError, ValueError, AttributeError):
        return None
    return status.st_size if stat.S_ISREG(status.st_mode) else None


@click.command("seed")
@with_appcontext
@click.option("--comments", default=500, show_default=True, type=click.IntRange(min=0))
@click.option("--targets", default=20, show_default=True,
              type=click.IntRange(min=1, max=demo.MAX_TARGETS))
@click.option("--seed", "seed_value", default=1, show_default=True, type=int,
              help="Same seed, same data.")
@click.option("--hot-share", default=0.0, show_default=True,
              type=click.FloatRange(min=0.0, max=1.0), callback=option_checks.finite,
              help="Share of all comments that go to the most popular target.")
@click.option("--if-empty", is_flag=True, help="Do nothing when comments already exist.")
def seed_command(comments: int, targets: int, seed_value: int, hot_share: float,
                 if_empty: bool) -> None:
    """Generate realistic demo users, pages and comments, deterministically."""
    # Renumbers: API writers get 503 at once meanwhile (the bulk writers' flag).
    with engine.writing(engine.get_engine(), unlimited=True, bulk=True) as conn:
        engine.create_schema(conn)
        if if_empty and demo.has_comments(conn):
            click.echo("Comments already exist; nothing seeded.")
            return
        settings = current.service().settings
        report = demo.seed(conn, comments=comments, targets=targets, seed=seed_value,
                           hot_share=hot_share, content_types=settings.content_types,
                           render=renders.for_settings(settings).render)
    click.echo(report)
    vacuum_after(upkeep.vacuum_loaded, "Loaded", "the loaded tables")


def vacuum_after(vacuum: Callable[[Engine], bool], done: str, tables: str) -> None:
    """After a command's writes have committed, the tables they rewrote vacuumed
    (storage.upkeep) so that their first readers do not pay for it; silently, so that the
    command's summary stays its one line. A failure here loses nothing that was written:
    it is said, and the command succeeds."""
    try:
        vacuum(engine.get_engine())
    except SQLAlchemyError as exc:
        click.echo(f"{done}, but vacuuming {tables} failed ({exc.__class__.__name__}): run "
                   "VACUUM (ANALYZE), or leave it to autovacuum.", err=True)
