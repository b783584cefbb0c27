"""The ``commentsvc`` command: the service's commands on the standalone app.

    commentsvc run                # development server (same as flask --app app run)
    commentsvc init-db            # and every other command of `flask --app app`
    commentsvc serve              # production: nginx in front of gunicorn
"""

from __future__ import annotations

import os
import platform
from importlib.metadata import version

import click
from flask import Flask
from flask.cli import FlaskGroup

from commentsvc.operations import startup
from commentsvc.operations.serving import serve_command
from commentsvc.standalone.factory import create_app
from commentsvc.version import __version__


def create_cli_app() -> Flask:
    """The app of the ``commentsvc`` command: start-up problems as one line, and the
    database it uses named on stderr when it is the default SQLite file (installed, that
    file is in the environment's instance folder, which nothing else would tell)."""
    app = startup.reported(create_app)()
    if not os.environ.get("DATABASE_URL", "").strip():
        click.echo(f"Database: {startup.database_in_use(app.config['SQLALCHEMY_DATABASE_URI'])}"
                   " (the default; set DATABASE_URL to use another)", err=True)
    return app


def _show_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(f"commentsvc {__version__} (Flask {version('flask')}, "
                   f"Python {platform.python_version()})")
        ctx.exit()


cli = FlaskGroup(
    name="commentsvc", create_app=create_cli_app, add_version_option=False,
    params=[click.Option(["--version"], is_flag=True, expose_value=False, is_eager=True,
                         callback=_show_version, help="Show commentsvc's version.")],
    help="Run the comment service's commands on the standalone app (DATABASE_URL and the "
         "COMMENTSVC_* variables configure it), like `flask --app app ...` in a checkout.")
cli.add_command(serve_command)  # production: nginx in front of gunicorn (operations.serving)
