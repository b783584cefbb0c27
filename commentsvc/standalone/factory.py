"""The standalone service: an app factory around the commentsvc blueprint, and the
``commentsvc`` command that runs the service's commands on it.

    commentsvc run                # development server (same as flask --app app run)
    commentsvc init-db            # and every other command of `flask --app app`
    gunicorn 'commentsvc.standalone:create_app()'
"""

from __future__ import annotations

import os
import platform
from importlib.metadata import version
from typing import Any

import click
from flask import Flask
from flask.cli import FlaskGroup
from flask_sqlalchemy import SQLAlchemy

from commentsvc import settings
from commentsvc.operations import request_log, startup
from commentsvc.operations.endpoints import ops_api
from commentsvc.operations.serving import serve_command
from commentsvc.standalone.media import media_api
from commentsvc.standalone.secret_key import instance_secret
from commentsvc.standalone.signin import signin_api
from commentsvc.storage.database_urls import normalise_url
from commentsvc.storage.engine import engine_options, prepare_engine, protect
from commentsvc.version import __version__
from commentsvc.web import browser_session, forwarding
from commentsvc.web.blueprint import comments_api
from commentsvc.web.errors import install_error_handler
from commentsvc.web.responses import NOSNIFF

__all__ = ["cli", "create_app", "db", "normalise_url"]

db = SQLAlchemy()


class _App(Flask):
    """The standalone app: its /static files (the default avatar, the stylesheet) carry
    nosniff, as every other answer of the service does."""

    def send_static_file(self, filename: str):
        response = super().send_static_file(filename)
        response.headers.update(NOSNIFF)
        return response


def create_app(test_config: dict[str, Any] | None = None) -> Flask:
    """Build the app from COMMENTSVC_* environment variables, or from ``test_config``."""
    request_log.configure_logging()  # before app.logger, so Flask's own lines are JSON too
    # Named as the package, so an installed service keeps its instance folder
    # (<environment>/var/commentsvc.standalone-instance); its /static is the blueprint's.
    app = _App("commentsvc.standalone", instance_relative_config=True,
               static_folder=comments_api.static_folder)
    config = settings.from_environment() if test_config is None else dict(test_config)
    app.config.update(config)
    os.makedirs(app.instance_path, exist_ok=True)

    values = settings.resolved(config)  # a database URL it cannot use stops it here
    url = normalise_url(values["DATABASE_URL"]
                        or f"sqlite:///{os.path.join(app.instance_path, 'commentsvc.sqlite3')}")
    app.config["SQLALCHEMY_DATABASE_URI"] = url
    app.config.setdefault("SQLALCHEMY_ENGINE_OPTIONS", engine_options(
        url, values["DB_CONNECT_TIMEOUT"], values["STATEMENT_TIMEOUT_MS"],
        values["POOL_PRE_PING"], values["DB_RESPONSE_TIMEOUT"],
        values["IDLE_IN_TRANSACTION_TIMEOUT_MS"], values["LOCK_TIMEOUT_MS"]))
    db.init_app(app)
    with app.app_context():
        prepare_engine(db.engine)

    app.register_blueprint(comments_api)
    with app.app_context():  # the wait deadline and the outage log (settings now known)
        protect(db.engine, app.extensions["commentsvc"].settings)
    # Users' avatars, drawn from their names (a host site serves its own /media/).
    app.register_blueprint(media_api)
    if values["CURRENT_USER"] is None:  # else that function's login is in charge
        # A browser signs in by pasting a key once (/api/auth/login/): a signed cookie.
        browser_session.enable(app, values["SECRET_KEY"] or instance_secret(app.instance_path))
        app.register_blueprint(signin_api)
    # /healthz, /readyz, /metrics; every path is logged and counted (404s too).
    app.register_blueprint(ops_api)
    request_log.observe(app, "/")
    install_error_handler(app, "/")  # the whole app is the service: every error is JSON
    # X-Forwarded-* count only from trusted proxies, whatever the WSGI server believes.
    app.wsgi_app = forwarding.trusting(app.wsgi_app,
                                       app.extensions["commentsvc"].settings.trusted_proxies)
    return app


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
