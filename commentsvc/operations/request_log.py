"""One JSON line per request, a request id on each, and the traceback of an error in the
log (never in the response).

The service observes the requests under the paths it answers: the comments blueprint's
``/api/`` prefix and the ops routes wherever they are mounted, and every path of the
standalone app. Hooks are registered on the app, scoped to those prefixes, like the JSON
error handler (errors.py): a routing 404 or 405 under the prefix is logged and counted too,
and a host's own pages are left alone. Each observed request writes one line to the logger
``commentsvc.request``:

    {"time": "2025-01-02T03:04:05.678Z", "level": "INFO", "method": "GET",
     "path": "/api/comments/", "status": 200, "duration_ms": 1.234,
     "request_id": "9f1c...", "remote_addr": "127.0.0.1"}

Standalone, ``configure_logging`` sends the ``commentsvc`` loggers to stderr as JSON lines
(gunicorn passes its workers' stderr on); mounted, the host's logging decides where they
go (``JsonFormatter`` is there for it to use).
"""

from __future__ import annotations

import logging
import re
import sys
import time
import traceback
import uuid
from datetime import UTC, datetime
from time import perf_counter
from typing import Any, TextIO

import orjson
from flask import Flask, Request, Response, has_request_context, request

from commentsvc.operations import metrics

log = logging.getLogger("commentsvc.request")

# What a request id sent by a client or a proxy may be: a short token, nothing to forge a
# log line or a header with. Anything else is replaced by a new id.
_SANE_ID = re.compile(r"[A-Za-z0-9._:+/=-]{1,128}")
# Where a request's observation is kept: its WSGI environ (cheaper than flask.g).
# When the request began: set here, or earlier by web.fast_lane for a request it looked at
# before handing it to Flask (a counter read that failed there took part of its time).
STARTED = "commentsvc.started"
_REQUEST_ID = "commentsvc.request_id"
_ERROR = "commentsvc.error"
_EXTENSION = "commentsvc_observed"
UNMATCHED = "unmatched"


def request_id_for(sent: str | None) -> str:
    """The client's X-Request-ID when it is a sane token, else a new uuid4 hex.

    >>> request_id_for("abc-123")
    'abc-123'
    >>> len(request_id_for("two words")), len(request_id_for(None))
    (32, 32)
    """
    if sent is not None and _SANE_ID.fullmatch(sent):
        return sent
    return uuid.uuid4().hex


def current_request_id() -> str | None:
    """The id of the request being answered, if it is observed."""
    if not has_request_context():
        return None
    return request.environ.get(_REQUEST_ID)


def observe(app: Flask, prefix: str) -> None:
    """Log and count every request of ``app`` whose path starts with ``prefix``.

    The hooks are registered once per app; later calls add prefixes.
    """
    prefixes: list[str] | None = app.extensions.get(_EXTENSION)
    if prefixes is not None:
        if prefix not in prefixes:
            prefixes.append(prefix)
        app.extensions[_EXTENSION + ".tuple"] = tuple(prefixes)
        return
    app.extensions[_EXTENSION] = [prefix]
    app.extensions[_EXTENSION + ".tuple"] = (prefix,)
    recorder = metrics.for_app(app)
    extensions = app.extensions

    # The hooks read the request object itself, not through the ``request`` proxy: each
    # proxy lookup costs about a microsecond, and these run on every request. (flask types
    # the proxy as a Request, so mypy does not know its _get_current_object: ignored.)
    def start() -> None:
        environ = request._get_current_object().environ  # type: ignore[attr-defined]
        if not environ.get("PATH_INFO", "").startswith(extensions[_EXTENSION + ".tuple"]):
            return
        environ.setdefault(STARTED, perf_counter())
        environ[_REQUEST_ID] = request_id_for(environ.get("HTTP_X_REQUEST_ID"))

    def finish(response: Response) -> Response:
        req: Request = request._get_current_object()  # type: ignore[attr-defined]
        environ = req.environ
        request_id = environ.get(_REQUEST_ID)
        if request_id is None:  # not a request this log observes
            return response
        duration = perf_counter() - environ[STARTED]
        response.headers["X-Request-ID"] = request_id
        rule = req.url_rule
        status = response.status_code
        method = req.method
        recorder.record(method, rule.endpoint if rule is not None else UNMATCHED, status,
                        duration)
        log_request(method, req.path, status, duration, request_id, req.remote_addr,
                    environ.get(_ERROR))
        return response

    # First of the app's before-request hooks, so a hook answering early is still timed.
    app.before_request_funcs.setdefault(None, []).insert(0, start)
    app.after_request(finish)


