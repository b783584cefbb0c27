"""The production stack (`commentsvc serve`: nginx in front of gunicorn) against slow and
malformed clients, on each database: slow clients never reach the app, errors answered in
front are JSON and name a cause only where nginx knows it, and a client's forwarded headers
are replaced by nginx's own.

Each stack is real: nginx and gunicorn processes on a free loopback port. Without nginx
these tests skip, except in CI (CI=true, set by .ci/run, which installs it), where they fail.
"""

from __future__ import annotations

import http.server
import json
import os
import random
import re
import socket
import socketserver
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bench.slow_clients import Probe, Serve, Trickle
from commentsvc.operations import demo, front
from commentsvc.storage import engine
from conftest import make_app
from harness.servers import free_port

MAX_REQUEST_BYTES = 4096
SLACK_SECONDS = 3  # beyond nginx's client timeout, for a loaded machine


def require_nginx() -> str:
    found = front.find_nginx()
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI needs nginx (apt-get install nginx)")
        pytest.skip("nginx is not installed")
    return found


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def stack(request, tmp_path_factory):
    """The stack serving 30 demo comments on a fresh database of each kind."""
    require_nginx()
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('front') / 'front.sqlite3'}"
    else:
        url = request.getfixturevalue("postgres_url")
    app = make_app(url)
    with app.app_context():
        with engine.writing(engine.get_engine()) as conn:
            demo.seed(conn, comments=30, targets=1, seed=1, progress=False)
        engine.get_engine().dispose()
    with Serve(url, env={"COMMENTSVC_MAX_REQUEST_BYTES": str(MAX_REQUEST_BYTES)}) as served:
        yield served


