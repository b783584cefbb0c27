"""The blueprint a site registers to get /api/comments/ (and the service's CLI commands).

    app.register_blueprint(comments_api, url_prefix="/community")

It borrows the app's Flask-SQLAlchemy engine. Its first registration in an app sets up
the app's service (commentsvc.service): the COMMENTSVC_* settings are checked, and every
error under its /api/ prefix is answered as JSON.
"""

from __future__ import annotations

from flask import Blueprint, Flask, Response
from flask.blueprints import BlueprintSetupState
from werkzeug.exceptions import default_exceptions
from werkzeug.routing import BaseConverter

from commentsvc.operations import request_log
from commentsvc.operations.commands import every_command
from commentsvc.rules.identifiers import id_of_digits
from commentsvc.web import openapi
from commentsvc.web.errors import install_error_handler, to_response
from commentsvc.web.on_duty import serve_on_duty
from commentsvc.web.responses import NOSNIFF
from commentsvc.web.views import CommentDetailView, CommentFeedView, CommentListView


class _Blueprint(Blueprint):
    """A blueprint whose static files carry nosniff, as every other answer of the API does."""

    def send_static_file(self, filename: str) -> Response:
        response = super().send_static_file(filename)
        response.headers.update(NOSNIFF)
        return response


class AsciiIdConverter(BaseConverter):
    """Any run of ASCII digits as a comment's id, or None where it can name no comment (0,
    or past the largest id). Werkzeug's ``int`` also takes other scripts' digits
    (``/api/comments/１/`` would name comment 1), which the API promises are 404; and with
    bounds, an id outside them matched no route, so a method the comment does not take got
    405 there without the comment's ``Allow``. The view answers None 404 (views)."""

    regex = r"[0-9]+"
    weight = 50

    def to_python(self, value: str) -> int | None:
        return id_of_digits(value)


# The converter the comment's own route names, registered in the app before that route.
ID_CONVERTER = "commentsvc_id"


def _register_converter(state: BlueprintSetupState) -> None:
    state.app.url_map.converters[ID_CONVERTER] = AsciiIdConverter


# The browsable page's templates and stylesheet travel with the blueprint, its static
# files under the API's own prefix wherever the blueprint is mounted.
comments_api = _Blueprint("commentsvc", __name__, cli_group=None, template_folder="templates",
                         static_folder="static", static_url_path="/api/static")
comments_api.record(_register_converter)
serve_on_duty(comments_api)  # the engine's answer deadline, where a host shares it

comments_api.add_url_rule(
    "/api/comments/",
    view_func=CommentListView.as_view("comment_list"),
    methods=["GET", "POST", "OPTIONS"],
)
# A list's newest comments as Atom (GET and HEAD; no OPTIONS, as the other documents).
comments_api.add_url_rule("/api/comments/feed/",
                          view_func=CommentFeedView.as_view("comment_feed"), methods=["GET"])
# Ids are positive 64-bit integers in ASCII digits; anything else names no comment (404).
comments_api.add_url_rule(
    f"/api/comments/<{ID_CONVERTER}:comment_id>/",
    view_func=CommentDetailView.as_view("comment_detail"),
    methods=["GET", "PATCH", "DELETE", "OPTIONS"],
)
# The OpenAPI document of these routes, under this mount's prefix.
comments_api.add_url_rule("/api/schema/", endpoint="openapi_schema",
                          view_func=openapi.schema_view, methods=["GET"])
comments_api.register_error_handler(Exception, to_response)
# Flask chooses a handler for the status code, a host's too, before any handler for an
# exception class: the blueprint names every code Werkzeug raises (a static file of its
# own not found, say), so its views' errors stay JSON whatever pages the host has.
for code in default_exceptions:
    comments_api.register_error_handler(code, to_response)
for command in every_command():
    comments_api.cli.add_command(command)


def scope_to_prefix(app: Flask, url_prefix: str | None) -> None:
    """JSON errors, request logs and metrics for everything under this mount's /api/."""
    scope_to_path(app, (url_prefix or "").rstrip("/") + "/api/")


def scope_to_path(app: Flask, prefix: str) -> None:
    """JSON errors, request logs and metrics for every path under ``prefix``."""
    install_error_handler(app, prefix)
    request_log.observe(app, prefix)  # one log line and metrics per request
