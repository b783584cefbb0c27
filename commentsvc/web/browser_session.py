"""The standalone browser sign-in: a key pasted once becomes a signed session cookie, and
every unsafe request that cookie signs in must carry the session's CSRF token.

The cookie (Flask's session, signed with the app's secret key) holds a random session id
and a random CSRF token, never the key. The session lives in the database
(commentsvc_browser_session: the id's SHA-256 digest and the key's), so every worker and
machine sees it end: sign-out deletes its row, and a saved copy of the cookie then signs
in nobody, as Django's logout flushes its server-side session. Each request with the
cookie reads the session's user joined to its key, so revoking the key
(``commentsvc revoke-token``) signs every browser of it out too. A cookie made before
sessions were kept (a key digest, no session id) signs in nobody: sign in again. A request
with ``Authorization: Token`` is signed in by its header and needs no CSRF token: a
browser never sends that header on its own. Mounted in a host site, none of this applies:
the host's login (COMMENTSVC_CURRENT_USER) is in charge.
"""

from __future__ import annotations

import hmac
import secrets
from datetime import UTC, datetime
from typing import Any

from flask import Flask, Request, Response, current_app, session
from flask.sessions import SecureCookieSession, SecureCookieSessionInterface, SessionMixin
from sqlalchemy.engine import Connection, Engine

from commentsvc.storage.engine import writing
from commentsvc.storage.queries import auth as sql
from commentsvc.web import current
from commentsvc.web.auth import Viewer, hash_key
from commentsvc.web.exceptions import PermissionDenied
from commentsvc.web.request_body import read_fields

COOKIE_NAME = "commentsvc_session"  # apart from another app's "session" on the same host
SESSION_ID = "commentsvc_session_id"
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
    """The (session id, CSRF token) of the request's sign-in cookie, or None (a cookie
    without a session id too: one made before sessions were kept in the database).

    The session is only opened when the cookie came with the request, so an answer to a
    request without it never gains ``Vary: Cookie``.
    """
    if not _sent_cookie(req, app.config["SESSION_COOKIE_NAME"]):
        return None
    session_id, token = session.get(SESSION_ID), session.get(CSRF)
    if not (isinstance(session_id, str) and isinstance(token, str)):
        return None
    return session_id, token


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


def sign_in(engine: Engine, key_digest: str) -> None:
    """Start a fresh session for the key (by its digest): a new session id, kept in the
    database, and a new CSRF token, nothing carried over. The browser's previous session,
    if any, ends; so do every browser's sessions older than a cookie may live, which keeps
    the table as small as the sign-ins of that long."""
    session_id = secrets.token_urlsafe(32)
    now = datetime.now(UTC).replace(tzinfo=None)
    with writing(engine) as conn:
        _end(conn, session.get(SESSION_ID))
        conn.execute(sql.FORGET_OLD_SESSIONS,
                     {"oldest": now - current_app.permanent_session_lifetime})
        conn.execute(sql.START_SESSION, {"digest": hash_key(session_id),
                                         "key_digest": key_digest, "created": now})
    session.clear()
    session[SESSION_ID] = session_id
    session[CSRF] = secrets.token_urlsafe(32)


def sign_out(engine: Engine) -> None:
    """End the browser's session in the database, so no copy of its cookie signs anyone
    in again, in any process; then empty the cookie."""
    session_id = session.get(SESSION_ID)
    if isinstance(session_id, str):
        with writing(engine) as conn:
            _end(conn, session_id)
    session.clear()


def _end(conn: Connection, session_id: Any) -> None:
    """Delete the session of ``session_id`` (the cookie's; nothing if it holds none)."""
    if isinstance(session_id, str):
        conn.execute(sql.END_SESSION, {"digest": hash_key(session_id)})


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