def exchange(port: int, data: bytes, timeout: float = 15) -> tuple[bytes, float]:
    """Send raw bytes, read until the server closes; what came back and when it closed."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        received = b""
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except ConnectionResetError:
            pass
    return received, time.monotonic() - started


def parse(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split(" ")[1]), {k.lower(): v for k, v in headers.items()}, body


def app_requests(served: Serve) -> list[dict]:
    """The request log lines the app wrote so far (one JSON object per request)."""
    lines = [line for line in served.output().splitlines() if line.startswith('{"time"')]
    return [json.loads(line) for line in lines]


def test_slow_clients_leave_other_clients_and_healthz_served(stack):
    attackers = [Trickle(stack.port, "headers", 15).start(),
                 Trickle(stack.port, "body", 15).start()]
    try:
        time.sleep(1)  # 30 connections held, more than gunicorn's 2 workers
        normal = Probe(stack.base, "/api/comments/?page_size=10", pause=0.1, timeout=10)
        health = Probe(stack.base, "/healthz", pause=0.5, timeout=10)
        normal.start(), health.start()
        time.sleep(8)
        normal.stop(), health.stop()
    finally:
        for attacker in attackers:
            attacker.stop()
    assert len(normal.answers) >= 10 and len(health.answers) >= 5
    assert {status for status, _elapsed in normal.answers} == {200}
    assert {status for status, _elapsed in health.answers} == {200}
    assert max(elapsed for _status, elapsed in health.answers) < 1


STALLED = {
    "short body": b"POST /api/comments/ HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{}",
    "stalled chunks": b"POST /api/comments/ HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                      b"5\r\n{\"a\":",
    "unfinished headers": b"GET /healthz HTTP/1.1\r\nHost: x\r\n",
}


def test_stalled_requests_are_closed_in_front_within_seconds(stack):
    before = len(app_requests(stack))
    with ThreadPoolExecutor(len(STALLED)) as pool:  # side by side: one timeout's wait
        outcomes = dict(zip(STALLED, pool.map(lambda data: exchange(stack.port, data),
                                              STALLED.values()), strict=True))
    for name, (received, elapsed) in outcomes.items():
        # nginx records a 408 and closes the connection without writing an answer;
        # what matters is that it happens in seconds, in front of the app.
        assert received == b"", name
        assert (front.CLIENT_TIMEOUT_SECONDS - 1 < elapsed
                < front.CLIENT_TIMEOUT_SECONDS + SLACK_SECONDS), name
    assert len(app_requests(stack)) == before


@pytest.mark.parametrize(("request_bytes", "status", "detail"), [
    (b"POST /api/comments/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
     b"Content-Length: %d\r\nConnection: close\r\n\r\n" % (MAX_REQUEST_BYTES + 1)
     + b"x" * (MAX_REQUEST_BYTES + 1), 413, "The request body is too large."),
    (b"POST /api/comments/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
     b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
     + b"%x\r\n" % (MAX_REQUEST_BYTES + 1) + b"x" * (MAX_REQUEST_BYTES + 1) + b"\r\n0\r\n\r\n",
     413, "The request body is too large."),
    (b"GET /api/comments/?" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
     414, "The request URI is too long."),
    (b"GET /api/comments/ HTTP/1.1\r\nHost: x\r\nCookie: " + b"c" * 9000 + b"\r\n\r\n",
     431, "The request headers are too large."),
    (b"NOT AN HTTP REQUEST\r\n\r\n", 400, "Bad request."),
    (b"GET /api/comments/ HTTP/1.1\r\n\r\n", 400,  # HTTP/1.1 without Host, as the app says
     "A Host header is required."),
    # Hosts nginx refuses that the app refuses too, in the app's words.
    (b"GET /api/comments/ HTTP/1.1\r\nHost: a b\r\n\r\n", 400, "Invalid Host header."),
    (b"GET /api/comments/ HTTP/1.1\r\nHost: a..b\r\n\r\n", 400, "Invalid Host header."),
    (b"GET /api/comments/ HTTP/1.1\r\nHost: a\x01b\r\n\r\n", 400, "Invalid Host header."),
    # Where nginx cannot tell the cause (it stopped reading before the Host, or it keeps
    # nothing of an empty one), it names none: never "A Host header is required."
    (b"GET /api/comments/%00/ HTTP/1.1\r\nHost: x\r\n\r\n", 400, "Bad request."),
    (b"GET /api/comments/../../../x HTTP/1.1\r\nHost: x\r\n\r\n", 400, "Bad request."),
    (b"GET /api/comments/ HTTP/1.1\r\nHost: \r\n\r\n", 400, "Bad request."),
    (b"GET /api/comments/ HTTP/1.1\r\nNo colon\r\nHost: x\r\n\r\n", 400, "Bad request."),
    (b"GET /api/comments/ HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400, "Bad request."),
    # Refused for another reason than its Host: a valid one, or none on HTTP/1.0.
    (b"GET /api/comments/ HTTP/1.1\r\nHost: x\r\nContent-Length: z\r\n\r\n", 400,
     "Bad request."),
    (b"GET /api/comments/ HTTP/1.0\r\nContent-Length: z\r\n\r\n", 400, "Bad request."),
    (b"TRACE /api/comments/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 405,
     'Method "TRACE" not allowed.'),
    (b"POST /api/comments/ HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n"
     b"Connection: close\r\n\r\n", 501, "The transfer coding of the request is not supported."),
    (b"GET /api/comments/ HTTP/2.0\r\nHost: x\r\nConnection: close\r\n\r\n", 505,
     "The HTTP version of the request is not supported."),
], ids=["413-length", "413-chunked", "414", "431", "400-request-line", "400-no-host",
        "400-host-with-space", "400-host-empty-label", "400-host-control-character",
        "400-nul-in-path", "400-above-root", "400-empty-host", "400-header-line",
        "400-two-host-lines", "400-content-length", "400-http10-content-length", "405-trace",
        "501-transfer-coding", "505-version"])
def test_errors_answered_in_front_are_json(stack, request_bytes, status, detail):
    before = len(app_requests(stack))
    received, _elapsed = exchange(stack.port, request_bytes)
    got, headers, body = parse(received)
    assert got == status
    assert headers["content-type"] == "application/json"
    assert headers["x-content-type-options"] == "nosniff"
    assert json.loads(body) == {"detail": detail}
    assert len(app_requests(stack)) == before


def test_every_host_the_app_takes_has_the_form_nginx_checks():
    """nginx says "Invalid Host header." for a Host without front.HOST_FORM: the app must
    refuse every such Host (valid_host), over the API's examples and random strings."""
    from commentsvc.web.request_target import valid_host

    taken = ["example.com", "Example.COM.", "xn--bcher-kva.de", "localhost:8080", "a-b.c",
             "192.0.2.1:443", "[::1]", "[2001:db8::7]:80", "[::ffff:192.0.2.1]", "x:65535"]
    assert all(valid_host(host) and re.fullmatch(front.HOST_FORM, host) for host in taken)
    refused = ["a b", "a..b", "", ".", "x/y", "a@b", "_", "host:", "host:0", "-a.com",
               "victim.example,evil.example", "bücher.de", "a\x01b", "[::1", "host:080"]
    assert not any(re.fullmatch(front.HOST_FORM, host) for host in refused)
    assert not any(valid_host(host) for host in refused)
    draw = random.Random(7)
    for _ in range(20000):
        host = "".join(draw.choices("aZ09.-:[]_, /@", k=draw.randint(1, 9)))
        assert re.fullmatch(front.HOST_FORM, host) or not valid_host(host), host


