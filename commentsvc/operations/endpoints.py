"""The blueprint of what operators and their tools ask: /healthz, /readyz and /metrics.

Apart from ``comments_api`` so that a host site decides whether and where to expose them:

    app.register_blueprint(comments_api, url_prefix="/community")
    app.register_blueprint(ops_api, url_prefix="/community")   # optional

The standalone app registers it at the root. The comments blueprint is logged and counted
wherever it is mounted, with or without this one; this one only makes the figures
scrapable and is logged and counted the same way.
"""

from __future__ import annotations

from flask import Blueprint, Flask, Response, current_app
from flask.blueprints import BlueprintSetupState

from commentsvc.operations import health, metrics, request_log
from commentsvc.web.on_duty import serve_on_duty

ops_api = Blueprint("commentsvc_ops", __name__)
serve_on_duty(ops_api)  # /readyz reads the database: with the service's deadline


def metrics_view() -> Response:
    """The app's metrics in Prometheus' text format."""
    return metrics.exposition(current_app._get_current_object())  # type: ignore[attr-defined]


# GET and HEAD only (no automatic OPTIONS): what the OpenAPI document and Allow say.
for _path, _endpoint, _view in (("/healthz", "healthz", health.healthz),
                                ("/readyz", "readyz", health.readyz),
                                ("/metrics", "metrics", metrics_view)):
    ops_api.add_url_rule(_path, endpoint=_endpoint, view_func=_view, methods=["GET"],
                         provide_automatic_options=False)


@ops_api.record
def _set_up(state: BlueprintSetupState) -> None:
    """Log and count the ops routes under this mount's prefix."""
    app = state.app
    assert isinstance(app, Flask)  # flask's Blueprint is registered in a Flask app
    prefix = (state.url_prefix or "").rstrip("/")
    for path in ("/healthz", "/readyz", "/metrics"):
        request_log.observe(app, prefix + path)
