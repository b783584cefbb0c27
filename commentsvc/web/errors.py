"""The one handler that turns anything raised under the API's prefix into JSON (the error
types are in web.exceptions).

Every error under the API's URL prefix is ``{"detail": ...}`` (validation errors: field
-> list of messages), never an HTML page or a traceback. Outside that prefix a host
site's own error pages are left alone.
"""

from __future__ import annotations

import logging
from typing import Any, cast
from urllib.parse import unquote, urlsplit

from flask import Flask, Response, current_app, request
from flask.typing import ResponseReturnValue
from sqlalchemy import exc as sa_exc
from werkzeug.exceptions import HTTPException
from werkzeug.routing import MapAdapter, RequestRedirect, Rule

from commentsvc.operations import request_log
from commentsvc.storage import outage
from commentsvc.web import current, request_target
from commentsvc.web.exceptions import (
    DATABASE_DOWN,
    APIError,
    DatabaseUnavailable,
    LengthRequired,
    NotAcceptable,
    NotAuthenticated,
    NotFound,
    PermissionDenied,
    Throttled,
    TooLarge,
    UnsupportedMediaType,
    ValidationFailed,
)
from commentsvc.web.responses import allow_for, api_response

log = logging.getLogger("commentsvc")

# The error types, for code that imports them from here.
__all__ = [
    "APIError", "DATABASE_DOWN", "DatabaseUnavailable", "LengthRequired", "NotAcceptable",
    "NotAuthenticated", "NotFound", "PermissionDenied", "Throttled", "TooLarge",
    "UnsupportedMediaType", "ValidationFailed", "error_body", "install_error_handler",
    "to_response",
]

def error_body(detail: Any) -> dict[str, Any]:
    """The JSON body of an error: a field map as it is, anything else under "detail"."""
    return detail if isinstance(detail, dict) else {"detail": detail}


def http_error_detail(exc: HTTPException) -> str:
    """The detail for an error Werkzeug raised while routing, in the API's wording."""
    if exc.code == 405:
        return f'Method "{request.method}" not allowed.'
    if exc.code == 404:
        return "Not found."
    if exc.code == 500:
        return "A server error occurred."
    return exc.description or exc.name


# What SQLite's driver says of text that is not UTF-8 (bytes a host's SQL stored), read
# by the service or passed to a function the service gives SQLite (storage.engine).
_UNDECODABLE = ("Could not decode to UTF-8", "user-defined function raised exception")


def _undecodable(exc: BaseException) -> bool:
    """The row is at fault, not the database, which answers: a 500, not a 503 that would
    have clients retry in vain."""
    return isinstance(exc, sa_exc.OperationalError) and str(exc.orig).startswith(
        _UNDECODABLE)


# PostgreSQL's code for a table that does not exist (undefined_table).
_UNDEFINED_TABLE = "42P01"


def _tables_missing(exc: BaseException) -> bool:
    """The service's tables are not there yet (a new database whose init-db has not run):
    not ready, a 503 as on SQLite (where the driver raises it as an OperationalError),
    not a 500."""
    return (isinstance(exc, sa_exc.ProgrammingError)
            and getattr(exc.orig, "pgcode", None) == _UNDEFINED_TABLE)


def to_response(exc: BaseException) -> Response:
    """Turn any exception raised while answering an API request into a JSON response."""
    if isinstance(exc, APIError):
        error = exc
    elif isinstance(exc, HTTPException):
        error = APIError(http_error_detail(exc), status=exc.code or 500)
    elif (isinstance(exc, DATABASE_DOWN) and not _undecodable(exc)) or _tables_missing(exc):
        # An outage is logged once when it starts and once when it ends (outage.py);
        # anything else (a cancelled statement) gets one line without SQL or parameters.
        outage.answered_unavailable()
        if not outage.is_outage_error(exc):
            log.warning("database error: %s", outage.one_line(exc))
        error = DatabaseUnavailable()
    else:
        # The traceback goes in the request's log line (request_log), never in the body.
        if not request_log.attach_error(exc):
            log.exception("unhandled error on %s %s", request.method, request.path)
        error = APIError("A server error occurred.", status=500)
    if error.status == 503 and "Retry-After" not in error.headers:
        error.headers["Retry-After"] = str(current.service().settings.retry_after)
    return api_response(error_body(error.detail), error.status, error.headers,
                        _allow_at(_resource_route()))


