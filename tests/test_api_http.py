"""Headers, methods and errors of /api/comments/: every answer is JSON with Allow and Vary."""

from __future__ import annotations

import pytest

from helpers import ALLOW, assert_error

URL = "/api/comments/"


def assert_collection_headers(response) -> None:
    assert response.headers["Allow"] == ALLOW
    assert response.headers["Vary"] == "Accept"
    assert response.headers["Content-Type"] == "application/json"


def test_get_headers(client, sample):
    response = client.get(URL)
    assert response.status_code == 200
    assert_collection_headers(response)


def test_json_is_compact(client, sample):
    data = client.get(URL).data
    assert data.startswith(b'{"results":[{"id":')
    assert b'": ' not in data and b'", "' not in data


def test_head_has_the_get_status_and_headers_but_no_body(client, sample):
    get, head = client.get(URL + "?page=2"), client.head(URL + "?page=2")
    assert head.status_code == 200
    assert head.data == b""
    assert_collection_headers(head)
    assert head.headers["Content-Length"] == get.headers["Content-Length"]
    assert client.head(URL + "?page=99").status_code == 404


def test_options_describes_the_endpoint(client):
    response = client.options(URL)
    assert response.status_code == 200
    assert_collection_headers(response)
    body = response.get_json()
    assert list(body) == ["name", "description", "renders", "parses"]
    assert body["name"] == "Comment List"
    assert "application/json" in body["renders"] and "application/json" in body["parses"]


@pytest.mark.parametrize("method", ["PUT", "PATCH", "DELETE", "TRACE", "PROPFIND"])
def test_other_methods_are_405(client, method):
    response = client.open(URL, method=method)
    assert_error(response, 405, f'Method "{method}" not allowed.')


def test_post_without_credentials_is_401(client):
    response = client.post(URL, json={"body": "hi"})
    assert_error(response, 401, "Authentication credentials were not provided.")
    assert response.headers["WWW-Authenticate"].startswith("Token")


def test_object_id_without_content_type_is_400(client):
    response = client.get(URL + "?object_id=5")
    assert response.status_code == 400
    assert list(response.get_json()) == ["object_id"]
    assert "content_type" in response.get_json()["object_id"][0]


def test_unknown_content_type_is_400_naming_the_allowed_values(client):
    response = client.get(URL + "?content_type=auth.group&object_id=1")
    assert response.status_code == 400
    (message,) = response.get_json()["content_type"]
    assert "auth.group" in message
    assert "comics.comicpage" in message and "users.user" in message


# (An integer of any length is well formed: beyond 64 bits it names no target,
# test_api_filters.)
@pytest.mark.parametrize("value", ["abc", "1.0", "1e3", " 7", "+7", "٣"])
def test_non_integer_object_id_is_400(client, value):
    response = client.get(URL, query_string={"content_type": "users.user", "object_id": value})
    assert response.status_code == 400
    assert list(response.get_json()) == ["object_id"]
    assert_error(response, 400, response.get_json())


def test_configured_content_types(app_factory):
    client = app_factory(COMMENTSVC_CONTENT_TYPES="blog.post").test_client()
    assert client.get(URL + "?content_type=blog.post&object_id=3").status_code == 200
    response = client.get(URL + "?content_type=users.user")
    assert response.status_code == 400
    assert "blog.post" in response.get_json()["content_type"][0]


@pytest.mark.parametrize("fmt", ["xml", "API", "yaml"])
def test_unknown_format_is_404(client, fmt):
    assert_error(client.get(URL + f"?format={fmt}"), 404, "Not found.")


def test_format_json_is_json(client, sample):
    response = client.get(URL + "?format=json", headers={"Accept": "text/html"})
    assert response.status_code == 200
    assert_collection_headers(response)


def test_unknown_api_path_is_json_404(client):
    response = client.get("/api/nothing-here/")
    assert response.status_code == 404
    assert response.get_json() == {"detail": "Not found."}


@pytest.mark.parametrize("path", ["/api/nothing-here/", "/api/nothing", "/api/comments/x/",
                                  "/api/comments/１/", "/healthz/"])
