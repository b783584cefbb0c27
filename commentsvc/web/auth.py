"""Who is asking: a token's user standalone (by header, or by the browser's sign-in
cookie), or the host site's signed-in user.

Keys are 40 hex characters from ``secrets`` (160 random bits). Only their SHA-256 digest
is stored: with that much entropy a fast unsalted hash cannot be reversed or guessed,
and lookup stays one primary-key read.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from flask import Request, current_app
from sqlalchemy.engine import Connection, Engine

from commentsvc.rules.identifiers import INT64_MAX
from commentsvc.storage.queries import auth as sql
from commentsvc.web import current
from commentsvc.web.exceptions import APIError, PermissionDenied

if TYPE_CHECKING:
    from commentsvc.web.known_keys import KnownKeys

CHALLENGE = 'Token realm="api"'


@dataclass(frozen=True)
class Viewer:
    """The signed-in user. ``csrf_token`` is set when the sign-in cookie signed them in:
    their unsafe requests must then carry it (browser_session). ``unconfirmed_key`` is
    set when a key this process knew signed them in without being read for this request
    (web.known_keys): the digest that must still be confirmed."""

    id: int
    is_staff: bool = False
    username: str | None = None
    avatar: str | None = None
    csrf_token: str | None = None
    unconfirmed_key: str | None = None


class AuthenticationFailed(APIError):
    status = 401
    default_detail = "Invalid token."

    def __init__(self, detail: str | None = None):
        super().__init__(detail, headers={"WWW-Authenticate": CHALLENGE})


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def new_key() -> str:
    return secrets.token_hex(20)


def current_viewer(req: Request, engine: Engine, loader: Callable[[], Any] | None,
                   signed_cookie: tuple[str, str] | None = None,
                   known: KnownKeys | None = None) -> Viewer | None:
    """The user of ``Authorization: Token <key>``; without a Token header, the user of
    the sign-in cookie's (session id, CSRF token), else the host's. Given ``known``
    (a post's), a key known there is not read, and the viewer is unconfirmed
    (web.known_keys); one read here is remembered there."""
    scheme, _, credentials = req.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "token":
        words = credentials.split()
        if not words:
            raise AuthenticationFailed("Invalid token header. No credentials provided.")
        if len(words) > 1:
            raise AuthenticationFailed(
                "Invalid token header. Token string should not contain spaces.")
        digest = hash_key(words[0])
        viewer = known.get(digest) if known is not None else None
        if viewer is not None:
            return viewer
        viewer = viewer_by_digest(engine, digest)
        if viewer is None:
            raise AuthenticationFailed()
        if known is not None:
            known.keep(digest, viewer)
        return viewer
    if signed_cookie is not None:
        session_id, csrf_token = signed_cookie
        return viewer_by_session(engine, session_id, csrf_token)  # signed out: nobody
    return _host_user(loader() if loader is not None else None)


def viewer_by_digest(engine: Engine, digest: str) -> Viewer | None:
    """The user a key (by its digest) signs in, or None when no such key is kept. As
    every signed-in request reads it: on PostgreSQL in one round trip, over the connection
    the list reads keep (storage.counters)."""
    row = current.of(current_app).counter_readers.for_engine(engine).read_viewer(digest)
    if row is None:
        return None
    user_id, is_staff, username, avatar = row
    return Viewer(user_id, bool(is_staff), username, avatar)


def viewer_by_session(engine: Engine, session_id: str, csrf_token: str) -> Viewer | None:
    """The user a browser session signs in, or None once it was signed out of or its key
    revoked: the session is kept in the database (web.browser_session), so a copy of the
    cookie saved before sign-out signs in nobody, in every process."""
    row = current.of(current_app).counter_readers.for_engine(engine).read_session_viewer(
        hash_key(session_id))
    if row is None:
        return None
    user_id, is_staff, username, avatar = row
    return Viewer(user_id, bool(is_staff), username, avatar, csrf_token)


def _host_user(user: Any) -> Viewer | None:
    """A host's user object (Flask-Login's, or any with ``id``) as a Viewer."""
    if user is None or getattr(user, "is_authenticated", True) is False:
        return None
    return Viewer(int(user.id), bool(getattr(user, "is_staff", False)),
                  getattr(user, "username", None), getattr(user, "avatar", None))


# Why a host's user the service has no row of, and no name for, may not write.
UNKNOWN_ACCOUNT = "Your account is not known to the comment service."


def storable_id(viewer: Viewer) -> bool:
    """Whether a host's user has an id a row can hold (1..2**63-1); one without may read,
    but not write (UNKNOWN_ACCOUNT)."""
    return 1 <= viewer.id <= INT64_MAX


def recordable_name(viewer: Viewer) -> str | None:
    """The name a host's user the service has no row of is recorded by, or None when it
    cannot be: none, empty (its author address would be ``/user//``) or holding a NUL (no
    text column stores one)."""
    name = viewer.username
    return name if name and "\x00" not in name else None


def ensure_user(conn: Connection, viewer: Viewer) -> None:
    """Record a host's user on their first write (never changing an existing row)."""
    if conn.execute(sql.USER_EXISTS, {"id": viewer.id}).first() is not None:
        return
    name = recordable_name(viewer)
    if name is None:
        raise PermissionDenied(UNKNOWN_ACCOUNT)
    conn.execute(sql.ADD_USER_IF_MISSING,
                 {"id": viewer.id, "username": name, "avatar": viewer.avatar})


class UnknownUser(LookupError):
    """No user has this id."""


def create_token(conn: Connection, user_id: int) -> str:
    """A new key for ``user_id``, returned once; only its digest is stored."""
    if conn.execute(sql.USER_EXISTS, {"id": user_id}).first() is None:
        raise UnknownUser(user_id)
    key = new_key()
    conn.execute(sql.ADD_TOKEN, {"digest": hash_key(key), "user_id": user_id,
                                 "created": datetime.now(UTC).replace(tzinfo=None)})
    return key


def revoke_token(conn: Connection, key: str) -> bool:
    """Delete a key; False if there was no such key."""
    return conn.execute(sql.REVOKE_TOKEN, {"digest": hash_key(key)}).rowcount > 0


def set_staff(conn: Connection, user_id: int, on: bool) -> bool:
    """Grant or remove staff; False if there is no such user."""
    return conn.execute(sql.SET_STAFF, {"id": user_id, "on": on}).rowcount > 0
