"""Idempotency keys: a write sent again with the same key gets its first answer.

A client whose write got no answer (a connection reset) or a 503 cannot know whether it
was stored, and retrying blindly may store it twice. Sent with ``Idempotency-Key``, a
write keeps the key and its answer in the write's transaction, so the key exists exactly when
the write committed. A retry looks the key up inside the writers' lock, that is after the
first attempt has committed or rolled back: found, it gets the stored answer verbatim
(plus ``Idempotent-Replayed: true``) and nothing is written; not found, it writes.

Keys belong to a user. A key sent again with another method, path or body is refused
(422): it names another request. Keys are kept ``IDEMPOTENCY_RETENTION_HOURS``; each
process purges expired ones in bounded batches after a write's response has been sent
(``PurgeSchedule``), and ``purge-idempotency-keys`` purges them all.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from flask import Request, Response
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from commentsvc.storage import engine as db
from commentsvc.storage import outbox
from commentsvc.storage.queries import idempotency as sql
from commentsvc.web.exceptions import APIError
from commentsvc.web.request_body import FORM_TYPES

log = logging.getLogger("commentsvc")

HEADER = "Idempotency-Key"
FORM_FIELD = "idempotency_key"  # the browsable form's way to send it (a form body only)
REPLAYED = "Idempotent-Replayed"
MAX_LENGTH = 255
# Rows one scheduled purge deletes at most: a short transaction after a response.
PURGE_BATCH = 1000
INVALID = (f"{HEADER} must be 1 to {MAX_LENGTH} printable ASCII characters "
           "(space to tilde).")


class KeyReused(APIError):
    """The key was first used for another request (method, path or body)."""

    status = 422
    default_detail = (f"This {HEADER} was already used for a different request; "
                      "use a new key for a new request.")


class KeyInUse(APIError):
    """Another request with the key is being written: retry shortly for its answer."""

    status = 409
    default_detail = (f"A request with this {HEADER} is in progress; "
                      "retry it for its answer.")

    def __init__(self) -> None:
        super().__init__(headers={"Retry-After": "1"})


@dataclass(frozen=True, slots=True)
class Keyed:
    """A write sent with a key: whose, the key, and what the request was."""

    user_id: int
    key: str
    method: str
    target: str
    digest: str


@dataclass(frozen=True, slots=True)
class Stored:
    """The first answer of a keyed write, to be replayed."""

    status: int
    body: bytes
    location: str | None
    comment_id: int | None

    def headers(self) -> dict[str, str]:
        """The answer's own headers, marked as replayed."""
        location = {"Location": self.location} if self.location else {}
        return {**location, REPLAYED: "true"}

    def payload(self) -> Any:
        return orjson.loads(self.body) if self.body else None


def valid_key(value: str) -> bool:
    """1 to 255 characters from space to tilde."""
    return 0 < len(value) <= MAX_LENGTH and all(" " <= ch <= "~" for ch in value)


# A comma with the spaces and tabs around it, as between a header's values.
_COMMA = re.compile(r"[ \t]*,[ \t]*")


def joined(value: str) -> str:
    """A key as one value: a header sent twice reaches the app joined by "," (gunicorn) or
    ", " (Werkzeug's server), and one sent once may be written either way; as HTTP defines
    for a header's list of values, the white space around a comma does not count.

    >>> joined("a-1,b-2") == joined("a-1 ,  b-2") == "a-1, b-2"
    True
    """
    return _COMMA.sub(", ", value) if "," in value else value


def key_of(req: Request, fields: dict[str, Any] | None = None) -> str | None:
    """The request's key: the header, or for a form body the ``idempotency_key`` field
    (taken out of ``fields``); None without one. 400 if it is malformed, or given both
    ways with different values. (A header sent twice reaches the app as one value joined
    by commas, as HTTP defines, and is taken as that one key: ``joined``.)"""
    sent = {joined(req.headers[HEADER])} if HEADER in req.headers else set()
    if fields is not None and req.mimetype in FORM_TYPES and FORM_FIELD in fields:
        sent.add(joined(str(fields.pop(FORM_FIELD))))
    if not sent:
        return None
    if len(sent) > 1:
        raise APIError(f"The {HEADER} header and the {FORM_FIELD} field differ.")
    key = sent.pop()
    if not valid_key(key):
        raise APIError(INVALID)
    return key


def request_digest(method: str, target: str, fields: dict[str, Any] | None) -> str:
    """SHA-256 of the method, the path and the fields as the API read them (sorted keys),
    so a retry matches whatever its key order, spacing, or JSON versus form encoding."""
    canonical = orjson.dumps(fields or {}, option=orjson.OPT_SORT_KEYS, default=str)
    return hashlib.sha256(f"{method}\n{target}\n".encode() + canonical).hexdigest()


def keyed(req: Request, key: str | None, user_id: int,
          fields: dict[str, Any] | None = None) -> Keyed | None:
    """The write's key and request digest; None for a write without a key."""
    if key is None:
        return None
    return Keyed(user_id, key, req.method, req.path,
                 request_digest(req.method, req.path, fields))


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)  # the tables keep naive UTC


def cutoff(retention_hours: float) -> datetime:
    """Keys created before this have expired."""
    return _now() - timedelta(hours=retention_hours)