def test_a_path_no_route_serves_names_no_methods(client, path):
    """Allow names the methods of the resource answering; an unknown path has none."""
    for method in ("GET", "PUT"):
        response = client.open(path, method=method)
        assert response.status_code == 404
        assert "Allow" not in response.headers


def test_standalone_paths_outside_the_api_get_json_errors_too(client):
    """Standalone, the whole app is the service (a host's own pages keep their errors:
    test_mounting)."""
    response = client.get("/not-the-api/")
    assert response.status_code == 404
    assert response.get_json() == {"detail": "Not found."}


def test_missing_trailing_slash_redirects(client):
    response = client.get("/api/comments?page=2&x=1")
    assert response.status_code == 308
    assert response.headers["Location"] == "http://localhost/api/comments/?page=2&x=1"
    # a JSON answer like every other under the API, not the router's HTML page
    assert response.mimetype == "application/json"
    assert response.get_json() == {
        "detail": "Moved permanently to http://localhost/api/comments/?page=2&x=1"}
    assert response.headers["Vary"] == "Accept"
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Allow"] == "GET, POST, HEAD, OPTIONS"


@pytest.mark.parametrize(("path", "allow"), [
    ("/api/comments?x=1", "GET, POST, HEAD, OPTIONS"),
    ("/api/comments/264", "GET, PATCH, DELETE, HEAD, OPTIONS"),
    ("/api/schema", "GET, HEAD"),
    ("/api/comments/feed", "GET, HEAD"),
])
@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "PATCH", "DELETE", "FOO"])
def test_a_path_missing_its_final_slash_is_redirected_whatever_the_method(
        client, path, allow, method):
    """Werkzeug redirects only the methods the resource takes and answers the others 404;
    each gets the 308 here, with the Allow of the resource it points to."""
    response = client.open(path, method=method)
    target = "http://localhost" + path.replace("?", "/?") if "?" in path \
        else f"http://localhost{path}/"
    assert response.status_code == 308
    assert response.headers["Location"] == target
    assert response.get_json() == {"detail": f"Moved permanently to {target}"}
    assert response.headers["Allow"] == allow


def test_a_route_outside_the_tables_answers_with_the_methods_it_takes(client):
    """The blueprint's static files: a missing one is 404, another method 405, and both
    name the route's methods."""
    assert client.get("/api/static/nothing.png").headers["Allow"] == "GET, HEAD, OPTIONS"
    refused = client.put("/api/static/browsable.css")
    assert (refused.status_code, refused.headers["Allow"]) == (405, "GET, HEAD, OPTIONS")


@pytest.mark.parametrize("comment_id", ["0", "000", "9223372036854775808", "9" * 5000])
def test_an_id_that_can_name_no_comment_is_the_comments_resource_all_the_same(
        client, comment_id):
    """Found by no comment, as an id in range that names none: 404 for each method the
    comment takes, 405 for the others, both with the comment's Allow."""
    detail_allow = "GET, PATCH, DELETE, HEAD, OPTIONS"
    for method, status in (("GET", 404), ("PATCH", 404), ("DELETE", 404), ("OPTIONS", 404),
                           ("PUT", 405), ("POST", 405)):
        response = client.open(f"/api/comments/{comment_id}/", method=method)
        assert (response.status_code, response.headers["Allow"]) == (status, detail_allow)


def test_a_method_the_resource_does_not_take_is_refused_where_the_redirect_leads(client):
    response = client.put("/api/comments", follow_redirects=True)
    assert response.status_code == 405
    assert response.request.path == "/api/comments/"


def test_unexpected_error_is_json_500_without_a_traceback(client, monkeypatch):
    from commentsvc.storage import counters

    def broken(*_args, **_kwargs):
        raise RuntimeError("secret internals")

    monkeypatch.setattr(counters.ListStateReader, "read_page", broken)
    response = client.get(URL)
    assert_error(response, 500, "A server error occurred.")
    assert b"secret" not in response.data and b"Traceback" not in response.data


def test_the_allow_headers_examples_hold():
    import doctest

    from commentsvc.web import responses

    result = doctest.testmod(responses)
    assert result.attempted >= 1 and result.failed == 0
