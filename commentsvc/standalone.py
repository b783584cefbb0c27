"""The standalone service: an app factory around the commentsvc blueprint, and the
``commentsvc`` command that runs the service's commands on it.

    commentsvc run                # development server (same as flask --app app run)
    commentsvc init-db            # and every other command of `flask --app app`
    gunicorn 'commentsvc.standalone:create_app()'
"""

from __future__ import annotations

import os
from typing import Any

from flask import Flask
from flask.cli import FlaskGroup
from flask_sqlalchemy import SQLAlchemy
from werkzeug.middleware.proxy_fix import ProxyFix

from . import comments_api, request_log, settings
from .db import engine_options, prepare_engine, protect
from .errors import install_error_handler
from .ops import ops_api

db = SQLAlchemy()


def create_app(test_config: dict[str, Any] | None = None) -> Flask:
    """Build the app from COMMENTSVC_* environment variables, or from ``test_config``."""
    request_log.configure_logging()  # before app.logger, so Flask's own lines are JSON too
    app = Flask(__name__, instance_relative_config=True)
    config = settings.from_environment() if test_config is None else dict(test_config)
    app.config.update(config)
    os.makedirs(app.instance_path, exist_ok=True)

    url = normalise_url(config.get("COMMENTSVC_DATABASE_URL")
                        or f"sqlite:///{os.path.join(app.instance_path, 'commentsvc.sqlite3')}")
    values = settings.resolved(config)
    app.config["SQLALCHEMY_DATABASE_URI"] = url
    app.config.setdefault("SQLALCHEMY_ENGINE_OPTIONS", engine_options(
        url, values["DB_CONNECT_TIMEOUT"], values["STATEMENT_TIMEOUT_MS"],
        values["POOL_PRE_PING"], values["DB_RESPONSE_TIMEOUT"],
        values["IDLE_IN_TRANSACTION_TIMEOUT_MS"]))
    db.init_app(app)
    with app.app_context():
        prepare_engine(db.engine)

    app.register_blueprint(comments_api)
    with app.app_context():  # the wait deadline and the outage log (settings now known)
        protect(db.engine, app.extensions["commentsvc"])
    # /healthz, /readyz, /metrics; every path is logged and counted (404s too).
    app.register_blueprint(ops_api)
    request_log.observe(app, "/")
    install_error_handler(app, "/")  # the whole app is the service: every error is JSON
    proxies = app.extensions["commentsvc"]["TRUSTED_PROXIES"]
    if proxies:
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=proxies, x_proto=proxies, x_host=proxies)
    return app


def normalise_url(url: str) -> str:
    """Accept the common postgres:// spelling; SQLAlchemy wants postgresql://."""
    if url.startswith("postgres://"):
        return "postgresql://" + url[len("postgres://"):]
    return url


cli = FlaskGroup(
    name="commentsvc", create_app=create_app,
    help="Run the comment service's commands on the standalone app (DATABASE_URL and the "
         "COMMENTSVC_* variables configure it), like `flask --app app ...` in a checkout.")
