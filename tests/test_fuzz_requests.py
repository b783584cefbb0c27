"""Any query string on either resource (garbage, huge, repeated, non-ASCII, SQL, broken
percent escapes) is answered 200, 400 or 404 in JSON, never a server error."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from hypothesis_profiles import examples
from injections import INJECTIONS

NAMES = st.sampled_from(["page", "page_size", "content_type", "object_id", "format",
                         "%70age", "page[]", "Page", ""]) | st.text(max_size=8)
VALUES = st.one_of(
    st.text(),
    st.integers(-(2**70), 2**70).map(str),
    st.sampled_from(INJECTIONS),
    st.sampled_from(["", "last", "json", "api", "users.user", "comics.comicpage", "0", "-0",
                     "007", "1e3", "1.0", "+1", " 1", "١٢", "９", "9" * 5000, "%ff%fe",
                     "%00", "%zz", "%", "&", "=", "\x00", "\r\n"]),
)
# A parameter as the client spelled it: percent-encoded, or its characters sent raw (what
# a careless client does with &, = and %), or invalid UTF-8 bytes.
PARAMS = st.tuples(NAMES, VALUES).flatmap(lambda nv: st.sampled_from([
    (quote(nv[0], safe="") + "=" + quote(nv[1], safe="")).encode(),
    (nv[0] + "=" + nv[1]).encode("utf-8", "surrogatepass"),
    nv[0].encode("utf-8", "surrogatepass"),
    quote(nv[0], safe="").encode() + b"=" + b"\xff\xfe" + nv[1][:3].encode("utf-8", "replace"),
]))
QUERIES = st.lists(PARAMS, max_size=8).map(b"&".join)
PATHS = st.sampled_from(["/api/comments/", "/api/comments/100/", "/api/comments/999/"])


def assert_json_or_page(response, query: bytes) -> None:
    assert response.status_code in (200, 400, 404), (query, response.get_data()[:300])
    if response.mimetype == "text/html":  # format=api asked for the page
        assert response.status_code == 200 and b"format" in query
        return
    assert response.mimetype == "application/json", (query, response.mimetype)
    body = json.loads(response.get_data())
    if response.status_code != 200:
        assert isinstance(body, dict) and body, body


@examples(200)  # a request takes about a millisecond
@given(path=PATHS, query=QUERIES)
@example(path="/api/comments/", query=b"page=" + b"9" * 100_000)
@example(path="/api/comments/", query=b"&".join([b"page_size=1"] * 2000))
@example(path="/api/comments/", query=b"object_id=1&content_type=users.user%00")
@example(path="/api/comments/", query=b"format=api&page=%ff")
def test_any_query_string_is_200_400_or_404_json(client, community, path, query):
    # WSGI carries the query string as text holding one byte per character (latin-1).
    assert_json_or_page(client.get(path, query_string=query.decode("latin-1")), query)


@pytest.mark.parametrize("path", [
    "/api/comments/" + quote(text, safe="") + "/" for text in INJECTIONS
] + ["/api/comments/1%00/", "/api/comments/%ff/", "/api/comments/" + "9" * 5000 + "/",
     "/api/comments/1/2/"])
def test_junk_comment_ids_are_404_json(client, community, path):
    for method in ("GET", "PATCH", "DELETE"):
        response = client.open(path, method=method, headers=community.auth("carol"),
                               json={"is_read": True})
        assert response.status_code == 404, (method, path)
        assert response.get_json() == {"detail": "Not found."}