def log_request(method: str, path: str, status: int, duration: float, request_id: str,
                remote_addr: str | None, error: BaseException | None = None) -> None:
    """Write one request's line (web.fast_lane writes those of the requests it answers)."""
    level = logging.ERROR if error is not None else (
        logging.WARNING if status >= 500 else logging.INFO)
    if log.isEnabledFor(level):
        _write_line(level, {
            "method": method,
            "path": path,
            "status": status,
            "duration_ms": round(duration * 1000, 3),
            "request_id": request_id,
            "remote_addr": remote_addr,
        }, error)


def attach_error(exc: BaseException) -> bool:
    """Give an unhandled error to the request's log line (its traceback goes in the log).

    False when the request is not observed, so the caller logs it itself.
    """
    if not has_request_context() or _REQUEST_ID not in request.environ:
        return False
    request.environ[_ERROR] = exc
    return True


def _write_line(level: int, fields: dict[str, Any], error: BaseException | None) -> None:
    """Hand one request's line to the logger, without the caller lookup logging would do.

    Where the standalone set-up is the only place the line can go (``sole_json_handler``),
    the handler writes it at once: the same line, without the LogRecord that logging would
    build for it (about half of what logging a request costs).
    """
    if error is None:
        handler = sole_json_handler(level)
        if handler is not None:
            handler.write_fields(level, fields)
            return
    exc_info = (type(error), error, error.__traceback__) if error is not None else None
    record = log.makeRecord(log.name, level, __file__, 0, "request", (), exc_info,
                            extra={"fields": fields})
    log.handle(record)


def sole_json_handler(level: int) -> StderrHandler | None:
    """The standalone StderrHandler, if a request line at ``level`` would go there and
    nowhere else: no handler or filter on the request logger, exactly that one handler on
    ``commentsvc``, and nothing on the root logger to propagate to (so not when a host or
    a test runner listens)."""
    parent = log.parent
    if log.handlers or log.filters or not log.propagate or parent is None or parent.filters:
        return None
    handlers = parent.handlers
    if len(handlers) != 1 or type(handlers[0]) is not StderrHandler:
        return None
    handler = handlers[0]
    if handler.filters or level < handler.level:
        return None
    if parent.propagate and (parent.parent is not logging.root or logging.root.handlers):
        return None
    return handler


def utc_time(created: float) -> str:
    """A log line's time: UTC, milliseconds, ``Z``."""
    return datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


class JsonFormatter(logging.Formatter):
    """A record as one JSON object: time, level, then a request's fields or the logger and
    message, and the traceback as ``exc_info``; lines logged while a request is answered
    carry its ``request_id``."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {"time": utc_time(record.created), "level": record.levelname}
        fields = getattr(record, "fields", None)
        if fields is not None:
            line.update(fields)
        else:
            line["logger"] = record.name
            line["message"] = record.getMessage()
            request_id = current_request_id()
            if request_id is not None:
                line["request_id"] = request_id
        if record.exc_info:
            line["exc_info"] = "".join(traceback.format_exception(*record.exc_info)).rstrip()
        return orjson.dumps(line).decode()


class StderrHandler(logging.StreamHandler[TextIO]):
    """Writes to whatever ``sys.stderr`` is when a line is logged (a worker's, or a test
    runner's capture), never to a stream that has since been closed."""

    def __init__(self) -> None:
        logging.Handler.__init__(self)

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        pass

    def write_fields(self, level: int, fields: dict[str, Any]) -> None:
        """Write a request's line as ``JsonFormatter`` would format its record."""
        line = orjson.dumps({"time": utc_time(time.time()),
                             "level": logging.getLevelName(level), **fields})
        with self.lock:  # type: ignore[union-attr]  # made by Handler.__init__
            stream = sys.stderr
            stream.write(line.decode() + "\n")
            stream.flush()


def configure_logging() -> None:
    """Standalone: the ``commentsvc`` loggers (the request log, errors, the standalone app's
    own) write JSON lines to stderr at INFO, SQLAlchemy's at its own level (warnings and
    errors). Once per process, so a second app adds nothing.
    """
    logger = logging.getLogger("commentsvc")
    _add_json_handler(logger)
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)
    # The libraries' warnings and errors with their tracebacks (SQLAlchemy's pool logs
    # "Exception during reset" when it gives up a dead connection) as JSON lines too,
    # never Python's plain-text last resort among them.
    _add_json_handler(logging.getLogger("sqlalchemy"))


def _add_json_handler(logger: logging.Logger) -> None:
    if not any(isinstance(handler, StderrHandler) for handler in logger.handlers):
        handler = StderrHandler()
        handler.setFormatter(JsonFormatter())
        logger.addHandler(handler)