def find(conn: Connection, write: Keyed | None, retention_hours: float) -> Stored | None:
    """The stored answer of this key, if the write it names committed and has not expired.

    Run inside the writer's transaction, after its lock: a first attempt still running
    has finished by then. An expired key is dropped and the write runs as new. 422 when
    the key named another request.
    """
    if write is None:
        return None
    found = conn.execute(sql.FIND_KEY, {"user_id": write.user_id,
                                        "idem_key": write.key}).first()
    if found is None:
        return None
    if found.created < cutoff(retention_hours):
        conn.execute(sql.DROP_KEY, {"user_id": write.user_id, "idem_key": write.key})
        return None
    if (found.method, found.target, found.request_digest) != (
            write.method, write.target, write.digest):
        raise KeyReused()
    return Stored(found.status, found.body.encode("utf-8"), found.location, found.comment_id)


def forget_text(conn: Connection, comment_ids: Collection[int]) -> int:
    """Take these comments' text out of every stored answer that holds it, in the
    caller's transaction; how many answers were rewritten.

    A deleted comment's text must leave the database, the key table included. The
    answer stays (a retry is still a replay, not a second write), showing each of these
    comments as a deleted one is shown, wherever it appears (a root's answer carries its
    replies).
    """
    ids = set(comment_ids)
    if not ids:
        return 0
    rewritten = 0
    for row in conn.execute(sql.ANSWERS_HOLDING, {"ids": sorted(ids)}).all():
        if not row.body:
            continue
        payload = orjson.loads(row.body)
        if blank(payload, ids):
            conn.execute(sql.REWRITE_ANSWER, {"body": orjson.dumps(payload).decode("utf-8"),
                                              "user_id": row.user_id,
                                              "idem_key": row.idem_key})
            rewritten += 1
    return rewritten


def forget_user(conn: Connection, user_id: int) -> int:
    """For erasure: drop the user's own keys, and the answers others were given that show
    the user's comments (their text and their name); how many keys were dropped.

    Those others' answers are to marking read or deleting, which do the same when sent
    again, so nothing is written twice for want of them; a post's answer shows only the
    poster's own new comment.
    """
    return conn.execute(sql.DROP_KEYS_SHOWING_USER, {"user_id": user_id}).rowcount


def blank(shown: Any, ids: set[int]) -> bool:
    """Show every comment of ``ids`` inside ``shown`` as deleted; whether any was."""
    changed = False
    if isinstance(shown, dict):
        if shown.get("id") in ids and ("body" in shown or "is_deleted" in shown):
            changed = shown.get("body") != "" or shown.get("is_deleted") is not True
            shown.update(body="", is_deleted=True)
        for value in shown.values():
            changed = blank(value, ids) or changed
    elif isinstance(shown, list):
        for value in shown:
            changed = blank(value, ids) or changed
    return changed


def remember(conn: Connection, write: Keyed | None, status: int, payload: Any,
             location: str | None = None, comment_id: int | None = None) -> None:
    """Keep the answer of this write with its key, in the write's transaction.

    The body is stored as the JSON the first answer carried, and replayed verbatim. Two
    attempts cannot both get here (the writers' lock orders them and the second finds the
    key); should a write ever run outside that lock, the loser gets 409 and rolls back.
    """
    if write is None:
        return
    body = "" if payload is None else orjson.dumps(payload).decode("utf-8")
    try:
        conn.execute(sql.ADD_KEY, {
            "user_id": write.user_id, "idem_key": write.key, "method": write.method,
            "target": write.target, "request_digest": write.digest,
            "comment_id": comment_id, "status": status, "body": body,
            "location": location, "created": _now()})
    except IntegrityError as exc:
        raise KeyInUse() from exc


def purge(engine: Engine, retention_hours: float, batch: int | None) -> int:
    """Delete keys past their retention, ``batch`` at a time, each batch its own short
    transaction (all of them when ``batch`` is None); how many were deleted."""
    total = 0
    limit = batch or 10_000
    while True:
        with engine.connect().execution_options(**{db.WRITER_OPTION: True}) as conn, \
                conn.begin():
            deleted = conn.execute(sql.PURGE_BATCH, {"cutoff": cutoff(retention_hours),
                                                     "batch": limit}).rowcount
        total += deleted
        if batch is not None or deleted < limit:
            return total


class PurgeSchedule:
    """When this process purges next: expired keys, and events every endpoint has that
    are past their retention (storage.outbox.prune). At most every ``interval`` seconds,
    after a write that was not a replay, once its response is sent.

    The check costs a clock read; the purge itself runs in the response's close hook,
    which the WSGI server calls after the body went out, so no request waits for it. A
    full batch means more are due, so the next write purges again.
    """

    def __init__(self, interval: float, retention_hours: float, batch: int = PURGE_BATCH,
                 event_retention_hours: float | None = None):
        self.interval = interval
        self.retention_hours = retention_hours
        self.event_retention_hours = event_retention_hours
        self.batch = batch
        self._next = 0.0
        self._lock = threading.Lock()

    def due(self) -> bool:
        """Whether to purge now; claims the turn, so one thread of a process purges."""
        now = time.monotonic()
        with self._lock:
            if now < self._next:
                return False
            self._next = now + self.interval
            return True

    def after(self, response: Response, engine: Engine) -> Response:
        """Purge a batch after ``response`` is sent, when it is time to."""
        if self.due():
            response.call_on_close(lambda: self.run(engine))
        return response

    def run(self, engine: Engine) -> int:
        """One batch of each; a failure is logged and tried again at the next turn."""
        try:
            deleted = purge(engine, self.retention_hours, self.batch)
            pruned = (0 if self.event_retention_hours is None else
                      outbox.prune(engine, self.event_retention_hours, self.batch))
        except Exception:  # noqa: BLE001 - a purge must never fail a request
            log.warning("purging idempotency keys or old events failed", exc_info=True)
            return 0
        if max(deleted, pruned) >= self.batch:
            with self._lock:
                self._next = 0.0
        return deleted
