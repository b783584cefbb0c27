"""Anonymous JSON list pages answered before Flask: a page this process served lately,
asked for again exactly as before, after one counter read (from the response cache or with
a 304), and another page of a list Flask answered, built here.

A list request still costs a whole Flask request around its reads (a request context,
routing, the hooks, a Response object): most of what a cached page costs, and a good part
of a built one. Here a WSGI layer in front of the standalone app learns from Flask's
answers to anonymous JSON list requests (their method, URL, host, scheme, protocol and
Accept, as sent):

* **A request asked for again** (the first time Flask, or this layer, builds and caches
  the page, the second time it is found cached, and only then is the request
  remembered) is answered from what the answer was made of: the list's counter row read
  (on the engine a Flask read would take; not read again while the list is known
  unchanged, storage.list_versions) and its tag computed as web.conditional does; an
  If-None-Match naming the tag gets the 304 Flask sent, any other request the body the
  cache holds under the tag, or the page built here when the cache holds none (after a
  write).
* **Another page of a list** (the same request but for its ``page`` number: its shape,
  web.page_shapes) is built here once Flask answered a 200 of that shape, as Flask builds
  it: one statement reads the page and the list's state (web.reads.read_page), the body
  is made by web.reads.json_page, the tag computed from the state, and the page cached.
  A request of that shape that this process cached lately (or any, when the cache is
  shared) is sent from the cache under its tag as the list is now, when it holds it, and
  is remembered from then on; one that names a tag goes to Flask, which answers it and so
  has it remembered.

Either way the answer goes out with the headers Flask sent for a 200 (or 304) of that
request or shape, a new ETag, Content-Length and X-Request-ID, logged and counted as
Flask's answer would be.

The tag names the list's version and size, so a body found under it is the page as the
list is now, built for this very URL; a page built here is made from the state its own
read saw, by the code Flask's view builds it with. Anything else goes to Flask: another
method, a signed-in or cookie-bearing request, a request of a shape Flask has not
answered, a query without a shape (a repeated ``page``, an encoded name), a page the
list does not have (404), a database error (Flask answers it as it does any). The layer
is in front of the standalone app (``COMMENTSVC_FAST_LANE``, on by default); with the
response cache off it builds pages, caches none, and answers a request it saw Flask
answer with a 304 likewise, after one counter read.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from time import perf_counter
from typing import TYPE_CHECKING, Any, TypeAlias

from commentsvc.operations import metrics, request_log
from commentsvc.rules import pagination
from commentsvc.storage.engine import get_engine, usable
from commentsvc.web import reads, request_args
from commentsvc.web.conditional import (
    AGAIN,
    CANDIDATE,
    IN_LANE,
    MISSED,
    Candidate,
    keep,
    list_etag,
    names_tag,
    page_identity,
)
from commentsvc.web.negotiation import JSON
from commentsvc.web.page_shapes import shape

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment
    from flask import Flask
    from sqlalchemy.engine import Engine

    from commentsvc.service import CommentService

# How many requests, and how many shapes, a process remembers (the one used least lately
# forgotten first): each costs about 1.2 kB, the headers being shared (``_shared``).
KEPT = 16384
# How many different sets of headers are shared before the sharing starts again.
_HEADER_SETS = 64

# The parts of a request that decide a cached list answer: the same values, the same
# answer (a signed-in or cookie-bearing request never comes this way; If-None-Match is
# compared with the tag).
_KEY_PARTS = ("PATH_INFO", "QUERY_STRING", "SCRIPT_NAME", "HTTP_HOST", "SERVER_NAME",
              "SERVER_PORT", "SERVER_PROTOCOL", "wsgi.url_scheme", "HTTP_ACCEPT")
_QUERY = _KEY_PARTS.index("QUERY_STRING")
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


def _kept(candidate: Candidate, status: int, headers: list[tuple[str, str]]
          ) -> Headers | None:
    """An answer's headers as the lane keeps them (the per-answer ones without their
    values, made anew for each answer), or None when they must not be replayed (not the
    offered answer's tag, a cookie set, a per-answer header missing)."""
    names = {name.lower(): value for name, value in headers}
    if names.get("etag") != candidate.tag or "set-cookie" in names:
        return None
    per_answer = _PER_ANSWER[status]
    if per_answer - names.keys():
        return None
    return tuple((name, name.lower(), "" if name.lower() in per_answer else value)
                 for name, value in headers)


def _identity(candidate: Candidate, environ: WSGIEnvironment) -> str:
    """The request's name among the pages this process cached lately, as web.reads
    names it."""
    return page_identity(candidate.url, environ.get("QUERY_STRING", "").encode("latin-1"),
                         None, JSON)


def _shape(key: tuple[Any, ...]) -> tuple[tuple[Any, ...], int] | None:
    """The key of the request's shape and the page it asks for, or None (no shape)."""
    shaped = shape(key[_QUERY] or "")
    if shaped is None:
        return None
    return (*key[:_QUERY], shaped[0], *key[_QUERY + 1:]), shaped[1]


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
        # Least lately used first (a lookup, or marking one used, needs no lock; adding
        # and forgetting take it).
        self.remembered: OrderedDict[tuple[Any, ...], _Remembered] = OrderedDict()
        # By shape (the request's key with its query's shape, web.page_shapes): what
        # builds another page of it, and the headers Flask sent with a 200 of it.
        self.shapes: OrderedDict[tuple[Any, ...], _Remembered] = OrderedDict()
        # Each different set of kept headers once, for all that are equal.
        self._header_sets: dict[Headers, Headers] = {}
        self._lock = threading.Lock()
        self.recorder = metrics.for_app(app)
        self._engine: Engine | None = None  # the app's, once asked for

    def __call__(self, environ: WSGIEnvironment,
                 start_response: StartResponse) -> Iterable[bytes]:
        key = _key(environ)
        if key is None:
            return self.flask_wsgi(environ, start_response)
        # Flask's request log times a request this lane hands on from here, not from when
        # Flask got it (a counter read that failed here may have waited out a deadline).
        started = environ[request_log.STARTED] = perf_counter()
        found = self.remembered.get(key)
        if found is None:
            return self._by_shape(environ, start_response, key, started)
        self._used(self.remembered, key)
        cache = self.service.page_cache
        if cache is None and "HTTP_IF_NONE_MATCH" not in environ:  # nothing to spare
            return self._built_or_flask(environ, start_response, key, _shape(key), found,
                                        started)
        tag = self._tag(found.candidate)
        if tag is None:  # the counter could not be read: Flask answers as it does
            return self._through_flask(environ, start_response, key)
        if names_tag(environ.get("HTTP_IF_NONE_MATCH"), tag):
            if 304 in found.headers:
                return self._send(environ, start_response, found, 304, tag, b"", started)
            return self._through_flask(environ, start_response, key)  # remembers its 304
        body = None if cache is None else cache.get(tag)
        if body is not None and 200 in found.headers:
            return self._send(environ, start_response, found, 200, tag, body, started)
        if body is None:  # built here, or by Flask without a second counter read
            environ[MISSED] = True
            return self._built_or_flask(environ, start_response, key, _shape(key), found,
                                        started)
        return self._through_flask(environ, start_response, key)

    def _by_shape(self, environ: WSGIEnvironment, start_response: StartResponse,
                  key: tuple[Any, ...], started: float) -> Iterable[bytes]:
        """A request not remembered: built here when Flask answered one of its shape (the
        same but for the page number) and it is not one the cache may spare (it names a
        tag, or this process cached it lately: Flask answers those, and from its answer
        the request is remembered); otherwise Flask's answer."""
        shaped = _shape(key)
        learned = None if shaped is None else self.shapes.get(shaped[0])
        if shaped is None or learned is None or "HTTP_IF_NONE_MATCH" in environ:
            return self._through_flask(environ, start_response, key)
        self._used(self.shapes, shaped[0])
        if self._may_be_cached(learned.candidate, environ):
            return self._from_cache(environ, start_response, key, shaped, learned,
                                    started)
        return self._built_or_flask(environ, start_response, key, shaped, learned,
                                    started)

    def _from_cache(self, environ: WSGIEnvironment, start_response: StartResponse,
                    key: tuple[Any, ...], shaped: tuple[tuple[Any, ...], int],
                    learned: _Remembered, started: float) -> Iterable[bytes]:
        """A request of a known shape whose page the cache may hold (this process cached
        it lately, or the cache is shared): the body the cache holds under its tag as the
        list is now, the request remembered from then on as Flask's answer from the cache
        would have it remembered; built when the cache holds none."""
        query_string = environ.get("QUERY_STRING", "").encode("latin-1")
        candidate = replace(learned.candidate, query=request_args.quoted(query_string))
        tag = self._tag(candidate)
        if tag is None:  # the counter could not be read: Flask answers as it does
            return self._through_flask(environ, start_response, key)
        cache = self.service.page_cache
        body = None if cache is None else cache.get(tag)
        if body is None:
            return self._built_or_flask(environ, start_response, key, shaped, learned,
                                        started)
        found = _Remembered(replace(candidate, tag=tag), learned.headers)
        with self._lock:
            self._keep(key, found)
        return self._send(environ, start_response, found, 200, tag, body, started)

    def _built_or_flask(self, environ: WSGIEnvironment, start_response: StartResponse,
                        key: tuple[Any, ...], shaped: tuple[tuple[Any, ...], int] | None,
                        template: _Remembered, started: float) -> Iterable[bytes]:
        """The page this request asks for (``shaped``: its shape's key and page number) of
        the template's list, built here (with the headers Flask sent for a 200 of it, or
        of its shape), or Flask's answer when it cannot be."""
        if shaped is not None and 200 not in template.headers:
            template = self.shapes.get(shaped[0], template)
        built = None if shaped is None or 200 not in template.headers else self._built(
            environ, template, shaped[1])
        if built is None:
            return self._through_flask(environ, start_response, key)
        return self._send(environ, start_response, template, 200, *built, started)

    def _may_be_cached(self, template: Candidate, environ: WSGIEnvironment) -> bool:
        """Whether Flask would read the counter row first for this request: the cache is
        shared by every node, or this process cached this very page lately."""
        cache = self.service.page_cache
        return cache is not None and (cache.shared or self.service.cached_pages.holds(
            _identity(template, environ)))

    def _built(self, environ: WSGIEnvironment, template: _Remembered, number: int
               ) -> tuple[str, bytes] | None:
        """Page ``number`` (LAST: the last) of the template's list, as Flask builds it for
        this request: its tag and body, cached as Flask caches it; None when Flask must
        answer (the list has no such page, a 404, or the read failed)."""
        candidate = template.candidate
        service = self.service
        try:
            state, rows = reads.read_page(service, candidate.comments, number,
                                          candidate.page_size, self._primary)
        except Exception:  # noqa: BLE001 - Flask answers it, as it answers any error
            return None
        num_pages = pagination.num_pages(state.count, candidate.page_size)
        number = number or num_pages  # LAST: the last page of the list as read
        if number > num_pages:
            return None
        query_string = environ.get("QUERY_STRING", "").encode("latin-1")
        query = request_args.quoted(query_string)
        tag = list_etag(state, candidate.url, query, candidate.shown_as)
        body = reads.json_page(service.settings, candidate.base_url, query, number,
                               num_pages, rows, None)
        keep(service.page_cache, service.cached_pages, tag, body,
             _identity(candidate, environ))
        return tag, body

    def _tag(self, candidate: Candidate) -> str | None:
        """The tag of the list's answer as the list is now, or None when the counter row
        could not be read."""
        try:
            state = self.service.reads.list_state(candidate.comments.key, self._primary)
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
                if code == 200:
                    self._learn(key, candidate, headers)
                if environ.get(AGAIN):
                    self._remember(key, candidate, code, headers)
            elif environ.get(MISSED):  # remembered, and no longer answered alike
                self._forget(key)
            return start_response(status, headers, exc_info)
        environ[IN_LANE] = True
        return self.flask_wsgi(environ, remembering)

    def _learn(self, key: tuple[Any, ...], candidate: Candidate,
               headers: list[tuple[str, str]]) -> None:
        """Remember the shape of a request Flask answered with a 200 page."""
        shaped = _shape(key)
        if shaped is None or shaped[0] in self.shapes:
            return
        kept = _kept(candidate, 200, headers)
        if kept is None:
            return
        with self._lock:
            self.shapes[shaped[0]] = _Remembered(candidate, {200: self._shared(kept)})
            while len(self.shapes) > self.kept:
                self.shapes.popitem(last=False)

    def _remember(self, key: tuple[Any, ...], candidate: Candidate, status: int,
                  headers: list[tuple[str, str]]) -> None:
        kept = _kept(candidate, status, headers)
        if kept is None:
            return
        with self._lock:
            earlier = self.remembered.get(key)
            answers = {} if earlier is None else dict(earlier.headers)
            answers[status] = self._shared(kept)
            self._keep(key, _Remembered(candidate, answers))

    def _keep(self, key: tuple[Any, ...], found: _Remembered) -> None:
        """Remember a request's answers, forgetting the one used least lately when there
        are too many (the lock held)."""
        self.remembered[key] = found
        self.remembered.move_to_end(key)
        while len(self.remembered) > self.kept:
            self.remembered.popitem(last=False)

    def _forget(self, key: tuple[Any, ...]) -> None:
        with self._lock:
            self.remembered.pop(key, None)

    @staticmethod
    def _used(memory: OrderedDict[tuple[Any, ...], _Remembered],
              key: tuple[Any, ...]) -> None:
        """Mark a remembered request or shape as just used: forgotten last. One call of
        the C-made OrderedDict, so no lock is needed (each holds Python's own)."""
        try:
            memory.move_to_end(key)
        except KeyError:  # forgotten meanwhile by another thread
            pass

    def _shared(self, headers: Headers) -> Headers:
        """The one kept tuple equal to ``headers`` (most lists' answers carry the same
        headers), so that a remembered request or shape costs little more than its key
        and candidate. Called with the lock held."""
        found = self._header_sets.get(headers)
        if found is None:
            if len(self._header_sets) >= _HEADER_SETS:
                self._header_sets.clear()
            found = self._header_sets[headers] = headers
        return found
