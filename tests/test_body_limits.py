"""COMMENTSVC_MAX_REQUEST_BYTES holds for every body a write reads: JSON, urlencoded and
multipart, sent with a Content-Length or chunked (no length; the WSGI server decodes the
chunks and says so with ``wsgi.input_terminated``, as gunicorn does). A body of exactly
the limit is read; one byte more is 413 and writes nothing. test_body_limits_http.py sends
the same bodies to a real gunicorn."""

from __future__ import annotations

import io

import pytest

from conftest import Community, table_rows
from helpers import assert_error
from sized_bodies import KINDS, sized

LIMIT = 1000
URL = "/api/comments/"
DETAIL_URL = "/api/comments/102/"  # on ann's profile: she may mark it read
DETAIL_ALLOW = "GET, PATCH, DELETE, HEAD, OPTIONS"
BROWSER = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}
NEW = {"content_type": "comics.comicpage", "object_id": 10, "body": "Sized"}
TOO_LARGE = "The request body is too large."

# (name, method, url, fields, extra headers, status when accepted, Allow of its errors)
ENDPOINTS = {
    "post": ("POST", URL, NEW, {}, 201, "GET, POST, HEAD, OPTIONS"),
    "mark-read": ("PATCH", DETAIL_URL, {"is_read": True}, {}, 200, DETAIL_ALLOW),
    "browsable form": ("POST", URL + "?format=api", NEW, BROWSER, 201,
                       "GET, POST, HEAD, OPTIONS"),
}
CASES = [(endpoint, kind) for endpoint in ENDPOINTS for kind in KINDS
         if not (endpoint == "browsable form" and kind == "json")]


@pytest.fixture
def limited(app_factory):
    app = app_factory(COMMENTSVC_MAX_REQUEST_BYTES=LIMIT)
    return app, Community(app), app.test_client()


def send(client, method: str, url: str, body: bytes, content_type: str, headers: dict,
         chunked: bool):
    """The body with a Content-Length, or chunked: no length, read to its end as a
    server that decodes chunks hands it over."""
    if not chunked:
        return client.open(url, method=method, data=body, content_type=content_type,
                           headers=headers)
    return client.open(url, method=method, input_stream=io.BytesIO(body),
                       content_type=content_type,
                       headers={**headers, "Transfer-Encoding": "chunked"},
                       environ_overrides={"wsgi.input_terminated": True})


@pytest.mark.parametrize("chunked", [False, True], ids=["length", "chunked"])
@pytest.mark.parametrize(("endpoint", "kind"), CASES)
def test_a_body_of_exactly_the_limit_is_read(limited, endpoint, kind, chunked):
    app, community, client = limited
    method, url, fields, headers, accepted, _ = ENDPOINTS[endpoint]
    response = send(client, method, url, sized(kind, fields, LIMIT), KINDS[kind],
                    {**community.auth("ann"), **headers}, chunked)
    assert response.status_code == accepted, response.get_data(as_text=True)[:300]
    if method == "PATCH":
        assert response.get_json()["is_read"] is True
    else:
        assert client.get(response.headers["Location"]).get_json()["body"] == "Sized"


@pytest.mark.parametrize("chunked", [False, True], ids=["length", "chunked"])
@pytest.mark.parametrize(("endpoint", "kind"), CASES)
def test_one_byte_over_the_limit_is_413_and_writes_nothing(limited, endpoint, kind, chunked):
    app, community, client = limited
    method, url, fields, headers, _, allow = ENDPOINTS[endpoint]
    before = table_rows(app)
    response = send(client, method, url, sized(kind, fields, LIMIT + 1), KINDS[kind],
                    {**community.auth("ann"), **headers}, chunked)
    assert_error(response, 413, TOO_LARGE, allow)
    assert table_rows(app) == before


@pytest.mark.parametrize("kind", KINDS)
def test_a_chunked_body_far_over_the_default_limit_is_413(app, client, community, kind):
    """The default limit is 64 KiB, where Werkzeug used to cut a chunked form short and
    let the write through with what it had read."""
    before = table_rows(app)
    body = sized(kind, {**NEW, "body": "x" * 4000}, 65536 * 3)
    response = send(client, "POST", URL, body, KINDS[kind], community.auth("ann"), True)
    assert_error(response, 413, TOO_LARGE)
    assert table_rows(app) == before


def test_the_size_is_checked_before_the_media_type(limited):
    app, community, client = limited
    response = send(client, "POST", URL, b"x" * (LIMIT + 1), "text/plain",
                    community.auth("ann"), True)
    assert_error(response, 413, TOO_LARGE)
    response = send(client, "POST", URL, b"x" * LIMIT, "text/plain", community.auth("ann"), True)
    assert_error(response, 415, 'Unsupported media type "text/plain" in request.')


def test_a_chunked_body_the_server_does_not_end_is_411_and_writes_nothing(limited):
    """Without ``wsgi.input_terminated`` the app cannot tell where a chunked body ends, so
    it reads none of it and asks for a length."""
    app, community, client = limited
    before = table_rows(app)
    response = client.post(URL, input_stream=io.BytesIO(sized("json", NEW, 100)),
                           content_type="application/json",
                           headers={**community.auth("ann"), "Transfer-Encoding": "chunked"})
    assert_error(response, 411, "A request body needs a Content-Length header here.")
    assert table_rows(app) == before


@pytest.mark.parametrize("kind", KINDS)
def test_a_body_shorter_than_its_content_length_is_400_and_writes_nothing(limited, kind):
    """The client stopped sending: what arrived is not taken for the whole body."""
    app, community, client = limited
    before = table_rows(app)
    body = sized(kind, NEW, 300)
    response = client.post(URL, input_stream=io.BytesIO(body), content_type=KINDS[kind],
                           headers=community.auth("ann"),
                           environ_overrides={"CONTENT_LENGTH": str(len(body) + 50),
                                              "wsgi.input_terminated": True})
    assert_error(response, 400, "The request body is shorter than its Content-Length.")
    assert table_rows(app) == before
