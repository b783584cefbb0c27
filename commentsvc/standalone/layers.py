"""The WSGI layers in front of the standalone app, outermost first: the forwarded headers
of trusted proxies (web.forwarding), then the fast lane for cached list pages
(web.fast_lane), which must see the request as the proxies' headers made it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from commentsvc.web import forwarding
from commentsvc.web.fast_lane import FastLane

if TYPE_CHECKING:
    from flask import Flask

    from commentsvc.service import CommentService


def install(app: Flask, service: CommentService) -> None:
    """Put the layers around ``app.wsgi_app`` (Flask's middleware idiom)."""
    settings = service.settings
    if settings.fast_lane:
        app.wsgi_app = FastLane(app, app.wsgi_app, service)  # type: ignore[method-assign]
    app.wsgi_app = forwarding.trusting(  # type: ignore[method-assign,assignment]
        app.wsgi_app, settings.trusted_proxies)
