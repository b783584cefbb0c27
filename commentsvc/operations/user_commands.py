"""Command-line commands about users: `flask --app app create-token | revoke-token | staff
| erase-user | purge-idempotency-keys | rerender`.

Each runs in one transaction (the purge: in batches): it finishes or changes nothing.
"""

from __future__ import annotations

import sys

import click
from flask.cli import with_appcontext

from commentsvc.operations.load_commands import vacuum_after
from commentsvc.rules.identifiers import id_of_digits
from commentsvc.storage import engine, erasure, renders, upkeep
from commentsvc.web import auth, current, idempotency


def _user_id(_ctx: click.Context, _param: click.Parameter, value: str | None) -> int | None:
    """A user id written as the API writes ids: ASCII digits only (Python's int() also
    reads "+5", " 5", "1_0" and other scripts' digits, and erasure cannot be undone), else
    a usage error. An id no user can have (they run from 1 to INT64_MAX) names no user:
    said as for any unknown id (exit 1) before the database is asked, where SQLite's
    driver would fail to convert one beyond its integers."""
    if value is None:
        return None
    if not value.isascii() or not value.isdigit():
        raise click.BadParameter(f"{value[:40]!r} is not a user id (digits 0 to 9 only).")
    user_id = id_of_digits(value)
    if user_id is None:
        shown = value.lstrip("0") or "0"
        click.echo(f"No user has id {shown[:40]}{'…' if len(shown) > 40 else ''}.", err=True)
        sys.exit(1)
    return user_id


@click.command("create-token")
@with_appcontext
@click.argument("user_id", callback=_user_id)
def create_token_command(user_id: int) -> None:
    """Make a sign-in key for a user and print it (only here: the service keeps a digest)."""
    try:
        with engine.writing(engine.get_engine()) as conn:
            key = auth.create_token(conn, user_id)
    except auth.UnknownUser:
        click.echo(f"No user has id {user_id}.", err=True)
        sys.exit(1)
    click.echo(key)


@click.command("revoke-token")
@with_appcontext
@click.argument("key")
def revoke_token_command(key: str) -> None:
    """Withdraw a sign-in key: requests with it get 401 from now on."""
    with engine.writing(engine.get_engine()) as conn:
        revoked = auth.revoke_token(conn, key)
    if not revoked:
        click.echo("No such key.", err=True)
        sys.exit(1)
    click.echo("Key revoked.")


@click.command("staff")
@with_appcontext
@click.argument("user_id", callback=_user_id)
@click.option("--remove", is_flag=True, help="Take staff away instead.")
def staff_command(user_id: int, remove: bool) -> None:
    """Make a user staff (may delete any comment, mark comic page comments read)."""
    with engine.writing(engine.get_engine()) as conn:
        found = auth.set_staff(conn, user_id, not remove)
    if not found:
        click.echo(f"No user has id {user_id}.", err=True)
        sys.exit(1)
    click.echo(f"User {user_id} is {'no longer ' if remove else ''}staff.")


@click.command("erase-user")
@with_appcontext
@click.argument("user_id", callback=_user_id)
def erase_user_command(user_id: int) -> None:
    """Erase a user: every text they wrote (shown as deleted), their name and avatar, and
    their sign-in keys. List positions and replies stay."""
    with engine.writing(engine.get_engine(), unlimited=True) as conn:
        erased = erasure.erase_user(
            conn, user_id, renders.for_settings(current.service().settings).save_author)
    if erased is None:
        click.echo(f"No user has id {user_id}.", err=True)
        sys.exit(1)
    click.echo(erased.summary())


@click.command("purge-idempotency-keys")
@with_appcontext
def purge_idempotency_keys_command() -> None:
    """Delete every idempotency key older than COMMENTSVC_IDEMPOTENCY_RETENTION_HOURS,
    at once (each process also purges them in small batches as it writes)."""
    hours = current.service().settings.idempotency_retention_hours
    deleted = idempotency.purge(engine.get_engine(), hours, batch=None)
    click.echo(f"Purged {deleted} idempotency key{'s' if deleted != 1 else ''} "
               f"older than {hours:g} h.")


@click.command("rerender")
@with_appcontext
@click.option("--user", "user_id", callback=_user_id,
              help="Only this user's comments (after their name or avatar changed).")
def rerender_command(user_id: int | None) -> None:
    """Render again what comments show to every viewer, where it is missing or out of
    date: after a user's name or avatar was changed outside the service, or the time
    zone or default avatar setting changed. Built pages stay right meanwhile (a stale
    render is never served), only slower; the lists of the comments it renders get new
    versions, so that their cached pages and ETags show the change too. In batches, each
    its own transaction; then, if it rendered any, the comment table is vacuumed
    (PostgreSQL)."""
    renderer = renders.for_settings(current.service().settings)
    if user_id is None:
        done = renderer.save_stale(engine.get_engine())
    else:
        with engine.writing(engine.get_engine(), unlimited=True) as conn:
            done = renderer.save_author(conn, user_id)
    click.echo(f"Rendered {done} comment{'s' if done != 1 else ''}.")
    if done:
        vacuum_after(upkeep.vacuum_rendered, "Rendered", "the comment table")


COMMANDS = (create_token_command, revoke_token_command, staff_command, erase_user_command,
            purge_idempotency_keys_command, rerender_command)
