"""Cached list pages answered before Flask: a page this process served lately, asked for
again exactly as before, is answered after one counter read, from the response cache or
with a 304.

A cached page still costs a whole Flask request around its counter read (a request
context, routing, the hooks, a Response object): most of what such a request costs. Here a
WSGI layer in front of the standalone app remembers, for each anonymous JSON list request
that Flask answered and that was asked for again (its method, URL, host, scheme, protocol
and Accept, as sent; the first time Flask builds and caches the page, the second time it
finds it cached, and only then is the answer remembered: a page asked for once, deep in a
long list, costs the lane nothing but a look-up), what the answer was made of: the list,
the URL and query its tag is computed from, and the headers Flask sent with its 200 and
with its 304. The same request later is answered from that: the list's counter row read
(on the engine a Flask read would take) and its tag computed as web.conditional does; an
If-None-Match naming the tag gets the 304, any other request the body the cache holds
under the tag; both with the remembered headers, a new ETag, Content-Length and
X-Request-ID, logged and counted as Flask's answer would be.

The tag names the list's version and size, so the body found under it is the page as the
list is now, built by Flask for this very URL: what the fast lane sends is always what
Flask would send. Anything else goes to Flask: another method, a signed-in or cookie
bearing request, a request not seen lately, a 304 or 200 the lane has not seen Flask
send for it yet, a tag the cache does not hold (Flask is told not to read the counter
again, and builds), a database error (Flask answers it as it does any). The layer is on
in the standalone app when the response cache is (``COMMENTSVC_FAST_LANE``, on by
default).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from time import perf_counter
from typing import TYPE_CHECKING, Any, TypeAlias

from commentsvc.operations import metrics, request_log
from commentsvc.storage.engine import get_engine, usable
from commentsvc.web.conditional import CANDIDATE, MISSED, Candidate, list_etag, names_tag

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment
    from flask import Flask
    from sqlalchemy.engine import Engine

    from commentsvc.service import CommentService

# How many requests a process remembers (the oldest forgotten first).
KEPT = 4096

# The parts of a request that decide a cached list answer: the same values, the same
# answer (a signed-in or cookie-bearing request never comes this way; If-None-Match is
# compared with the tag).
_KEY_PARTS = ("PATH_INFO", "QUERY_STRING", "SCRIPT_NAME", "HTTP_HOST", "SERVER_NAME",
              "SERVER_PORT", "SERVER_PROTOCOL", "wsgi.url_scheme", "HTTP_ACCEPT")
# A request with any of these goes to Flask.
_PASSED_ON = ("HTTP_AUTHORIZATION", "HTTP_COOKIE")
# The answers the lane gives, as Werkzeug spells their status lines.
_STATUSES = {"200 OK": 200, "304 NOT MODIFIED": 304}
_STATUS_LINES = {code: line for line, code in _STATUSES.items()}
# The headers made per answer (their values are not remembered), by answer.
_PER_ANSWER = {200: frozenset(("etag", "content-length", "x-request-id")),
               304: frozenset(("etag", "x-request-id"))}

# An answer's headers as Flask sent them: (name, its lower case, value).
Headers: TypeAlias = tuple[tuple[str, str, str], ...]


@dataclass(frozen=True, slots=True)
class _Remembered:
    candidate: Candidate
    # By status (200, 304): the headers Flask sent; the per-answer ones are made anew.
    headers: dict[int, Headers]


def _key(environ: WSGIEnvironment) -> tuple[Any, ...] | None:
    """The request's key, or None when it must go to Flask."""
    if environ.get("REQUEST_METHOD") != "GET":
        return None
    for name in _PASSED_ON:
        if name in environ:
            return None
    return tuple(map(environ.get, _KEY_PARTS))


