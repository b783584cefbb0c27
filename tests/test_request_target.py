"""A request whose target the service cannot answer as asked: a malformed Host is 400
JSON (never a page with broken URLs), a path with an empty segment is 404 JSON (never
served, never redirected); a host site's own pages keep their own answers."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from werkzeug.sansio.utils import host_is_trusted
from werkzeug.test import EnvironBuilder, run_wsgi_app

from commentsvc.web.request_target import valid_host
from conftest import table_rows
from helpers import ALLOW, assert_error
from hypothesis_profiles import examples

URL = "/api/comments/?content_type=users.user&object_id=17&page_size=1"
DETAIL_ALLOW = "GET, PATCH, DELETE, HEAD, OPTIONS"
INVALID_HOST = "Invalid Host header."


@pytest.mark.parametrize("host", [
    "a b", "", "x/y", "x/y:80", "a@b", "user@example.com", "example.com:abc",
    "example.com:0", "example.com:65536", "example.com:", "example.com:080",
    "example.com:80:80", "ex\x01ample.com", "ex\tample.com", "exa_mple.com", "a..b",
    "-a.example", "a-.example", "bücher.de", "256.0.0.1", "1.2.3", "01.2.3.4", "1.2.3.4.",
    "[::1", "::1", "[::g]", "[fe80::1%25eth0]", "[::1]x", "x" * 64 + ".example",
    "a." * 127 + "example", "example.com,evil.example", "*",
])
def test_a_malformed_host_is_400_json(client, sample, host):
    response = client.get(URL, headers={"Host": host})
    assert_error(response, 400, INVALID_HOST)
    assert b"http://" not in response.data


# Page URLs are URIs: the host in lower case, an xn-- name as sent (not in its Unicode
# form, as Werkzeug's IRIs have it).
@pytest.mark.parametrize(("host", "base"), [
    ("example.com", "http://example.com"),
    ("EXAMPLE.com", "http://example.com"),
    ("example.com.", "http://example.com."),
    ("xn--bcher-kva.de", "http://xn--bcher-kva.de"),
    ("XN--BCHER-KVA.de", "http://xn--bcher-kva.de"),
    ("localhost:8080", "http://localhost:8080"),
    ("example.com:80", "http://example.com"),
    ("192.0.2.7:65535", "http://192.0.2.7:65535"),
    ("[::1]", "http://[::1]"),
    ("[2001:DB8::7]:8000", "http://[2001:db8::7]:8000"),
    ("[::ffff:192.0.2.7]", "http://[::ffff:192.0.2.7]"),
    ("a-b.c-d.example", "http://a-b.c-d.example"),
    ("x" * 63 + ".example", "http://" + "x" * 63 + ".example"),
])
def test_a_valid_host_makes_the_page_urls(client, sample, host, base):
    response = client.get(URL, headers={"Host": host})
    assert response.status_code == 200
    assert response.get_json()["p8n"]["next_url"] == (
        base + "/api/comments/?content_type=users.user&object_id=17&page_size=1&page=2")


# Names in xn-- form that Python's IDNA codec cannot turn into Unicode and back (straße
# comes back as strasse; xn--zz is no punycode at all) are DNS names all the same: their
# page URLs keep them as sent. (Called as a server calls the app: the test client decodes
# the host itself after each request, and fails on them.)
@pytest.mark.parametrize("host", ["xn--strae-oqa.de", "xn--fa-hia.de", "xn--zca.example",
                                  "xn--zz.example", "a.xn--zz"])
def test_a_host_whose_xn_name_does_not_decode_makes_the_page_urls(app, sample, host):
    path, _, query = URL.partition("?")
    for accept in ("application/json", "text/html"):
        environ = EnvironBuilder(path=path, query_string=query,
                                 headers={"Host": host, "Accept": accept}).get_environ()
        body, status, _ = run_wsgi_app(app, environ, buffered=True)
        assert status.startswith("200"), (host, accept, status)
        if accept == "application/json":
            assert json.loads(b"".join(body))["p8n"]["next_url"] == (
                f"http://{host}/api/comments/?content_type=users.user&object_id=17"
                "&page_size=1&page=2")


def test_the_default_port_of_the_scheme_is_left_out(client, sample):
    response = client.get(URL, base_url="https://example.com:443")
    assert response.get_json()["p8n"]["next_url"].startswith("https://example.com/api/")


@pytest.mark.parametrize(("method", "path", "allow"), [
    ("GET", "/api/comments/", ALLOW),
    ("HEAD", "/api/comments/", ALLOW),
    ("OPTIONS", "/api/comments/", ALLOW),
    ("GET", "/api/comments/100/", DETAIL_ALLOW),
    ("GET", "/api/nothing-here/", None),  # no route: no methods to name
    ("PUT", "/api/comments/", ALLOW),
    ("GET", "/not-the-api/", None),
    ("GET", "/api/schema/", "GET, HEAD"),
    ("GET", "/healthz", "GET, HEAD"),
    ("GET", "/api/comments", ALLOW),  # before the trailing-slash redirect is built
])
def test_the_host_is_checked_on_every_route_before_anything_else(client, community, method,
                                                                   path, allow):
    response = client.open(path, method=method, headers={"Host": "a b"})
    assert response.status_code == 400
    assert response.headers.get("Allow") == allow
    if method != "HEAD":
        assert response.get_json() == {"detail": INVALID_HOST}


def test_a_write_with_a_malformed_host_writes_nothing(app, client, community):
    before = table_rows(app)
    response = client.post("/api/comments/", headers={**community.auth("ann"), "Host": "x/y"},
                           json={"content_type": "users.user", "object_id": 1, "body": "hi"})
    assert_error(response, 400, INVALID_HOST)
    assert table_rows(app) == before


def without_host(app, protocol: str, server_name: str = "192.0.2.9",
                 server_port: str = "8000") -> tuple[str, dict]:
    """The status and JSON body of a request of ``protocol`` that carries no Host header
    (sent to the WSGI app itself: the test client always adds one)."""
    environ = EnvironBuilder(path="/api/comments/", query_string="page_size=1").get_environ()
    del environ["HTTP_HOST"]
    environ.update(SERVER_PROTOCOL=protocol, SERVER_NAME=server_name, SERVER_PORT=server_port)
    body, status, _headers = run_wsgi_app(app, environ, buffered=True)
    return status, json.loads(b"".join(body))


def test_http_1_0_without_host_gets_the_servers_own_address(app, sample):
    status, body = without_host(app, "HTTP/1.0")
    assert status == "200 OK"
    assert body["p8n"]["next_url"] == "http://192.0.2.9:8000/api/comments/?page_size=1&page=2"
    _status, body = without_host(app, "HTTP/1.0", "::1", "80")
    assert body["p8n"]["next_url"] == "http://[::1]/api/comments/?page_size=1&page=2"


def test_a_request_without_any_host_is_400(app, sample):
    missing = (400, {"detail": "A Host header is required."})
    status, body = without_host(app, "HTTP/1.1")
    assert (int(status[:3]), body) == missing
    # HTTP/1.0 on a Unix socket: no address either.
    status, body = without_host(app, "HTTP/1.0", "/run/svc.sock", "")
    assert (int(status[:3]), body) == missing


def test_a_trusted_proxys_forwarded_host_is_checked_too(app_factory):
    client = app_factory(COMMENTSVC_TRUSTED_PROXIES=1).test_client()
    response = client.get("/api/comments/", headers={"X-Forwarded-Host": "a b"})
    assert_error(response, 400, INVALID_HOST)
    response = client.get("/api/comments/?page_size=1",
                          headers={"X-Forwarded-Host": "comments.example"})
    assert response.status_code == 200
    assert response.get_json()["p8n"]["page_links"][0]["url"].startswith(
        "http://comments.example/")


EMPTY_SEGMENTS = [
    "//api/comments/", "///api/comments/", "/api//comments/", "/api/comments//",
    "//api/comments/100/", "/api/comments//100/", "/api/comments/100//",
    "//api/schema/", "/api//schema/", "//api/static/browsable.css",
    "/api/static//browsable.css", "//evil.example/api/comments/", "//healthz",
]


@pytest.mark.parametrize("path", EMPTY_SEGMENTS)
@pytest.mark.parametrize("method", ["GET", "HEAD", "POST", "OPTIONS"])
def test_a_path_with_an_empty_segment_is_404_json(client, community, path, method):
    # PATH_INFO as a server hands it over (the test client would read "//x" as a host).
    response = client.open("/", method=method, environ_overrides={"PATH_INFO": path},
                           headers=community.auth("ann"), json={"body": "hi"})
    assert response.status_code == 404, (method, path)
    assert "Location" not in response.headers
    assert "Allow" not in response.headers, (method, path)  # no resource, no methods
    if method != "HEAD":
        assert response.get_json() == {"detail": "Not found."}


def test_a_path_with_an_empty_segment_writes_nothing(app, client, community):
    before = table_rows(app)
    response = client.post("/", environ_overrides={"PATH_INFO": "//api/comments/"},
                           headers=community.auth("ann"),
                           json={"content_type": "users.user", "object_id": 1, "body": "hi"})
    assert response.status_code == 404
    assert table_rows(app) == before


@pytest.fixture
def host(host_factory):
    return host_factory()


def test_a_host_site_keeps_its_own_pages(host):
    """Mounted, the checks hold under the blueprint's /api/ prefix only: the host's own
    paths answer as the host decides."""
    client = host.test_client()
    response = client.get("/community/api/comments/", headers={"Host": "a b"})
    assert response.status_code == 400
    assert response.get_json() == {"detail": INVALID_HOST}
    for path in ("/community//api/comments/", "//community/api/comments/",
                 "/community/api//comments/", "/community/api/comments//",
                 "/community/api/comments//5/"):  # the last two: a route, slashes merged
        response = client.get("/", environ_overrides={"PATH_INFO": path})
        if path.startswith("/community//"):  # outside the prefix: the host's redirect
            assert response.status_code == 308
            assert response.headers["Location"] == "http://localhost/community/api/comments/"
        else:
            assert response.get_json() == {"detail": "Not found."}, path
    assert client.get("/", headers={"Host": "a b"}).data == b"host home"
    assert client.get("/", environ_overrides={"PATH_INFO": "//elsewhere"}).data == \
        b"host says 404"


HOST_TEXT = st.text(st.sampled_from("aZ09-._:[]@/ %\x00é"), max_size=24) | st.from_regex(
    r"\[[0-9a-fA-F:.%]{0,20}\](:[0-9]{0,6})?|[a-z0-9.-]{1,20}(:[0-9]{0,6})?", fullmatch=True)


@examples(500)
@given(host=HOST_TEXT)
def test_every_host_accepted_is_one_werkzeug_builds_urls_from(host):
    """A host the check lets through never becomes Werkzeug's empty host (the broken
    http:/// URLs); the converse need not hold (Werkzeug allows a..b or 999.1.1.1)."""
    if valid_host(host):
        assert host_is_trusted(host), host


def test_the_worked_examples_hold():
    import doctest

    from commentsvc.rules import schemas
    from commentsvc.web import request_target

    for module in (request_target, schemas):
        result = doctest.testmod(module)
        assert result.attempted and not result.failed, module.__name__
