"""The standalone browser sign-in: a key pasted once becomes a signed session cookie, and
every unsafe request that cookie signs in must carry the session's CSRF token.

The cookie (Flask's session, signed with the app's secret key) holds the SHA-256 digest
of the key, never the key, and a random CSRF token. Each request looks the digest up, so
revoking the key (``commentsvc revoke-token``) signs every browser of it out. A request
with ``Authorization: Token`` is signed in by its header and needs no CSRF token: a
browser never sends that header on its own. Mounted in a host site, none of this applies:
the host's login (COMMENTSVC_CURRENT_USER) is in charge.
"""

from __future__ import annotations

import hmac
import secrets
from typing import Any

from flask import Flask, Request, Response, session
from flask.sessions import SecureCookieSession, SecureCookieSessionInterface, SessionMixin

from commentsvc.web import current
from commentsvc.web.auth import Viewer
from commentsvc.web.exceptions import PermissionDenied
from commentsvc.web.request_body import read_fields

COOKIE_NAME = "commentsvc_session"  # apart from another app's "session" on the same host
DIGEST = "commentsvc_key_digest"
CSRF = "commentsvc_csrf"
CSRF_HEADER = "X-CSRFToken"
CSRF_FIELD = "csrf_token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class CSRFFailed(PermissionDenied):
    """An unsafe request signed in by the cookie without the session's token (403)."""

    def __init__(self, reason: str):
        super().__init__(f"CSRF Failed: {reason}")


class SessionInterface(SecureCookieSessionInterface):
    """Flask's signed-cookie sessions, the cookie marked Secure when the request came
    over https (as the trusted proxy says, see forwarding), so that plain-http local use
    still works."""

    def open_session(self, app: Flask, request: Request) -> SecureCookieSession | None:
        """A request without the cookie gets an empty session straight away: Flask's own
        would first build the cookie's signer (itsdangerous), about a tenth of what a
        whole page request costs, only to find nothing to check. Without a Cookie header
        at all, the cookies are not even parsed."""
        if app.secret_key and not _sent_cookie(request, self.get_cookie_name(app)):
            return self.session_class()
        return super().open_session(app, request)

    def save_session(self, app: Flask, session: SessionMixin, response: Response) -> None:
        """Nothing to do for a session no one touched that holds nothing (every request
        without the cookie): Flask's own would first work out every cookie setting, only
        to find there is no cookie to set, delete or vary on."""
        if not session and not session.modified and not session.accessed:
            return
        super().save_session(app, session, response)

    def get_cookie_secure(self, app: Flask) -> bool:
        from flask import request

        return bool(app.config["SESSION_COOKIE_SECURE"]) or request.is_secure


def enable(app: Flask, secret_key: str) -> None:
    """Turn browser sign-in on for the standalone ``app``."""
    app.secret_key = secret_key
    app.session_interface = SessionInterface()
    app.config.update(SESSION_COOKIE_NAME=COOKIE_NAME, SESSION_COOKIE_HTTPONLY=True,
                      SESSION_COOKIE_SAMESITE="Lax")
    current.of(app).browser_sign_in = True


def signed_cookie(req: Request, app: Flask) -> tuple[str, str] | None:
    """The (key digest, CSRF token) of the request's sign-in cookie, or None.

    The session is only opened when the cookie came with the request, so an answer to a
    request without it never gains ``Vary: Cookie``.
    """
    if not _sent_cookie(req, app.config["SESSION_COOKIE_NAME"]):
        return None
    digest, token = session.get(DIGEST), session.get(CSRF)
    if not (isinstance(digest, str) and isinstance(token, str)):
        return None
    return digest, token


def _sent_cookie(req: Request, name: str) -> bool:
    """Whether the request came with the cookie ``name``, not empty. Most API requests
    send no Cookie header at all, and asking ``req.cookies`` would first parse an empty
    one into a dictionary."""
    return bool(req.environ.get("HTTP_COOKIE")) and bool(req.cookies.get(name))


def csrf_token() -> str:
    """This session's CSRF token, made when the session has none (the sign-in form)."""
    token = session.get(CSRF)
    if not isinstance(token, str):
        token = session[CSRF] = secrets.token_urlsafe(32)
    return token


def sign_in(digest: str) -> None:
    """Start a fresh session for the key: a new CSRF token, nothing carried over."""
    session.clear()
    session[DIGEST] = digest
    session[CSRF] = secrets.token_urlsafe(32)


def check_token(req: Request, expected: str | None, fields: dict[str, Any]) -> None:
    """The request's token (header, else the ``csrf_token`` field) must be ``expected``."""
    sent = req.headers.get(CSRF_HEADER)
    if sent is None:
        sent = fields.get(CSRF_FIELD)
    if not sent:
        raise CSRFFailed("CSRF token missing.")
    if not (isinstance(sent, str) and expected
            and hmac.compare_digest(sent.encode("utf-8", "surrogatepass"),
                                    expected.encode("utf-8"))):
        raise CSRFFailed("CSRF token incorrect.")


def checked_body(req: Request, viewer: Viewer, max_bytes: int) -> dict[str, Any]:
    """The write's fields (JSON or form, at most ``max_bytes``), its CSRF token checked
    when the browser's cookie signed it in."""
    return checked_fields(req, viewer, read_fields(req, max_bytes))


def checked_fields(req: Request, viewer: Viewer, fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` of an unsafe request, its CSRF token checked and removed when the
    cookie signed the viewer in; a token-signed request's fields as they came."""
    if viewer.csrf_token is None or req.method in SAFE_METHODS:
        return fields
    check_token(req, viewer.csrf_token, fields)
    return {name: value for name, value in fields.items() if name != CSRF_FIELD}
