"""Who is asking, as a view needs it: the signed-in user or None, or 401 for a write."""

from __future__ import annotations

from flask import Request, current_app

from commentsvc.settings import Settings
from commentsvc.storage.engine import get_engine
from commentsvc.web import auth, browser_session
from commentsvc.web.exceptions import NotAuthenticated


def viewer_of(req: Request, settings: Settings, browser_sign_in: bool) -> auth.Viewer | None:
    """The signed-in user, if any: by token, by the standalone sign-in cookie, or by the
    host site's function when mounted.

    A request with neither credentials nor a host function costs nothing here.
    """
    loader = settings.current_user
    cookie = browser_session.signed_cookie(req, current_app) if browser_sign_in else None
    if loader is None and cookie is None and "Authorization" not in req.headers:
        return None
    return auth.current_viewer(req, get_engine(), loader, cookie)


def signed_in(req: Request, settings: Settings, browser_sign_in: bool) -> auth.Viewer:
    """The signed-in user; 401 with a WWW-Authenticate challenge when there is none."""
    viewer = viewer_of(req, settings, browser_sign_in)
    if viewer is None:
        raise NotAuthenticated(headers={"WWW-Authenticate": auth.CHALLENGE})
    return viewer