def _resource_route() -> Rule | None:
    """The route of the resource this request names, if any: none for a path with an
    empty segment, which names no resource (web.request_target), even where Werkzeug,
    dropping extra leading slashes, matched a route."""
    if "//" in request.environ.get("PATH_INFO", ""):
        return None
    return request.url_rule or _route_at() or _route_at_slashed()


def _route_at(path: str | None = None) -> Rule | None:
    """The route of the resource at ``path`` (this request's by default), also when the
    method had none (405); none where no route serves it."""
    for method in ("GET", "POST"):  # POST: a resource without GET (sign-out)
        try:
            rule, _ = _url_adapter().match(request.path if path is None else path,
                                           method=method, return_rule=True)
        except HTTPException:
            continue
        return rule
    return None


def _route_at_slashed() -> Rule | None:
    """The route a path missing only its final slash leads to (a malformed Host refused
    before its redirect)."""
    return None if request.path.endswith("/") else _route_at(request.path + "/")


def _allow_at(rule: Rule | None) -> str | None:
    return None if rule is None else allow_for(rule.endpoint, rule.methods or ())


def _missing_slash() -> str | None:
    """Where this path is redirected for a method its resource takes, when only its final
    slash is missing. Werkzeug redirects only such methods and answers 404 to the others;
    every method gets the same 308 here, and the method is then refused (405) where the
    resource is. (Not a redirect that merges slashes: such a path is 404, request_target.)"""
    for method in ("GET", "POST"):
        try:
            _url_adapter().match(method=method)
        except RequestRedirect as redirect:
            target = unquote(urlsplit(redirect.new_url).path)
            if target == f"{request.script_root}{request.path}/":
                return redirect.new_url
            return None
        except HTTPException:
            continue
    return None


def _url_adapter() -> MapAdapter:
    try:
        adapter = current_app.create_url_adapter(request)
    except HTTPException:  # a malformed Host (400): the path alone names the route
        return current_app.url_map.bind("localhost", script_name=request.script_root)
    assert adapter is not None  # Flask makes one for every request
    return adapter


def install_error_handler(app: Flask, api_prefix: str) -> None:
    """Answer routing errors (404, 405, 500) under ``api_prefix`` as JSON on this app, and
    there refuse a malformed Host (400) or a path with an empty segment (404) before any
    view runs (request_target).

    A handler the host registered earlier for HTTPException keeps serving its other paths;
    one it registered for a status code serves them alone (``routing_answer_as_json``).
    """
    request_target.refuse_unanswerable(app, api_prefix, to_response)
    previous = app.error_handler_spec[None][None].get(HTTPException)

    def handle_http_error(exc: HTTPException) -> ResponseReturnValue:
        if isinstance(exc, RequestRedirect) or (exc.code or 500) < 400:
            return exc
        if request.path.startswith(api_prefix):
            return to_response(exc)
        # Called as Flask calls a handler: ensure_sync returns a plain function as it is.
        return cast(ResponseReturnValue, app.ensure_sync(previous)(exc)) if previous else exc

    app.register_error_handler(HTTPException, handle_http_error)

    def routing_answer_as_json(response: Response) -> Response:
        """What the router answered under the prefix, as JSON, whoever made the body.

        A path missing only its final slash is redirected (308) with Werkzeug's HTML page
        for a body, which no error handler sees, and only for the methods its resource
        takes (the others got 404): every method gets the redirect. And a host's handler
        for a status code (``@app.errorhandler(404)``, most sites have one) is chosen
        before this app's handler for every HTTPException, so an unknown path or method
        under the prefix got the host's page. Both are JSON here, as every other answer
        under the prefix."""
        routed = request.routing_exception
        if routed is None or not request.path.startswith(api_prefix):
            return response
        location = None
        if isinstance(routed, RequestRedirect):
            if response.status_code != 308:
                return response  # refused before the redirect (request_target)
            location = response.location
        elif isinstance(routed, HTTPException) and routed.code == response.status_code == 404:
            location = _missing_slash()
        if location:
            return api_response(error_body(f"Moved permanently to {location}"), 308,
                                {"Location": location}, _allow_at(_route_at(request.path + "/")))
        if isinstance(routed, HTTPException) and (routed.code or 500) >= 400 \
                and response.mimetype != "application/json":
            return to_response(routed)
        return response

    app.after_request(routing_answer_as_json)
