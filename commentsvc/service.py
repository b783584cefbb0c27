"""The Flask extension: ``CommentService(app)``, or ``service.init_app(app)``, mounts the
API and holds everything one app's requests share, typed.

    service = CommentService()
    service.init_app(app, url_prefix="/community")   # or: CommentService(app)

Registering the blueprint directly (``app.register_blueprint(comments_api, ...)``) does
the same: the first registration in an app builds its service. Either way the app's
``COMMENTSVC_*`` settings are checked once, into a frozen ``Settings``, and the live parts
(page cache, read routing, posting limit, schemas, counter readers) are made from them.
Views find the service with ``CommentService.current()``; data-level code is handed what
it needs as arguments.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from flask import Flask, current_app
from flask.blueprints import BlueprintSetupState

from commentsvc.rules.schemas import ListQuerySchema, NewCommentSchema, ReadFlagSchema
from commentsvc.settings import BY_NAME, Settings
from commentsvc.storage import replicas
from commentsvc.storage.page_cache import PageCache, RecentlyCached, page_cache, shared_redis
from commentsvc.web.blueprint import comments_api, scope_to_path, scope_to_prefix
from commentsvc.web.current import EXTENSION, of
from commentsvc.web.idempotency import PurgeSchedule
from commentsvc.web.paginator import PageNumberPagination
from commentsvc.web.rate_limit import PostRateLimit

if TYPE_CHECKING:
    from commentsvc.storage.counters import CounterReaders

# The package's stylesheet, script and default avatar (the standalone app's /static too).
STATIC_FOLDER = comments_api.static_folder

# Where the package's default avatar is served: under every mount's /api/static/, and
# standalone also at the app's own /static/ (the DEFAULT_AVATAR setting's default URL).
DEFAULT_AVATAR_FILE = "img/default-avatar.png"
CACHED_PAGES_KEPT = 10_000


class CommentService:
    """One app's comment service: its settings and the live parts its requests share."""

    settings: Settings
    page_cache: PageCache | None
    # The pages this process cached lately: whether a list request reads its counter row
    # first, hoping for a cached page (web.reads).
    cached_pages: RecentlyCached
    reads: replicas.ReadRouting
    post_limiter: PostRateLimit
    idempotency_purge: PurgeSchedule
    query_schema: ListQuerySchema
    paginator: PageNumberPagination
    new_comment_schema: NewCommentSchema
    read_flag_schema: ReadFlagSchema
    # Standalone only: the sign-in page and its cookie (web.browser_session.enable).
    browser_sign_in: bool
    # The OpenAPI document as served, by script root (built on first request).
    openapi_documents: dict[str, bytes]

    def __init__(self, app: Flask | None = None, *, url_prefix: str | None = None) -> None:
        self.app: Flask | None = None
        if app is not None:
            self.init_app(app, url_prefix=url_prefix)

    def init_app(self, app: Flask, *, url_prefix: str | None = None) -> None:
        """Mount the API in ``app`` (under ``url_prefix``) with this object as its service."""
        if self.app is not None and self.app is not app:
            raise RuntimeError("a CommentService serves one app; make one per app")
        self.app = app
        app.extensions[EXTENSION] = self
        app.register_blueprint(comments_api, url_prefix=url_prefix)

    @staticmethod
    def current() -> CommentService:
        """The service of the app handling the current request or command."""
        return of(current_app)

    def set_up(self, app: Flask, url_prefix: str | None) -> None:
        """Check the settings once, make the live parts, and scope JSON errors, request
        logs and metrics to this mount's /api/ prefix."""
        self.app = app
        self.settings = Settings.from_config(default_avatar_config(app, url_prefix))
        shared = shared_redis(self.settings)
        self.page_cache = page_cache(self.settings, shared)
        self.cached_pages = RecentlyCached(CACHED_PAGES_KEPT)
        self.reads = replicas.ReadRouting.from_settings(self.settings, shared)
        self.post_limiter = PostRateLimit(self.settings.post_rate_limit,
                                          self.settings.rate_limit_storage)
        self.idempotency_purge = PurgeSchedule(
            self.settings.idempotency_purge_seconds, self.settings.idempotency_retention_hours,
            event_retention_hours=self.settings.event_retention_hours)
        self.query_schema = ListQuerySchema(content_types=self.settings.content_types)
        self.paginator = PageNumberPagination(self.query_schema, self.settings.page_size,
                                              self.settings.max_page_size)
        self.new_comment_schema = NewCommentSchema(
            content_types=self.settings.content_types,
            max_body_length=self.settings.max_body_length)
        self.read_flag_schema = ReadFlagSchema()
        self.browser_sign_in = False
        self.openapi_documents = {}
        app.extensions[EXTENSION] = self
        scope_to_prefix(app, url_prefix)

    @staticmethod
    def scope_to(app: Flask, prefix: str) -> None:
        """JSON errors, request logs and metrics for every path under ``prefix`` (the
        standalone app: "/", its whole self)."""
        scope_to_path(app, prefix)

    @property
    def counter_readers(self) -> CounterReaders:
        """The counter reader of each engine reads go to."""
        return self.reads.counter_readers

    @property
    def replicas(self) -> replicas.ReplicaRouter | None:
        """The replicas reads may go to, or None when there are none."""
        return self.reads.router


@comments_api.record_once
def _on_first_registration(state: BlueprintSetupState) -> None:
    """The blueprint registered in an app: its service (made now unless ``init_app``
    made it) is set up."""
    app = state.app
    assert isinstance(app, Flask)  # flask's Blueprint is registered in a Flask app
    service = app.extensions.get(EXTENSION)
    if not isinstance(service, CommentService):
        service = CommentService()
    service.set_up(app, state.url_prefix)


def default_avatar_config(app: Flask, url_prefix: str | None) -> dict[str, Any]:
    """The app's config, its default avatar pointed at an image that is really served.

    The setting's default, /static/img/default-avatar.png, is the package's image when
    the app serves the package's static folder at /static (the standalone app). A host
    site's /static is its own, so there the default becomes this mount's copy:

        url_prefix="/community" -> /community/api/static/img/default-avatar.png

    A host that sets COMMENTSVC_DEFAULT_AVATAR gets exactly what it set.
    """
    key = BY_NAME["DEFAULT_AVATAR"].key
    package_static = comments_api.static_folder
    serves_package_static = (
        app.static_url_path == "/static" and app.static_folder is not None
        and package_static is not None
        and Path(app.static_folder).resolve() == Path(package_static).resolve())
    if key in app.config or serves_package_static:
        return dict(app.config)
    own = (url_prefix or "").rstrip("/") + "/api/static/" + DEFAULT_AVATAR_FILE
    return {**app.config, key: own}
