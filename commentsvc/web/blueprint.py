"""The blueprint a site registers to get /api/comments/ (and the service's CLI commands).

    app.register_blueprint(comments_api, url_prefix="/community")

It borrows the app's Flask-SQLAlchemy engine, checks the COMMENTSVC_* settings when it is
registered, and answers every error under its /api/ prefix as JSON.
"""

from __future__ import annotations

from pathlib import Path

import redis
from flask import Blueprint, Flask
from flask.blueprints import BlueprintSetupState

from commentsvc import settings
from commentsvc.operations import cli, request_log, startup
from commentsvc.rules.schemas import INT64_MAX, ListQuerySchema, NewCommentSchema, ReadFlagSchema
from commentsvc.storage import replicas
from commentsvc.storage.page_cache import PageCache, ResponseCache
from commentsvc.storage.shared_page_cache import RedisResponseCache, redis_client
from commentsvc.web import idempotency, openapi
from commentsvc.web.errors import install_error_handler, to_response
from commentsvc.web.rate_limit import PostRateLimit
from commentsvc.web.responses import NOSNIFF
from commentsvc.web.views import CommentDetailView, CommentListView


class _Blueprint(Blueprint):
    """A blueprint whose static files carry nosniff, as every other answer of the API does."""

    def send_static_file(self, filename: str):
        response = super().send_static_file(filename)
        response.headers.update(NOSNIFF)
        return response


# The browsable page's templates and stylesheet travel with the blueprint, its static
# files under the API's own prefix wherever the blueprint is mounted.
comments_api = _Blueprint("commentsvc", __name__, cli_group=None, template_folder="templates",
                         static_folder="static", static_url_path="/api/static")

comments_api.add_url_rule(
    "/api/comments/",
    view_func=CommentListView.as_view("comment_list"),
    methods=["GET", "POST", "OPTIONS"],
)
# Ids are positive 64-bit integers; anything else names no comment (404).
comments_api.add_url_rule(
    f"/api/comments/<int(min=1, max={INT64_MAX}):comment_id>/",
    view_func=CommentDetailView.as_view("comment_detail"),
    methods=["GET", "PATCH", "DELETE", "OPTIONS"],
)
# The OpenAPI document of these routes, under this mount's prefix.
comments_api.add_url_rule("/api/schema/", endpoint="openapi_schema",
                          view_func=openapi.schema_view, methods=["GET"])
comments_api.register_error_handler(Exception, to_response)
for command in cli.COMMANDS:
    # A database that cannot be reached is one line naming the fix (commentsvc.operations.startup).
    comments_api.cli.add_command(startup.report_problems(command))


def shared_redis(options: dict) -> redis.Redis | None:
    """The Redis that nodes share pages and recent writers through: the response cache's,
    else the rate limit's when that is a Redis server (``redis://``, ``rediss://``,
    ``redis+unix://``); None keeps both in each process."""
    if options["RESPONSE_CACHE_URL"]:
        return redis_client(options["RESPONSE_CACHE_URL"])
    storage = options["RATE_LIMIT_STORAGE"]
    if storage.startswith(("redis://", "rediss://")):
        return redis_client(storage)
    if storage.startswith("redis+unix://"):  # the limits library's name for a socket
        return redis_client("unix://" + storage[len("redis+unix://"):])
    return None


def response_cache(options: dict, shared: redis.Redis | None) -> PageCache | None:
    """Rendered pages in Redis (RESPONSE_CACHE_URL), else in this worker; None when
    RESPONSE_CACHE_MB is 0."""
    if not options["RESPONSE_CACHE_MB"]:
        return None
    if options["RESPONSE_CACHE_URL"]:
        return RedisResponseCache(shared, max_body_bytes=MAX_SHARED_BODY)
    return ResponseCache(options["RESPONSE_CACHE_MB"] * 2**20)


# The largest page kept in Redis (a page of 100 comments with their replies is far less).
MAX_SHARED_BODY = 2**20


# Where the package's default avatar is served: under every mount's /api/static/, and
# standalone also at the app's own /static/ (the DEFAULT_AVATAR setting's default URL).
DEFAULT_AVATAR_FILE = "img/default-avatar.png"


def default_avatar_config(app: Flask, url_prefix: str | None) -> dict:
    """The app's config, its default avatar pointed at an image that is really served.

    The setting's default, /static/img/default-avatar.png, is the package's image when
    the app serves the package's static folder at /static (the standalone app). A host
    site's /static is its own, so there the default becomes this mount's copy:

        url_prefix="/community" -> /community/api/static/img/default-avatar.png

    A host that sets COMMENTSVC_DEFAULT_AVATAR gets exactly what it set.
    """
    key = settings.BY_NAME["DEFAULT_AVATAR"].key
    serves_package_static = (
        app.static_url_path == "/static" and app.static_folder is not None
        and Path(app.static_folder).resolve() == Path(comments_api.static_folder).resolve())
    if key in app.config or serves_package_static:
        return app.config
    own = (url_prefix or "").rstrip("/") + "/api/static/" + DEFAULT_AVATAR_FILE
    return {**app.config, key: own}


@comments_api.record_once
def _set_up(state: BlueprintSetupState) -> None:
    """Check the settings once; scope JSON errors, request logs and metrics to this
    mount's /api/ prefix."""
    options = settings.options_for(default_avatar_config(state.app, state.url_prefix))
    shared = shared_redis(options)
    options["RESPONSE_CACHE"] = response_cache(options, shared)
    replicas.set_up(options, shared)
    options["QUERY_SCHEMA"] = ListQuerySchema(content_types=options["CONTENT_TYPES"])
    options["NEW_COMMENT_SCHEMA"] = NewCommentSchema(
        content_types=options["CONTENT_TYPES"], max_body_length=options["MAX_BODY_LENGTH"])
    options["READ_FLAG_SCHEMA"] = ReadFlagSchema()
    options["POST_LIMITER"] = PostRateLimit(options["POST_RATE_LIMIT"],
                                            options["RATE_LIMIT_STORAGE"])
    options["IDEMPOTENCY_PURGE"] = idempotency.PurgeSchedule(
        options["IDEMPOTENCY_PURGE_SECONDS"], options["IDEMPOTENCY_RETENTION_HOURS"])
    state.app.extensions["commentsvc"] = options
    api_prefix = (state.url_prefix or "").rstrip("/") + "/api/"
    install_error_handler(state.app, api_prefix)
    request_log.observe(state.app, api_prefix)  # one log line and metrics per request
