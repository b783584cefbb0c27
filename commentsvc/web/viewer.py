"""Who is asking, as a view needs it: the signed-in user or None, or 401 for a write."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from flask import Request, current_app

from commentsvc.settings import Settings
from commentsvc.storage.engine import get_engine
from commentsvc.web import auth, browser_session, idempotency, known_keys
from commentsvc.web.exceptions import APIError, NotAuthenticated, PermissionDenied
from commentsvc.web.request_body import FORM_TYPES

if TYPE_CHECKING:
    from commentsvc.service import CommentService
    from commentsvc.web.known_keys import KnownKeys

T = TypeVar("T")


def viewer_of(req: Request, settings: Settings, browser_sign_in: bool,
              known: KnownKeys | None = None) -> auth.Viewer | None:
    """The signed-in user, if any: by token, by the standalone sign-in cookie, or by the
    host site's function when mounted. Given ``known`` (a post's), a key known there is
    not read (web.known_keys).

    A request with neither credentials nor a host function costs nothing here.
    """
    loader = settings.current_user
    cookie = browser_session.signed_cookie(req, current_app) if browser_sign_in else None
    if loader is None and cookie is None and "Authorization" not in req.headers:
        return None
    return auth.current_viewer(req, get_engine(), loader, cookie, known)


def signed_in(req: Request, settings: Settings, browser_sign_in: bool,
              known: KnownKeys | None = None) -> auth.Viewer:
    """The signed-in user; 401 with a WWW-Authenticate challenge when there is none."""
    viewer = viewer_of(req, settings, browser_sign_in, known)
    if viewer is None:
        raise NotAuthenticated(headers={"WWW-Authenticate": auth.CHALLENGE})
    if not auth.storable_id(viewer):  # a host's user whose id no row holds
        raise PermissionDenied(auth.UNKNOWN_ACCOUNT)
    return viewer


def posted_as(req: Request, service: CommentService,
              write: Callable[[Request, auth.Viewer, CommentService], T]
              ) -> tuple[auth.Viewer, T]:
    """A post written by ``write`` as its signed-in user, and that user.

    A key known to this process is not read first when the post names no
    Idempotency-Key (none in a header, and no form body, which may name one): its batch
    confirms the key (web.known_keys). A refusal (4xx) of such a post confirms the key
    before it is answered, so a revoked key is answered 401, as if read at the start.
    """
    known = known_keys.of(current_app)
    keyless = idempotency.HEADER not in req.headers and req.mimetype not in FORM_TYPES
    viewer = signed_in(req, service.settings, service.browser_sign_in,
                       known if keyless else None)
    try:
        return viewer, write(req, viewer, service)
    except APIError as exc:
        if viewer.unconfirmed_key is None or exc.status >= 500:
            raise
        confirm(viewer, known)  # 401 if the key was revoked
        raise


def confirm(viewer: auth.Viewer, known: KnownKeys) -> None:
    """Read an unconfirmed viewer's key now (web.known_keys): 401 if it is no longer
    kept (and it is forgotten); kept anew if it is."""
    digest = viewer.unconfirmed_key
    if digest is None:
        return
    known.forget(digest)
    current = auth.viewer_by_digest(get_engine(), digest)
    if current is None:
        raise auth.AuthenticationFailed()
    known.keep(digest, current)
