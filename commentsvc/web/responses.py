"""How every answer is built: compact UTF-8 JSON (or the browsable HTML page) and the
headers every answer carries.

``Allow`` names the methods of the resource answering: the collection's, one comment's
at /api/comments/<id>/, or GET and HEAD for the read-only documents (a list's Atom
feed, the OpenAPI document, health, readiness, metrics). A path no route serves (a 404
of the router) names none, so carries no ``Allow``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import orjson
from flask import Response
from werkzeug.datastructures import Headers

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIEnvironment

ALLOW = "GET, POST, HEAD, OPTIONS"
DETAIL_ALLOW = "GET, PATCH, DELETE, HEAD, OPTIONS"
DETAIL_ENDPOINT = "commentsvc.comment_detail"
LIST_ENDPOINT = "commentsvc.comment_list"
READ_ONLY_ALLOW = "GET, HEAD"
FEED_ENDPOINT = "commentsvc.comment_feed"
ATOM_CONTENT_TYPE = "application/atom+xml; charset=utf-8"
# The API's resources, by endpoint; another route's Allow names the methods it takes.
ALLOW_BY_ENDPOINT = {
    LIST_ENDPOINT: ALLOW,
    DETAIL_ENDPOINT: DETAIL_ALLOW,
    FEED_ENDPOINT: READ_ONLY_ALLOW,
    "commentsvc.openapi_schema": READ_ONLY_ALLOW,
    "commentsvc_ops.healthz": READ_ONLY_ALLOW,
    "commentsvc_ops.readyz": READ_ONLY_ALLOW,
    "commentsvc_ops.metrics": READ_ONLY_ALLOW,
    "commentsvc_signin.logout": "POST, OPTIONS",
}
# The order the table's values name methods in.
_METHOD_ORDER = ("GET", "POST", "PATCH", "DELETE", "HEAD", "OPTIONS")
# The page loads nothing but its own stylesheet, its own script (browsable.js, which
# sends the PATCH and DELETE buttons to this site) and avatar images (paths or http(s)
# URLs of the data); no inline script runs, it may not be framed, and its forms post
# only to itself.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; script-src 'self'; "
                               "connect-src 'self'; img-src 'self' http: https:; "
                               "form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
}
# Every answer, whatever its type or status: a browser must never guess another type for
# a body (a JSON error holding user text read as HTML, say).
NOSNIFF = {"X-Content-Type-Options": "nosniff"}


# The headers Werkzeug rewrites as it sends them (an IRI becomes a URI).
_LOCATIONS = frozenset({"location", "content-location"})
# A Location Werkzeug's rewriting leaves as it is: an absolute http(s) URI whose host is
# lower-case letters, digits, dots and dashes, with a port not written with a leading
# zero, and whose path holds only unreserved characters and slashes (a new comment's URL
# as the service builds it, on a host of that form).
_PLAIN_LOCATION = re.compile(r"https?://[a-z0-9.-]+(:[1-9][0-9]{0,4})?/[A-Za-z0-9._~/-]*")


class APIResponse(Response):
    """A response whose 304 keeps ``Allow``.

    Werkzeug strips a 304 of RFC 2616's entity headers, ``Allow`` among them; RFC 9110
    (section 15.4.5) wants a 304 to carry the headers its 200 would, and ``Allow`` says
    what the resource allows, not what the representation is. ``Content-Type`` and
    ``Content-Length`` stay off, as that section asks of representation metadata.
    """

    def get_wsgi_headers(self, environ: WSGIEnvironment) -> Headers:
        """The headers as sent. When Werkzeug would change nothing (a status with a body,
        its Content-Length known, no Location to turn into a URI, or one that is one
        already), they are the response's own, not a copy: Werkzeug's copy checks every
        header a second time."""
        status = self.status_code
        if not (status < 200 or status in (204, 304)):
            names = {name.lower() for name, _ in self.headers}
            if "content-length" in names and (not names & _LOCATIONS or (
                    names & _LOCATIONS == {"location"}
                    and _PLAIN_LOCATION.fullmatch(self.headers["Location"]))):
                return self.headers
        headers = super().get_wsgi_headers(environ)
        if status == 304 and "Allow" in self.headers and "Allow" not in headers:
            headers["Allow"] = self.headers["Allow"]
        return headers


def allow_for(endpoint: str | None, methods: Iterable[str] = ()) -> str | None:
    """The Allow header of the resource an endpoint serves: the table's, else the
    ``methods`` its route takes, in the table's order; none without an endpoint.

    >>> allow_for("commentsvc.static", {"OPTIONS", "HEAD", "GET"})
    'GET, HEAD, OPTIONS'
    """
    if endpoint is None:
        return None
    if endpoint in ALLOW_BY_ENDPOINT:
        return ALLOW_BY_ENDPOINT[endpoint]
    named = set(methods)
    ordered = [method for method in _METHOD_ORDER if method in named]
    return ", ".join(ordered + sorted(named.difference(_METHOD_ORDER))) or None


def api_response(payload: Any, status: int = 200,
                 headers: dict[str, str] | None = None, allow: str | None = ALLOW) -> Response:
    """JSON in the key order it was built in, non-ASCII as itself, with Allow and Vary.

    A 304 carries the headers only.
    """
    body = b"" if status in (204, 304) else orjson.dumps(payload)
    return encoded_response(body, status, headers, allow)


def encoded_response(body: bytes, status: int = 200, headers: dict[str, str] | None = None,
                     allow: str | None = ALLOW) -> Response:
    """A response of an already encoded JSON body, with the headers every answer needs."""
    shared = {**_allow(allow), "Vary": "Accept", **NOSNIFF}
    return APIResponse(body, status=status, mimetype="application/json",
                    headers={**shared, **headers} if headers else shared)


def html_response(body: bytes, status: int = 200,
                  headers: dict[str, str] | None = None, allow: str | None = ALLOW) -> Response:
    """A browsable page (UTF-8 HTML) with the headers every answer needs and its policy."""
    shared = {**_allow(allow), "Vary": "Accept", **PAGE_HEADERS, **NOSNIFF}
    return APIResponse(body, status=status, mimetype="text/html",
                    headers={**shared, **headers} if headers else shared)


def _allow(allow: str | None) -> dict[str, str]:
    return {} if allow is None else {"Allow": allow}


def atom_response(body: bytes, status: int = 200,
                  headers: dict[str, str] | None = None) -> Response:
    """An Atom feed (UTF-8 XML) with the headers every answer needs. It has one
    representation, so no ``Vary: Accept``."""
    shared = {"Allow": READ_ONLY_ALLOW, **NOSNIFF}
    return APIResponse(body, status=status, content_type=ATOM_CONTENT_TYPE,
                       headers={**shared, **headers} if headers else shared)
