"""Start-up problems on the command line as one line that names the problem and its fix.

A bad setting, a database that cannot be reached or a port already taken are the
operator's to fix, not bugs: `flask --app app ...`, the `commentsvc` command and
`make run` report them as ``Error: ...`` with exit status 2 and no traceback. With
``--debug`` or ``FLASK_DEBUG=1`` the original exception propagates, traceback and all.
Outside a command (gunicorn, tests) nothing changes: the exceptions propagate as they are.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar, overload

import click
from flask.helpers import get_debug_flag
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, OperationalError

from commentsvc.settings import SettingsError
from commentsvc.storage.bulk_lock import WritesPaused
from commentsvc.storage.outage import LOGGER_NAME as OUTAGE_LOGGER

F = TypeVar("F", bound=Callable[..., Any])

FIX_URL = "fix DATABASE_URL (the database URL)"


class StartupError(click.ClickException):
    """A problem the operator fixes: shown as one line, exit status 2."""

    exit_code = 2


@overload
def explain(exc: SettingsError) -> str: ...
@overload
def explain(exc: BaseException) -> str | None: ...
def explain(exc: BaseException) -> str | None:
    """One line naming the problem and its fix, or None when ``exc`` is not a start-up
    problem (then it stays an error with its traceback)."""
    if isinstance(exc, SettingsError):
        return f"{exc}; fix the value or unset the variable to use its default."
    if isinstance(exc, OperationalError):
        return _database_problem(exc)
    return None


def _database_problem(exc: OperationalError) -> str | None:
    message = str(exc.orig) if exc.orig is not None else str(exc)
    first = message.strip().splitlines()[0] if message.strip() else message
    if m := re.search(r'database "([^"]+)" does not exist', message):
        return (f'The PostgreSQL database "{m[1]}" does not exist: create it '
                f"(createdb {m[1]}) or {FIX_URL}.")
    if m := re.search(r'(?:role "([^"]+)" does not exist|password authentication failed'
                      r' for user "([^"]+)")', message):
        return (f'PostgreSQL refused the login of "{m[1] or m[2]}": {FIX_URL} '
                f"(user and password) or create that role.")
    if re.search(r"Connection refused|could not connect|timeout expired|"
                 r"could not translate host name|No such file or directory|"
                 r"Network is unreachable|server closed the connection|did not answer within|"
                 r"found the database hung", message):
        return (f"Cannot reach the PostgreSQL server ({_shorten(first)}): start it, "
                f"or {FIX_URL}.")
    if "unable to open database file" in message:
        return (f"Cannot open the SQLite database file ({first}): check that its folder "
                f"exists and is writable, or {FIX_URL}.")
    if m := re.search(r"Could not decode to UTF-8 column '([^']+)'", message):
        return (f"A stored text is not UTF-8 (SQLite, column {m[1]}): something other than "
                f"the service wrote bytes there; fix that row.")
    return None


def _shorten(line: str) -> str:
    """psycopg2's first line without its trailing punctuation."""
    return line.strip().rstrip(":").rstrip()


def reported(function: F) -> F:
    """``function`` with start-up problems raised as StartupError inside a command."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        in_command = click.get_current_context(silent=True) is not None and not get_debug_flag()
        try:
            with _outage_lines_silenced(in_command):
                return function(*args, **kwargs)
        except WritesPaused as exc:  # a command's write met an import at work
            if not in_command:
                raise
            raise click.ClickException(f"{exc.detail} (the command changed nothing)") from None
        except (SettingsError, OperationalError) as exc:
            if not in_command:
                raise
            message = explain(exc)
            if message is None:
                raise
            raise StartupError(message) from None

    return wrapper  # type: ignore[return-value]


@contextmanager
def _outage_lines_silenced(silenced: bool) -> Iterator[None]:
    """A command's database problem is its one error line: the outage log's "database
    unavailable" warning (meant for a serving process's log) would only repeat it."""
    if not silenced:
        yield
        return
    outage_log = logging.getLogger(OUTAGE_LOGGER)
    level = outage_log.level
    outage_log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        outage_log.setLevel(level)


def report_problems(command: click.Command) -> click.Command:
    """The same command, its start-up problems shown as one line (exit status 2)."""
    if command.callback is not None:
        command.callback = reported(command.callback)
    return command


def database_in_use(url: str) -> str:
    """How the start line names the database: the SQLite file, else the URL without a
    password."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return url
    if parsed.get_backend_name() == "sqlite":
        return f"SQLite file {parsed.database}"
    return parsed.render_as_string(hide_password=True)
