"""The standalone service's app factory: the comment service mounted at the root, with
the users' avatars, the browser sign-in page and the operators' endpoints.

    gunicorn 'commentsvc.standalone:create_app()'
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from functools import cached_property
from typing import Any

from flask import Flask, Response
from flask_sqlalchemy import SQLAlchemy

from commentsvc import settings
from commentsvc.operations import request_log
from commentsvc.operations.endpoints import ops_api
from commentsvc.service import STATIC_FOLDER, CommentService
from commentsvc.standalone import layers, signin
from commentsvc.standalone.media import media_api
from commentsvc.storage.engine import database_config, prepare_engine, protect
from commentsvc.web.responses import NOSNIFF

__all__ = ["create_app", "db"]

db = SQLAlchemy()


# At most this many functions' answers are kept (an app has a few dozen hooks and views).
_REMEMBERED_FUNCTIONS = 1024


class _App(Flask):
    """The standalone app: its /static files (the default avatar, the stylesheet) carry
    nosniff, as every other answer of the service does."""

    def send_static_file(self, filename: str) -> Response:
        response = super().send_static_file(filename)
        response.headers.update(NOSNIFF)
        return response

    def ensure_sync(self, func: Callable[..., Any]) -> Callable[..., Any]:
        """Flask asks of every hook and view, on every request, whether it is a coroutine
        function; the answer for a function never changes, so it is remembered (by the
        function under a bound method, which is new on every request)."""
        function = getattr(func, "__func__", func)
        is_coroutine = self._coroutines.get(function)
        if is_coroutine is None:
            is_coroutine = inspect.iscoroutinefunction(function)
            if len(self._coroutines) < _REMEMBERED_FUNCTIONS:
                self._coroutines[function] = is_coroutine
        return self.async_to_sync(func) if is_coroutine else func

    @cached_property
    def _coroutines(self) -> dict[Callable[..., Any], bool]:
        return {}


def create_app(test_config: dict[str, Any] | None = None) -> Flask:
    """Build the app from COMMENTSVC_* environment variables, or from ``test_config``."""
    request_log.configure_logging()  # before app.logger, so Flask's own lines are JSON too
    # Named as the package, so an installed service keeps its instance folder
    # (<environment>/var/commentsvc.standalone-instance); its /static is the blueprint's.
    app = _App("commentsvc.standalone", instance_relative_config=True,
               static_folder=STATIC_FOLDER)
    config = settings.from_environment() if test_config is None else dict(test_config)
    app.config.update(config)
    os.makedirs(app.instance_path, exist_ok=True)

    # A database URL it cannot use stops it here.
    values = settings.Settings.from_config(config)
    url, options = database_config(
        values, f"sqlite:///{os.path.join(app.instance_path, 'commentsvc.sqlite3')}")
    app.config["SQLALCHEMY_DATABASE_URI"] = url
    app.config.setdefault("SQLALCHEMY_ENGINE_OPTIONS", options)
    db.init_app(app)
    with app.app_context():
        prepare_engine(db.engine)

    service = CommentService(app)
    with app.app_context():  # the wait deadline and the outage log (settings now known)
        protect(db.engine, service.settings)
    # Users' avatars, drawn from their names (a host site serves its own /media/).
    app.register_blueprint(media_api)
    if values.current_user is None:  # else that function's login is in charge
        # A browser signs in by pasting a key once (/api/auth/login/): a signed cookie.
        signin.enable(app, values.secret_key)
    # /healthz, /readyz, /metrics; every path is logged and counted (404s too), and
    # every error is JSON: the whole app is the service.
    app.register_blueprint(ops_api)
    service.scope_to(app, "/")
    # X-Forwarded-* count only from trusted proxies, whatever the WSGI server believes;
    # cached list pages asked for again alike are answered before Flask.
    layers.install(app, service)
    return app
