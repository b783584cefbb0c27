"""Command-line commands of the data: `flask --app app init-db | export`, and with them the
loading commands (operations.load_commands: `import | seed`) and the users' commands
(operations.user_commands).

Each command runs in one transaction: it either finishes or leaves the database as it was.
"""

from __future__ import annotations

import sys
import time
from typing import IO

import click
from flask.cli import with_appcontext

from commentsvc.interchange import ndjson
from commentsvc.operations import health, load_commands, progress, user_commands
from commentsvc.operations.startup import StartupError
from commentsvc.storage import engine, erasure, upkeep


@click.command("init-db")
@with_appcontext
@click.option("--drop", is_flag=True, help="Drop the service's tables first (loses data).")
@click.option("--yes", is_flag=True, help="Drop without asking (--drop on no terminal).")
@click.option("--if-missing", is_flag=True,
              help="Only when some of the service's tables are missing (a new database, "
                   "or a version that adds a table); else change nothing, silently. "
                   "commentsvc serve runs it before it starts.")
def init_db_command(drop: bool, yes: bool, if_missing: bool) -> None:
    """Create the tables and indexes that do not exist yet (an index that replaced an older
    one is built without holding writes, then the older one dropped); blank the text of
    comments deleted before deletion removed it."""
    if drop and if_missing:
        raise click.UsageError("--drop and --if-missing do not go together.")
    if if_missing and not engine.read_snapshot(engine.get_engine(), health.missing_tables):
        return  # nothing to create, and no scan of the comments at every start
    if drop and not yes:
        _confirm_drop()
    if not drop:  # before the transaction below, which would build them holding writes
        for old, new in upkeep.replace_indexes(engine.get_engine()):
            click.echo(f"Built the index {new} and dropped {old}, which it replaces.")
        with engine.get_engine().begin() as conn:  # the comment table's lock for a moment,
            engine.widen_columns(conn)  # not for the whole of the transaction below
    with engine.get_engine().begin() as conn:
        engine.without_statement_timeout(conn)
        engine.one_schema_change_at_a_time(conn)
        if drop:
            engine.drop_schema(conn)
        engine.create_schema(conn)
        blanked = erasure.blank_deleted(conn)
    if blanked:
        click.echo(f"Removed the text of {blanked} deleted comment(s).")
    click.echo("Dropped the service's tables; database schema ready." if drop
               else "Database schema ready.")


def _confirm_drop() -> None:
    """Ask before ``init-db --drop`` deletes everything; refuse (exit 2) when no one can
    be asked."""
    question = ("init-db --drop deletes every comment, user, comic page and key of the "
                "service. Go on?")
    if not sys.stdin.isatty():
        raise StartupError("init-db --drop deletes every comment, user and key of the "
                           "service; nobody is at a terminal to confirm: add --yes.")
    if not click.confirm(question, default=False):
        click.echo("Nothing dropped.", err=True)
        sys.exit(1)


@click.command("export")
@with_appcontext
@click.argument("file", type=click.File("w", encoding="utf-8", lazy=True))
def export_command(file: IO[str]) -> None:
    """Write every user, comic page and comment as NDJSON, streamed in id order, from one
    snapshot: what is written meanwhile is not in the file, so every record's references
    are (a REPEATABLE READ transaction on PostgreSQL, one transaction on SQLite)."""
    # The isolation level is set before the first statement, which begins the
    # transaction; set afterwards it would come too late for that transaction.
    started = time.monotonic()
    with engine.snapshot(engine.get_engine()) as conn:
        engine.without_statement_timeout(conn)
        total = ndjson.record_count(conn) if progress.on_terminal() else None
        written = 0
        with progress.bar(total, "Exporting") as advance:
            for line in progress.counting(ndjson.dump(conn), advance):
                file.write(line)
                written += 1
        file.write("")  # the lazy file is created on first write: an empty export too
    # On stderr: the records themselves may be going to standard output.
    click.echo(f"Exported {written:,} records to {file.name} in "
               f"{time.monotonic() - started:.1f} s.", err=True)


COMMANDS = (init_db_command, load_commands.import_command, export_command,
            load_commands.seed_command, *user_commands.COMMANDS)