def test_a_body_at_the_apps_limit_reaches_the_app(stack):
    body = b'{"body": "' + b"x" * (MAX_REQUEST_BYTES - 12) + b'"}'
    assert len(body) == MAX_REQUEST_BYTES
    received, _elapsed = exchange(stack.port, (
        b"POST /api/comments/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)) + body)
    status, headers, _body = parse(received)
    assert status == 401  # the app's own answer: nobody is signed in
    assert "x-request-id" in headers


def test_forwarded_headers_are_nginxs_never_the_clients(stack):
    received, _elapsed = exchange(stack.port, (
        b"GET /api/comments/?page_size=5 HTTP/1.1\r\nHost: comics.example:8080\r\n"
        b"X-Forwarded-Proto: https\r\nX-Forwarded-Host: evil.example\r\n"
        b"X-Forwarded-For: 203.0.113.9\r\nForwarded: proto=https;host=evil.example\r\n"
        b"Connection: close\r\n\r\n"))
    status, _headers, body = parse(received)
    assert status == 200
    page = json.loads(body)["p8n"]
    assert page["next_url"] == "http://comics.example:8080/api/comments/?page_size=5&page=2"
    assert app_requests(stack)[-1]["remote_addr"] == "127.0.0.1"


def test_an_http10_request_without_host_gets_links_on_the_servers_address(stack):
    """As under gunicorn alone (API.md, "Host and path"): nginx passes the address the
    request came to as its Host."""
    received, _elapsed = exchange(stack.port, b"GET /api/comments/ HTTP/1.0\r\n\r\n")
    status, _headers, body = parse(received)
    assert status == 200
    assert json.loads(body)["p8n"]["next_url"] == (
        f"http://127.0.0.1:{stack.port}/api/comments/?page=2")


@pytest.fixture
def nginx_alone(runtime_dir):
    """nginx with the stack's configuration but no gunicorn behind it (or one that never
    answers, when the test opens the socket): start(app_timeout) -> its port and socket."""
    program = require_nginx()
    runtime = runtime_dir / "run"
    runtime.mkdir()
    started: list[subprocess.Popen] = []

    def start(app_timeout: int = 35, writes: bool = False) -> tuple[str, Path]:
        port = free_port()
        config = front.FrontConfig(host="127.0.0.1", port=port, socket=runtime / "app.sock",
                                   max_body_bytes=MAX_REQUEST_BYTES,
                                   app_timeout_seconds=app_timeout,
                                   write_socket=runtime / "writes.sock" if writes else None)
        conf = front.prepare_runtime_dir(runtime, config)
        started.append(subprocess.Popen([program, "-e", "stderr", "-p", f"{runtime}/",
                                         "-c", str(conf)], stderr=subprocess.DEVNULL))
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return port, runtime / "app.sock"
            except OSError:
                assert time.monotonic() < deadline, "nginx did not start"
                time.sleep(0.1)

    yield start
    for process in started:
        process.terminate()
        process.wait(timeout=10)


def test_gunicorn_down_is_a_json_502(nginx_alone):
    port, _socket = nginx_alone()
    received, _elapsed = exchange(port, b"GET /api/comments/ HTTP/1.1\r\nHost: x\r\n"
                                        b"Connection: close\r\n\r\n")
    status, headers, body = parse(received)
    assert status == 502
    assert headers["content-type"] == "application/json"
    assert headers["retry-after"] == "5"
    assert json.loads(body) == {"detail": "The service is unavailable. Try again shortly."}


def test_gunicorn_not_answering_is_a_json_504(nginx_alone):
    port, path = nginx_alone(app_timeout=1)
    with socket.socket(socket.AF_UNIX) as silent:  # accepts, reads, never answers
        silent.bind(str(path))
        os.chmod(path, 0o777)
        silent.listen()
        received, _elapsed = exchange(port, b"GET /api/comments/ HTTP/1.1\r\nHost: x\r\n"
                                            b"Connection: close\r\n\r\n")
    status, headers, body = parse(received)
    assert status == 504
    assert headers["content-type"] == "application/json"
    assert json.loads(body) == {"detail": "The service did not answer in time."}


class _Named(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """An upstream on a unix socket that answers every request with its own name, keeping
    connections open (HTTP/1.1), and counts the connections it was opened."""

    daemon_threads = True

    def __init__(self, path: Path, name: str):
        self.name = name
        self.connections = 0

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def answer(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.dumps({"served_by": name, "method": self.command}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_HEAD = do_OPTIONS = do_POST = do_PUT = do_PATCH = do_DELETE = answer

            def log_message(self, *_args) -> None:
                pass

        super().__init__(str(path), Handler)
        os.chmod(path, 0o777)  # nginx's workers run as nobody under root

    def process_request(self, request, client_address) -> None:
        self.connections += 1
        super().process_request(request, client_address)


@pytest.fixture
def named_upstreams():
    """start(paths) -> upstreams answering with their names, served until the test ends."""
    servers: list[_Named] = []

    def start(**paths: Path) -> list[_Named]:
        started = []
        for name, path in paths.items():
            server = _Named(path, name)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            started.append(server)
        servers.extend(started)
        return started

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def served_by(port: int, method: str) -> str | None:
    """Which upstream answered ``method`` on the list (None for HEAD, which has no body:
    then its status says it was answered)."""
    body = b"{}" if method in ("POST", "PUT", "PATCH") else b""
    received, _elapsed = exchange(port, (
        f"{method} /api/comments/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body)
    status, _headers, answer = parse(received)
    assert status == 200, received
    return json.loads(answer)["served_by"] if answer else None


@pytest.mark.parametrize(("method", "upstream"), [
    ("GET", "reads"), ("OPTIONS", "reads"),
    ("POST", "writes"), ("PUT", "writes"), ("PATCH", "writes"), ("DELETE", "writes")])
def test_writes_go_to_the_writers_gunicorn_and_reads_to_the_others(
        nginx_alone, named_upstreams, method, upstream):
    port, path = nginx_alone(writes=True)
    named_upstreams(reads=path, writes=path.with_name("writes.sock"))
    assert served_by(port, method) == upstream


def test_head_goes_to_the_readers(nginx_alone, named_upstreams):
    port, path = nginx_alone(writes=True)
    named_upstreams(reads=path)  # no writers' upstream: a HEAD sent there would be a 502
    assert served_by(port, "HEAD") is None


@pytest.mark.parametrize("method", ["GET", "POST", "DELETE"])
def test_without_a_writers_gunicorn_every_method_goes_to_the_one(
        nginx_alone, named_upstreams, method):
    port, path = nginx_alone()
    named_upstreams(reads=path)
    assert served_by(port, method) == "reads"


def test_the_front_keeps_its_connections_to_gunicorn_open(nginx_alone, named_upstreams):
    """Each client request on a new connection to nginx, in turn; nginx passes them all
    on one connection it keeps to each gunicorn (a connection a request costs both
    gunicorn and nginx a unix socket's accept and close)."""
    port, path = nginx_alone(writes=True)
    reads, writes = named_upstreams(reads=path, writes=path.with_name("writes.sock"))
    for _ in range(5):
        assert served_by(port, "GET") == "reads"
        assert served_by(port, "POST") == "writes"
    assert (reads.connections, writes.connections) == (1, 1)


def test_a_request_line_nginx_takes_is_served_by_gunicorn_too(stack):
    """Between gunicorn's default limit (4,094 bytes) and nginx's (8 KB) a request line
    reaches the app: 5,000 digits of page_size are served as the largest page size."""
    line = b"GET /api/comments/?page_size=" + b"9" * 5000 + b" HTTP/1.1"
    received, _elapsed = exchange(stack.port, line + b"\r\nHost: x\r\nConnection: close\r\n\r\n")
    status, headers, body = parse(received)
    assert (status, headers["content-type"]) == (200, "application/json")
    assert len(json.loads(body)["results"]) == 30


def test_a_thousand_slow_bodies_from_one_client_shut_no_one_out(stack):
    """1,200 connections that each sent a POST's headers and one byte of its body (nginx
    keeps each until 5 s without a byte): other clients are still answered. With nginx's
    default of 1,024 connections per worker they were not."""
    head = (b"POST /api/comments/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 500\r\n\r\n{")
    held: list[socket.socket] = []
    try:
        for _ in range(1200):
            held.append(socket.create_connection(("127.0.0.1", stack.port), timeout=5))
            held[-1].sendall(head)
        time.sleep(0.5)  # nginx has taken them
        answers = [request_status(stack.base, "/api/comments/?page_size=10") for _ in range(5)]
    finally:
        for sock in held:
            sock.close()
    assert answers == [200] * 5


def request_status(base: str, path: str) -> int:
    from harness.servers import request

    return request(base, "GET", path, timeout=3).status


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_a_client_that_half_closes_after_its_request_still_gets_the_answer(stack, method):
    """A client may shut its side of the connection once its request is sent (shutdown
    SHUT_WR) and read on: nginx passes the answer on rather than taking it for a client
    gone (a post would be written and its 201 lost)."""
    body = b'{"content_type": "users.user", "object_id": 1, "body": "half"}'
    request_bytes = (f"{method} /api/comments/ HTTP/1.1\r\nHost: x\r\n".encode()
                     + (b"Content-Type: application/json\r\nContent-Length: %d\r\n" % len(body)
                        if method == "POST" else b"")
                     + b"Connection: close\r\n\r\n" + (body if method == "POST" else b""))
    with socket.create_connection(("127.0.0.1", stack.port), timeout=15) as sock:
        sock.sendall(request_bytes)
        sock.shutdown(socket.SHUT_WR)
        received = b""
        while part := sock.recv(65536):
            received += part
    status, headers, _body = parse(received)
    assert status == (200 if method == "GET" else 401), received[:300]


def test_the_stacks_502_says_when_to_retry_as_the_apps_503_does(monkeypatch, runtime_dir):
    """serve gives nginx the service's COMMENTSVC_RETRY_AFTER for its 502 (gunicorn down
    or restarting), and only for it."""
    from commentsvc.operations import serving

    monkeypatch.setenv("COMMENTSVC_RETRY_AFTER", "9")
    stack = serving.Stack("127.0.0.1", 8000, 1, runtime_dir, "nginx", "gunicorn.conf.py")
    conf = stack.conf.read_text()
    assert conf.count("add_header Retry-After 9 always;") == 2  # both servers' 502
    location = conf.index("location = /.commentsvc-front/502")
    assert "Retry-After 9" in conf[location:conf.index("}", location)]
