"""gunicorn's threaded worker, answering what gunicorn refuses itself as JSON.

A request that never reaches the app (a request line over ``limit_request_line``, headers
too large, bytes that are not HTTP) is answered by gunicorn with an HTML page. Every other
error of the service is ``{"detail": "..."}``, and behind `commentsvc serve` nginx answers
the same refusals in that shape too (operations.front); this worker makes gunicorn's own
answers match, with nginx's wording, wherever gunicorn is the front (`make run`, plain
gunicorn).
"""

from __future__ import annotations

import json
import socket
from types import FrameType

from gunicorn import util
from gunicorn.http.errors import InvalidHeader
from gunicorn.workers.gthread import ThreadWorker as GunicornThreadWorker

from commentsvc.operations import front
from commentsvc.web.request_target import INVALID_HOST

# Each status gunicorn refuses a request with, and the detail sent (nginx's where it has one).
DETAILS = {431 if status == 494 else status: detail for status, detail in front.ERRORS} | {
    403: "Request forbidden.",
    417: "Expectation failed.",
}


def error_response(status: int, reason: str, detail: str | None = None) -> bytes:
    """The whole HTTP answer to a request gunicorn refused with ``status`` (``detail``:
    said instead of the status's own sentence).

    >>> error_response(414, "URI Too Long").split(b"\\r\\n\\r\\n")[1]
    b'{"detail": "The request URI is too long."}'
    """
    said = detail or DETAILS.get(status, f"{reason}.")
    body = json.dumps({"detail": said}).encode("utf-8")
    head = (f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\n"
            "Content-Type: application/json\r\nX-Content-Type-Options: nosniff\r\n"
            f"Content-Length: {len(body)}\r\n\r\n")
    return head.encode("latin-1") + body


def write_json_error(sock: socket.socket, status_int: int, reason: str, mesg: str) -> None:
    """gunicorn's ``util.write_error``, JSON: ``mesg`` (gunicorn's words, with the request's
    bytes in them) is logged by gunicorn already and not sent. A request with two Host
    lines, which gunicorn refuses itself, gets the app's answer to a Host naming two hosts
    (web.request_target)."""
    detail = INVALID_HOST if status_int == 400 and mesg == _TWO_HOSTS else None
    util.write_nonblock(sock, error_response(status_int, reason, detail))


# What gunicorn says of a request that repeats Host (a field that may come once).
_TWO_HOSTS = str(InvalidHeader("HOST"))


class ThreadWorker(GunicornThreadWorker):
    """gunicorn's gthread worker whose own error answers are JSON, and which a stop ends
    at once while it is still loading the app."""

    def init_process(self) -> None:
        # The one writer of gunicorn's error pages (workers.base.handle_error calls it), in
        # this worker process only.
        util.write_error = write_json_error
        super().init_process()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """SIGTERM, a graceful stop: the worker finishes its requests, then ends. One still
        loading the app has none, and ends now (gunicorn's quick exit) instead of when the
        load is done: on a loaded machine that took long enough that the master's stop
        waited out its graceful timeout for it."""
        if self.booted:
            super().handle_exit(sig, frame)
        else:
            self.handle_quit(sig, frame)  # raises SystemExit
