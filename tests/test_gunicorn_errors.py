"""What gunicorn refuses before the app sees it, under gunicorn alone (`make run`, a plain
gunicorn deployment): answered as JSON like every other error of the service, in nginx's
words (commentsvc/operations/gunicorn_worker.py); and a request line as long as nginx takes
in front is served, not refused."""

from __future__ import annotations

import json
import socket

import pytest
from test_front import exchange, parse

from commentsvc.operations.gunicorn_worker import DETAILS, error_response
from commentsvc.storage import engine
from conftest import make_app
from harness.servers import Gunicorn, prepare, request


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('gunicorn') / 'errors.sqlite3'}"
    app = make_app(url)
    with app.app_context():
        engine.get_engine().dispose()
    with Gunicorn(url, workers=1) as served:
        yield served


@pytest.mark.parametrize(("request_bytes", "status", "detail"), [
    (b"GET /api/comments/?" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
     414, "The request URI is too long."),
    (b"GET /api/comments/ HTTP/1.1\r\nHost: x\r\nCookie: " + b"c" * 9000 + b"\r\n\r\n",
     431, "The request headers are too large."),
    (b"GET /api/comments/?x=\xc3\xa9 HTTP/1.1\r\nHost: x\r\n\r\n", 400, "Bad request."),
    (b"NOT AN HTTP REQUEST\r\n\r\n", 400, "Bad request."),
    (b"POST /api/comments/ HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n", 400,
     "Bad request."),
    (b"POST /api/comments/ HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
     b"Transfer-Encoding: chunked\r\n\r\n", 400, "Bad request."),
    (b"POST /api/comments/ HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 400,
     "Bad request."),
    (b"GET /api/comments/ HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n", 400, "Bad request."),
    (b"GET /api/comments/ HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n", 400,
     "Invalid Host header."),
], ids=["414", "431", "400-raw-byte", "400-request-line", "400-negative-length",
        "400-length-and-chunked", "400-transfer-coding", "400-nul-in-header", "400-two-hosts"])
def test_what_gunicorn_refuses_is_json(server, request_bytes, status, detail):
    received, _elapsed = exchange(server.port, request_bytes)
    got, headers, body = parse(received)
    assert (got, headers["content-type"]) == (status, "application/json"), received[:300]
    assert headers["x-content-type-options"] == "nosniff"
    assert json.loads(body) == {"detail": detail}


def test_a_request_line_as_long_as_nginx_takes_is_served(server):
    """5,000 digits of page_size are served as the largest page size (API.md), under
    gunicorn alone as behind nginx (8 KB)."""
    line = b"GET /api/comments/?page_size=" + b"9" * 5000 + b" HTTP/1.1"
    received, _elapsed = exchange(server.port, line + b"\r\nHost: x\r\nConnection: close\r\n\r\n")
    status, headers, body = parse(received)
    assert (status, headers["content-type"]) == (200, "application/json")
    assert json.loads(body)["p8n"]["num_pages"] == 1


def test_every_refusal_has_a_sentence_for_a_detail():
    for status in (400, 403, 414, 417, 431, 500, 501):
        assert DETAILS[status].endswith(".")
    assert json.loads(error_response(418, "I'm a teapot").split(b"\r\n\r\n")[1]) == {
        "detail": "I'm a teapot."}


def test_the_modules_examples_hold():
    import doctest

    from commentsvc.operations import gunicorn_worker

    result = doctest.testmod(gunicorn_worker)
    assert result.attempted >= 1 and result.failed == 0


@pytest.fixture(scope="module")
def signed_in(tmp_path_factory):
    """gunicorn alone on a seeded database, and a sign-in key of one of its users."""
    url = f"sqlite:///{tmp_path_factory.mktemp('chunks') / 'chunks.sqlite3'}"
    community = prepare(url, comments=20, targets=2, posters=1)
    with Gunicorn(url, workers=1) as served:
        yield served, next(iter(community.tokens.values())), community.targets[0]


@pytest.mark.parametrize("chunks", [
    b"zz\r\nabc\r\n0\r\n\r\n",  # a chunk size that is no number
    b"-5\r\nabc\r\n0\r\n\r\n",  # a negative one
    b"3\r\nabcXY0\r\n\r\n",  # a chunk without its line end
    b"20\r\nabc",  # cut off: the client sends nothing more
], ids=["size-not-a-number", "size-negative", "no-terminator", "cut-off"])
def test_a_chunked_body_the_server_cannot_decode_is_400_and_writes_nothing(signed_in, chunks):
    """Under gunicorn alone the app reads the chunks as gunicorn decodes them: a broken
    one is the client's error, answered 400 JSON (behind nginx, nginx refuses it first)."""
    served, token, (content_type, object_id) = signed_in
    url = f"/api/comments/?content_type={content_type}&object_id={object_id}"
    before = json.loads(request(served.base, "GET", url).body)["p8n"]
    head = (b"POST /api/comments/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Token " + token.encode() + b"\r\n"
            b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
    with socket.create_connection(("127.0.0.1", served.port), timeout=15) as sock:
        sock.sendall(head + chunks)
        sock.shutdown(socket.SHUT_WR)
        received = b""
        while part := sock.recv(65536):
            received += part
    status, headers, body = parse(received)
    assert (status, headers["content-type"]) == (400, "application/json"), received[:400]
    assert json.loads(body) == {"detail": "The request body could not be read."}
    assert json.loads(request(served.base, "GET", url).body)["p8n"] == before
