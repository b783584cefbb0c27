"""The headers every answer is sent with are those Werkzeug would send, whether or not
the response skips Werkzeug's copy of them (web.responses.APIResponse)."""

from __future__ import annotations

import pytest
from werkzeug.test import EnvironBuilder
from werkzeug.wrappers import Response

from commentsvc.web.responses import ALLOW, APIResponse, encoded_response

ENVIRON = EnvironBuilder("/api/comments/", base_url="http://example.test/").get_environ()
CASES = {
    "200 with a body": (b'{"results":[]}', 200, {"ETag": '"abc"'}),
    "201 with an IRI Location": (b"{}", 201, {"Location": "http://example.test/ü/1/"}),
    "201 with a URI Location": (b"{}", 201, {"Location": "https://example.test:8443/c/1/"}),
    "201 with an upper-case host": (b"{}", 201, {"Location": "http://Example.test/c/1/"}),
    "201 with a port of a leading zero": (b"{}", 201, {"Location": "http://a.test:080/1/"}),
    "201 with a query": (b"{}", 201, {"Location": "http://a.test/1/?"}),
    "201 with a relative Location": (b"{}", 201, {"Location": "/c/1/"}),
    "201 with a space": (b"{}", 201, {"Location": "http://a.test/c 1/"}),
    "200 with a Content-Location": (b"{}", 200, {"Content-Location": "/ü/"}),
    "204": (b"", 204, None),
    "304": (b"", 304, {"ETag": '"abc"', "Cache-Control": "max-age=0"}),
    "404": (b'{"detail":"Not found."}', 404, None),
}


def sent(response: Response) -> list[tuple[str, str]]:
    return response.get_wsgi_headers(ENVIRON).to_wsgi_list()


@pytest.mark.parametrize("case", CASES)
def test_the_headers_sent_are_werkzeugs(case):
    body, status, headers = CASES[case]
    response = encoded_response(body, status, headers)
    plain = Response(body, status=status, mimetype="application/json",
                     headers=list(response.headers.items()))
    expected = sent(plain)
    if status == 304:  # the one difference, on purpose: a 304 keeps Allow
        expected.append(("Allow", ALLOW))
    assert sent(response) == expected


def test_a_response_with_a_known_length_is_sent_with_its_own_headers():
    response = encoded_response(b'{"results":[]}', 200, {"ETag": '"abc"'})
    assert response.get_wsgi_headers(ENVIRON) is response.headers


def test_a_new_comments_location_is_sent_with_its_own_headers():
    response = encoded_response(b"{}", 201, {"Location": "http://127.0.0.1:8000/api/comments/7/"})
    assert response.get_wsgi_headers(ENVIRON) is response.headers


@pytest.mark.parametrize("status", [201, 204, 304])
def test_a_response_werkzeug_rewrites_is_sent_with_a_copy(status):
    headers = {"Location": "/ü/1/"} if status == 201 else None
    response = APIResponse(b"", status=status, headers=headers)
    assert response.get_wsgi_headers(ENVIRON) is not response.headers


@pytest.mark.parametrize("location", ["http://Example.test/c/1/", "http://a.test:080/1/",
                                      "http://a.test/1/?", "/c/1/", "http://a.test/c 1/",
                                      "http://a.test/1/#top"])
def test_a_location_werkzeug_may_rewrite_is_sent_with_a_copy(location):
    response = encoded_response(b"{}", 201, {"Location": location})
    assert response.get_wsgi_headers(ENVIRON) is not response.headers
