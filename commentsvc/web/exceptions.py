"""The API's one error type and its kinds: a status, a default detail, optional headers.

Raised anywhere (a view, the store's checks, the writers' lock); web.errors turns each
into ``{"detail": ...}``. This module imports nothing of the package, so any layer may
raise them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import exc as sa_exc

if TYPE_CHECKING:
    from marshmallow import Schema, ValidationError

# Raised by the driver or the pool when the database cannot be reached or went away.
DATABASE_DOWN = (
    sa_exc.OperationalError,
    sa_exc.InterfaceError,
    sa_exc.DisconnectionError,
    sa_exc.TimeoutError,
)


class APIError(Exception):
    """An answer other than success: a status, a detail and optional headers."""

    status = 400
    default_detail: Any = "Bad request."

    def __init__(self, detail: Any = None, status: int | None = None,
                 headers: dict[str, str] | None = None):
        super().__init__(detail)
        self.detail = self.default_detail if detail is None else detail
        self.status = status or self.status
        self.headers = headers or {}


class ValidationFailed(APIError):
    """Bad request parameters or fields: ``detail`` maps each field to its messages."""

    @classmethod
    def of(cls, schema: Schema, exc: ValidationError) -> ValidationFailed:
        """A schema's refusal, its fields in the order the schema declares them (as Django
        REST Framework lists them), not in the order marshmallow's passes found them (its
        field validators run after every field's type check)."""
        messages = exc.messages
        if isinstance(messages, dict):
            rank = {name: i for i, name in enumerate(schema.fields)}
            messages = dict(sorted(messages.items(),
                                   key=lambda item: rank.get(item[0], len(rank))))
        return cls(messages)


class NotFound(APIError):
    status = 404
    default_detail = "Not found."


class NotAuthenticated(APIError):
    status = 401
    default_detail = "Authentication credentials were not provided."


class PermissionDenied(APIError):
    status = 403
    default_detail = "You do not have permission to perform this action."


class NotAcceptable(APIError):
    status = 406
    default_detail = "Could not satisfy the request Accept header."


class TooLarge(APIError):
    status = 413
    default_detail = "The request body is too large."


class UnreadableBody(APIError):
    """400: the server could not read the body as its framing says (malformed chunks)."""

    default_detail = "The request body could not be read."


class LengthRequired(APIError):
    """A body sent without a length that the WSGI server does not end for the app."""

    status = 411
    default_detail = "A request body needs a Content-Length header here."


class UnsupportedMediaType(APIError):
    status = 415


class Throttled(APIError):
    """Too many posts: 429 with the seconds to wait, in the body and in Retry-After."""

    status = 429

    def __init__(self, wait_seconds: int):
        super().__init__(f"Request was throttled. Expected available in {wait_seconds} "
                         f"second{'s' if wait_seconds != 1 else ''}.",
                         headers={"Retry-After": str(wait_seconds)})


class DatabaseUnavailable(APIError):
    status = 503
    default_detail = "The database is unavailable. Try again shortly."
