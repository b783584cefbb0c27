"""The service of the app handling the current request or command, typed.

Only the HTTP face and the commands look it up; what they call is handed what it needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from flask import Flask, current_app

if TYPE_CHECKING:  # the service module mounts the blueprint, whose views import this one
    from commentsvc.service import CommentService

EXTENSION = "commentsvc"


def service() -> CommentService:
    """The ``CommentService`` of the current app."""
    return of(current_app)


def of(app: Flask) -> CommentService:
    """The ``CommentService`` mounted in ``app``."""
    return cast("CommentService", app.extensions[EXTENSION])
