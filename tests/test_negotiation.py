"""Which representation a request gets: JSON, the browsable page, 404 or 406, on the list,
one comment and OPTIONS alike; and a JSON answer is the same whatever Accept said."""

from __future__ import annotations

import pytest

from conftest import table_rows
from helpers import ALLOW, assert_error

URL = "/api/comments/"
DETAIL = "/api/comments/1185/"
DETAIL_ALLOW = "GET, PATCH, DELETE, HEAD, OPTIONS"
BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
HTML = "text/html; charset=utf-8"
JSON = "application/json"

# (query, Accept or None for no header, what is answered)
CASES = [
    ("", None, JSON),
    ("", "", JSON),
    ("", " , ", JSON),
    ("", "*/*", JSON),
    ("", "application/*", JSON),
    ("", "application/json", JSON),
    ("", "application/json; charset=utf-8", JSON),
    ("", BROWSER, HTML),
    ("", "text/html", HTML),
    ("", "text/*", HTML),
    ("", "application/json, text/html", JSON),  # a tie goes to JSON
    ("", "text/html, application/json", JSON),
    ("", "text/html, application/json;q=0.9", HTML),
    ("", "application/json;q=0, text/html", HTML),
    ("", "text/html;q=0.5, */*", JSON),
    ("", "*/*, text/html", HTML),  # equal qualities: the range that names a type wins
    ("", "application/*;q=0.5, text/html;q=0.5", HTML),
    ("", "text/*;q=0.5, application/json;q=0.5", JSON),
    ("", "text/plain", 406),
    ("", "image/png, application/xml", 406),
    ("", "*/*;q=0", 406),
    ("", "garbage", 406),
    ("format=json", BROWSER, JSON),  # format wins over Accept
    ("format=json", "text/plain", JSON),
    ("format=api", None, HTML),
    ("format=api", "application/json", HTML),
    ("format=api", "text/plain", HTML),
    ("format=xml", BROWSER, 404),
    ("format=API", None, 404),
    ("format=json&format=api", None, HTML),  # the last value counts
    ("format=api&format=", None, JSON),  # the last value is empty: missing
    ("format=", BROWSER, HTML),
]


def get(client, path: str, query: str, accept: str | None, method: str = "GET"):
    headers = {} if accept is None else {"Accept": accept}
    return client.open(path + (f"?{query}" if query else ""), method=method, headers=headers)


def assert_answered(response, expected, allow: str = ALLOW) -> None:
    assert response.headers["Vary"] == "Accept"
    assert response.headers["Allow"] == allow
    if expected == 406:
        assert_error(response, 406, "Could not satisfy the request Accept header.", allow)
    elif expected == 404:
        assert_error(response, 404, "Not found.", allow)
    else:
        assert response.status_code == 200, response.get_data(as_text=True)
        assert response.headers["Content-Type"] == expected


@pytest.mark.parametrize(("query", "accept", "expected"), CASES)
def test_the_list_is_negotiated(client, sample, query, accept, expected):
    assert_answered(get(client, URL, query, accept), expected)


@pytest.mark.parametrize(("query", "accept", "expected"), CASES)
def test_one_comment_is_negotiated(client, sample, query, accept, expected):
    assert_answered(get(client, DETAIL, query, accept), expected, DETAIL_ALLOW)


@pytest.mark.parametrize(("query", "accept", "expected"), CASES)
def test_options_is_negotiated(client, query, accept, expected):
    assert_answered(get(client, URL, query, accept, "OPTIONS"), expected)


def test_head_of_the_page_has_its_headers_and_no_body(client, sample):
    get_, head = (get(client, URL, "page=2", BROWSER, method) for method in ("GET", "HEAD"))
    assert head.status_code == 200 and head.data == b""
    assert head.headers["Content-Type"] == HTML
    assert head.headers["Content-Length"] == get_.headers["Content-Length"]
    assert head.headers["ETag"] == get_.headers["ETag"]


@pytest.mark.parametrize("accept", [None, "*/*", "application/json", "application/*",
                                    "text/html, application/json"])
def test_json_is_the_same_bytes_whatever_accept_said(client, sample, accept):
    plain = client.get(URL + "?page=2")
    answer = get(client, URL, "page=2", accept)
    assert answer.data == plain.data and answer.headers["ETag"] == plain.headers["ETag"]


def test_errors_stay_json_on_the_page(client, sample):
    assert_error(client.get(URL + "?format=api&page=99"), 404, "Invalid page.")
    response = get(client, URL, "object_id=3", BROWSER)
    assert response.status_code == 400 and response.headers["Content-Type"] == JSON
    assert_error(client.get("/api/comments/999999/?format=api"), 404, "Not found.",
                 DETAIL_ALLOW)


def test_a_post_that_cannot_be_answered_writes_nothing(app, client, community):
    before = table_rows(app)
    response = client.post(URL, data={"content_type": "comics.comicpage", "object_id": "10",
                                      "body": "hi"},
                           headers={**community.auth("ann"), "Accept": "text/plain"})
    assert_error(response, 406, "Could not satisfy the request Accept header.")
    assert table_rows(app) == before
