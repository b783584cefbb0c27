"""Signing webhooks, and checking them where they arrive (docs/EVENTS.md).

Every webhook the deliverer POSTs carries::

    Commentsvc-Event-Id: 3f1b6c1e-...        the event's id: drop a repeat you already have
    Commentsvc-Event-Type: comment.created
    Commentsvc-Signature: t=1764095400,v1=5f2c...

``v1`` is the hex HMAC-SHA256, keyed with the shared secret, of the timestamp, a full stop
and the raw body (``b"1764095400." + body``), as Stripe signs its webhooks. Signing the
timestamp with the body lets a receiver refuse an old message replayed later; there may
be several ``v1`` values (one per secret while a secret is being replaced).

A receiving Flask site checks a webhook with ``verify``, which needs nothing but the
standard library::

    from commentsvc.webhooks import InvalidSignature, verify

    @app.post("/hooks/comments")
    def comment_event():
        try:
            event = verify(SECRET, request.headers, request.get_data())
        except InvalidSignature:
            return "", 400
        ...  # event["type"], event["data"]; answer 2xx quickly, or it is sent again
        return "", 204
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Iterable, Mapping
from typing import Any

EVENT_ID_HEADER = "Commentsvc-Event-Id"
EVENT_TYPE_HEADER = "Commentsvc-Event-Type"
SIGNATURE_HEADER = "Commentsvc-Signature"
ATTEMPT_HEADER = "Commentsvc-Delivery-Attempt"
SCHEME = "v1"
# How far a signature's timestamp may be from the receiver's clock (seconds), either way.
DEFAULT_TOLERANCE = 300


class InvalidSignature(ValueError):
    """The webhook is not one the holder of the secret sent just now: refuse it."""


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The hex HMAC-SHA256 of ``timestamp.body`` under ``secret``.

    >>> signature("s" * 24, 1764095400, b'{"id":"1"}')[:16]
    'fbe0c11804e14aca'
    """
    message = str(int(timestamp)).encode("ascii") + b"." + body
    return hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()


def signature_header(secrets: str | Iterable[str], timestamp: int, body: bytes) -> str:
    """The Commentsvc-Signature value: the timestamp, then a ``v1`` per secret."""
    keys = [secrets] if isinstance(secrets, str) else list(secrets)
    return ",".join([f"t={int(timestamp)}",
                     *(f"{SCHEME}={signature(key, timestamp, body)}" for key in keys)])


def headers_for(secret: str, event_id: str, event_type: str, body: bytes, attempt: int,
                timestamp: int | None = None) -> dict[str, str]:
    """Every header of one delivery attempt of an event."""
    now = int(time.time()) if timestamp is None else timestamp
    return {
        "Content-Type": "application/json",
        EVENT_ID_HEADER: event_id,
        EVENT_TYPE_HEADER: event_type,
        ATTEMPT_HEADER: str(attempt),
        SIGNATURE_HEADER: signature_header(secret, now, body),
    }


def verify(secret: str | Iterable[str], headers: Mapping[str, str], body: bytes | str, *,
           tolerance: int = DEFAULT_TOLERANCE, now: float | None = None) -> dict[str, Any]:
    """The event a webhook carries, once its signature is proven; InvalidSignature if it
    is missing, made with another secret, over another body, or older (or newer) than
    ``tolerance`` seconds, or if Commentsvc-Event-Id or Commentsvc-Event-Type, when
    present, name another event than the body. ``secret`` may be several secrets (any
    one may have signed). Only the body is signed: trust what it says, not the headers.

    ``headers`` is the request's headers (Flask's ``request.headers``, or any mapping; names
    are matched without regard to case); ``body`` the raw body, exactly as received.
    """
    raw = body.encode("utf-8") if isinstance(body, str) else bytes(body)
    timestamp, offered = _parsed(_header(headers, SIGNATURE_HEADER))
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance:
        raise InvalidSignature(f"the signature's timestamp is more than {tolerance} s "
                               "from now: an old message sent again, or a wrong clock")
    keys = [secret] if isinstance(secret, str) else list(secret)
    expected = [signature(key, timestamp, raw) for key in keys if key]
    if not any(hmac.compare_digest(mine, theirs) for mine in expected for theirs in offered):
        raise InvalidSignature("no signature matches the body under the secret")
    try:
        event: dict[str, Any] = json.loads(raw)
    except ValueError as exc:
        raise InvalidSignature("the body is not JSON") from exc
    if not isinstance(event, dict):
        raise InvalidSignature("the body is not an event")
    for name, member in ((EVENT_ID_HEADER, "id"), (EVENT_TYPE_HEADER, "type")):
        named = _header(headers, name, required=False)
        if named is not None and event.get(member) != named:
            raise InvalidSignature(f"the body is not the event the headers name ({name})")
    return event


def _header(headers: Mapping[str, str], name: str, required: bool = True) -> str | None:
    value = headers.get(name)
    if value is None:
        lowered = name.lower()
        value = next((v for k, v in headers.items() if k.lower() == lowered), None)
    if value is None and required:
        raise InvalidSignature(f"no {name} header")
    return value


def _parsed(header: str | None) -> tuple[int, list[str]]:
    """The timestamp and the v1 signatures of a Commentsvc-Signature value."""
    timestamp: int | None = None
    offered: list[str] = []
    for part in (header or "").split(","):
        name, _, value = part.strip().partition("=")
        if name == "t" and value.isdigit():
            timestamp = int(value)
        elif name == SCHEME and value:
            offered.append(value)
    if timestamp is None or not offered:
        raise InvalidSignature(f"{SIGNATURE_HEADER} needs t=<seconds> and {SCHEME}=<hex>")
    return timestamp, offered