class FastLane:
    """WSGI middleware in front of ``app``'s own ``wsgi_app`` (``flask_wsgi``)."""

    def __init__(self, app: Flask, flask_wsgi: WSGIApplication, service: CommentService,
                 kept: int = KEPT):
        self.app, self.flask_wsgi, self.service = app, flask_wsgi, service
        self.kept = kept
        # Oldest first (dict lookups need no lock; changes take it).
        self.remembered: OrderedDict[tuple[Any, ...], _Remembered] = OrderedDict()
        self._lock = threading.Lock()
        self.recorder = metrics.for_app(app)
        self._engine: Engine | None = None  # the app's, once asked for

    def __call__(self, environ: WSGIEnvironment,
                 start_response: StartResponse) -> Iterable[bytes]:
        key = _key(environ)
        found = None if key is None else self.remembered.get(key)
        if found is None:
            return self._through_flask(environ, start_response, key)
        started = perf_counter()
        tag = self._tag(found.candidate)
        if tag is None:  # the counter could not be read: Flask answers as it does
            return self._through_flask(environ, start_response, key)
        if names_tag(environ.get("HTTP_IF_NONE_MATCH"), tag):
            if 304 in found.headers:
                return self._send(environ, start_response, found, 304, tag, b"", started)
            return self._through_flask(environ, start_response, key)  # remembers its 304
        cache = self.service.page_cache
        body = None if cache is None else cache.get(tag)
        if body is None:
            environ[MISSED] = True
        elif 200 in found.headers:
            return self._send(environ, start_response, found, 200, tag, body, started)
        return self._through_flask(environ, start_response, key)

    def _tag(self, candidate: Candidate) -> str | None:
        """The tag of the list's answer as the list is now, or None when the counter row
        could not be read."""
        try:
            state = self.service.reads.reading(
                None, lambda engine: self.service.counter_readers.for_engine(engine)
                .read(candidate.list_key), self._primary)
        except Exception:  # noqa: BLE001 - Flask answers it, as it answers any error
            return None
        return list_etag(state, candidate.url, candidate.query, candidate.shown_as)

    def _primary(self) -> Engine:
        """The app's engine, as storage.engine.get_engine gives it, without the app
        context that needs (pushing one costs a sixth of an answer here)."""
        engine = self._engine
        if engine is None:
            with self.app.app_context():
                engine = self._engine = get_engine()
        return usable(engine)

    def _send(self, environ: WSGIEnvironment, start_response: StartResponse,
              found: _Remembered, status: int, tag: str, body: bytes,
              started: float) -> Iterable[bytes]:
        """The remembered answer of this status with this body: its headers in Flask's
        order, the per-answer ones made now; logged and counted as Flask's."""
        request_id = request_log.request_id_for(environ.get("HTTP_X_REQUEST_ID"))
        made = {"etag": tag, "content-length": str(len(body)), "x-request-id": request_id}
        start_response(_STATUS_LINES[status], [
            (name, made[lowered] if lowered in made else value)
            for name, lowered, value in found.headers[status]])
        candidate = found.candidate
        duration = perf_counter() - started
        self.recorder.record("GET", candidate.endpoint, status, duration)
        request_log.log_request("GET", candidate.path, status, duration, request_id,
                                environ.get("REMOTE_ADDR"))
        return [body] if body else []

    def _through_flask(self, environ: WSGIEnvironment, start_response: StartResponse,
                       key: tuple[Any, ...] | None) -> Iterable[bytes]:
        """Flask's answer; remembered when web.reads offered it (a request asked for
        again) and it is the 200 or 304 it describes; forgotten when it was remembered
        and is no longer such an answer."""
        if key is None:
            return self.flask_wsgi(environ, start_response)

        def remembering(status: str, headers: list[tuple[str, str]],
                        exc_info: Any = None) -> Any:
            candidate = environ.get(CANDIDATE)
            code = _STATUSES.get(status)
            if candidate is not None and code is not None and exc_info is None:
                self._remember(key, candidate, code, headers)
            elif environ.get(MISSED):  # remembered, and no longer answered alike
                self._forget(key)
            return start_response(status, headers, exc_info)
        return self.flask_wsgi(environ, remembering)

    def _remember(self, key: tuple[Any, ...], candidate: Candidate, status: int,
                  headers: list[tuple[str, str]]) -> None:
        names = {name.lower(): value for name, value in headers}
        if names.get("etag") != candidate.tag or "set-cookie" in names:
            return
        if _PER_ANSWER[status] - names.keys():
            return
        kept = tuple((name, name.lower(), value) for name, value in headers)
        with self._lock:
            earlier = self.remembered.get(key)
            answers = {} if earlier is None else dict(earlier.headers)
            answers[status] = kept
            self.remembered[key] = _Remembered(candidate, answers)
            self.remembered.move_to_end(key)
            while len(self.remembered) > self.kept:
                self.remembered.popitem(last=False)

    def _forget(self, key: tuple[Any, ...]) -> None:
        with self._lock:
            self.remembered.pop(key, None)
