"""The OpenAPI document at /api/schema/: valid OpenAPI 3.1, complete, and true to the
responses the service really sends, on both databases."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from flask import Flask
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate
from werkzeug.exceptions import MethodNotAllowed

from commentsvc.storage import store
from commentsvc.web import idempotency, openapi
from conftest import Community, insert_records

URL = "/api/comments/"
FEED = "/api/comments/feed/"
PAGE = {"content_type": "comics.comicpage", "object_id": 10}


def document(client, prefix: str = "") -> dict:
    response = client.get(f"{prefix}/api/schema/")
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    return response.get_json()


def resolved(doc: dict, node: dict) -> dict:
    """``node``, or the component its ``$ref`` names."""
    while "$ref" in node:
        _, _, kind, name = node["$ref"].split("/")
        node = doc["components"][kind][name]
    return node


def documented_answer(app: Flask, doc: dict, method: str, path: str, status: int) -> dict:
    """The document's response object for this request and status (failing if there is none)."""
    adapter = app.url_map.bind("localhost")
    try:
        rule, _ = adapter.match(path, method=method, return_rule=True)
    except MethodNotAllowed:
        assert status == 405
        return resolved(doc, {"$ref": "#/components/responses/MethodNotAllowed"})
    operation = doc["paths"][openapi.openapi_path(rule.rule)][method.lower()]
    assert str(status) in operation["responses"], (method, path, status)
    return resolved(doc, operation["responses"][str(status)])


def assert_matches(app: Flask, doc: dict, response, method: str, path: str) -> None:
    """The response's status, headers and body are what the document says for them."""
    answer = documented_answer(app, doc, method, path, response.status_code)
    for name, header in answer.get("headers", {}).items():
        if resolved(doc, header).get("required", True) is False:  # sent only sometimes
            continue
        assert name in response.headers, (method, path, response.status_code, name)
    data = response.get_data()
    if "content" not in answer or method == "HEAD":
        assert data == b"", (method, path, response.status_code)
        return
    assert response.mimetype in answer["content"], (method, path, response.mimetype)
    schema = answer["content"][response.mimetype]["schema"]
    validator = Draft202012Validator({**schema, "components": doc["components"]})
    errors = [f"{list(e.absolute_path)}: {e.message}"
              for e in validator.iter_errors(response.get_json() if response.is_json
                                             else response.get_data(as_text=True))]
    assert not errors, (method, path, response.status_code, errors)


def test_the_document_is_valid_openapi_3_1(client):
    doc = document(client)
    validate(doc)
    assert doc["openapi"] == "3.1.0"
    assert doc["servers"] == [{"url": "/"}]
    scheme = doc["components"]["securitySchemes"]["TokenAuth"]
    assert scheme == {**scheme, "type": "apiKey", "in": "header", "name": "Authorization"}


def test_every_route_and_method_of_the_blueprints_is_documented(app, client):
    doc = document(client)
    # The browsable page's stylesheet (commentsvc.static) is no operation of the API.
    routes = {openapi.openapi_path(rule.rule): {m.lower() for m in rule.methods}
              for rule in app.url_map.iter_rules()
              if rule.endpoint.startswith(("commentsvc.", "commentsvc_ops."))
              and rule.endpoint != "commentsvc.static"}
    assert {"/healthz", "/readyz", "/metrics"} <= set(routes)
    assert routes == {path: set(operations) for path, operations in doc["paths"].items()}


def test_the_documented_parameters_are_the_ones_read(client):
    doc = document(client)
    listed = doc["paths"][URL]["get"]["parameters"]
    names = {resolved(doc, p)["name"] for p in listed}
    assert names == {"content_type", "object_id", "page", "page_size", "format",
                     "If-None-Match"}
    content_type = next(p for p in listed if p.get("name") == "content_type")
    assert content_type["schema"]["enum"] == ["comics.comicpage", "users.user"]
    new_comment = doc["components"]["schemas"]["NewComment"]
    assert set(new_comment["required"]) == {"content_type", "object_id", "body"}
    assert set(new_comment["properties"]) == {"content_type", "object_id", "body", "parent",
                                              "is_anonymous"}
    assert doc["components"]["schemas"]["ReadFlag"]["required"] == ["is_read"]


def test_the_feed_is_documented_with_the_lists_filters_and_atom(client):
    doc = document(client)
    operation = doc["paths"][FEED]["get"]
    names = [resolved(doc, p)["name"] for p in operation["parameters"]]
    assert names == ["content_type", "object_id", "If-None-Match"]
    assert operation["responses"]["200"]["content"] == {
        "application/atom+xml": {"schema": {"type": "string"}}}
    assert set(operation["responses"]) == {"200", "304", "400", "401", "500", "503"}
    assert set(doc["paths"][FEED]) == {"get", "head"}


def test_the_document_follows_the_hosts_settings(app_factory):
    client = app_factory(COMMENTSVC_CONTENT_TYPES="blog.post,users.user").test_client()
    doc = document(client)
    enum = doc["components"]["schemas"]["NewComment"]["properties"]["content_type"]["enum"]
    assert enum == ["blog.post", "users.user"]


def test_the_document_follows_the_mount_prefix_and_script_root(database_url):
    from flask_sqlalchemy import SQLAlchemy

    from commentsvc import comments_api

    host = Flask("host_for_schema")
    host.config["SQLALCHEMY_DATABASE_URI"] = database_url
    SQLAlchemy().init_app(host)
    host.register_blueprint(comments_api, url_prefix="/community")
    client = host.test_client()
    doc = document(client, "/community")
    validate(doc)
    assert set(doc["paths"]) == {"/community/api/comments/",
                                 "/community/api/comments/feed/",
                                 "/community/api/comments/{comment_id}/",
                                 "/community/api/schema/"}
    behind = client.get("/community/api/schema/", base_url="http://localhost/site/")
    assert behind.get_json()["servers"] == [{"url": "/site"}]
    assert client.get("/community/api/schema/").get_json()["servers"] == [{"url": "/"}]
    with host.app_context():
        from commentsvc.storage import engine

        engine.get_engine().dispose()


@pytest.fixture
def busy_app(app_factory):
    """Community data, two posts a minute per user, small request bodies."""
    app = app_factory(COMMENTSVC_POST_RATE_LIMIT="2/minute",
                      COMMENTSVC_MAX_REQUEST_BYTES=2000)
    return app, Community(app)


def test_real_responses_match_the_document(busy_app, monkeypatch):
    app, community = busy_app
    client = app.test_client()
    doc = document(client)
    ann, bob = community.auth("ann"), community.auth("bob")
    seen: set[int] = set()

    def check(method: str, path: str, expected: int, **kwargs) -> object:
        response = client.open(path, method=method, **kwargs)
        assert response.status_code == expected, (method, path, response.get_data())
        assert_matches(app, doc, response, method, path.partition("?")[0])
        seen.add(expected)
        return response

    # Reads: lists, filters, pages, a signed-in reader, conditional GET, HEAD, OPTIONS.
    for query in ("", "?content_type=comics.comicpage", "?content_type=users.user&object_id=1",
                  "?page_size=1&page=2", "?page=last&page_size=1", "?format=json",
                  "?content_type=users.user&object_id=99"):
        check("GET", URL + query, 200)
    tag = check("GET", URL, 200, headers=ann).headers["ETag"]
    check("GET", URL, 304, headers={**ann, "If-None-Match": tag})
    check("HEAD", URL, 200)
    check("OPTIONS", URL, 200)
    check("GET", f"{URL}100/", 200)
    check("GET", f"{URL}101/", 200, headers=bob)
    check("GET", f"{URL}103/", 200)
    check("HEAD", f"{URL}100/", 200)
    check("OPTIONS", f"{URL}100/", 200)
    check("GET", "/api/schema/", 200)
    check("HEAD", "/api/schema/", 200)
    # The Atom feed of a list: its reads, its 304, its refusals.
    for query in ("", "?content_type=comics.comicpage", "?content_type=users.user&object_id=1"):
        check("GET", FEED + query, 200)
        check("HEAD", FEED + query, 200)
    feed_tag = check("GET", FEED, 200).headers["ETag"]
    check("GET", FEED, 304, headers={"If-None-Match": feed_tag})
    check("HEAD", FEED, 304, headers={"If-None-Match": feed_tag})
    for query in ("?object_id=1", "?content_type=nope.nope",
                  "?content_type=users.user&object_id=x"):
        check("GET", FEED + query, 400)
    check("GET", FEED, 401, headers={"Authorization": "Token nope"})
    check("POST", FEED, 405)
    check("OPTIONS", FEED, 405)
    for path in ("/healthz", "/readyz", "/metrics"):
        check("GET", path, 200)
        check("HEAD", path, 200)
        check("POST", path, 405)
    # Read errors.
    for query in ("?object_id=1", "?content_type=nope.nope", "?page_size=0",
                  "?content_type=users.user&object_id=1.5"):
        check("GET", URL + query, 400)
    check("GET", URL, 401, headers={"Authorization": "Token nope"})
    check("GET", URL + "?page=99", 404)
    check("GET", URL + "?format=xml", 404)
    check("GET", URL, 406, headers={"Accept": "text/plain"})
    check("GET", f"{URL}100/", 406, headers={"Accept": "text/plain"})
    check("OPTIONS", URL, 200, headers=ann)  # with the POST fields
    check("GET", f"{URL}999/", 404)
    check("HEAD", f"{URL}100/", 406, headers={"Accept": "text/plain"})
    check("OPTIONS", URL + "?format=xml", 404)
    check("OPTIONS", f"{URL}100/?format=xml", 404)
    check("POST", URL + "?format=xml", 404, json={**PAGE, "body": "x"}, headers=bob)
    check("PUT", URL, 405)
    check("DELETE", URL, 405)
    # Writes and their refusals.
    keyed = {**ann, "Idempotency-Key": "doc-1"}
    check("POST", URL, 201, json={**PAGE, "body": "Hello"}, headers=keyed)
    replayed = check("POST", URL, 201, json={**PAGE, "body": "Hello"}, headers=keyed)
    assert replayed.headers["Idempotent-Replayed"] == "true"
    check("POST", URL, 422, json={**PAGE, "body": "Other"}, headers=keyed)
    check("POST", URL, 400, json={**PAGE, "body": "Hello"},
          headers={**ann, "Idempotency-Key": "caf\u00e9"})
    check("POST", URL, 201, data={**PAGE, "body": "Reply", "parent": "100"}, headers=ann)
    check("POST", URL, 429, json={**PAGE, "body": "Third"}, headers=ann)
    check("POST", URL, 201, json={**PAGE, "body": "Anon", "is_anonymous": True}, headers=bob)
    check("POST", URL, 401, json={**PAGE, "body": "Hello"})
    check("POST", URL, 400, json={**PAGE, "body": " "}, headers=bob)
    check("POST", URL, 400, json={}, headers=bob)
    check("POST", URL, 400, json=[1], headers=bob)
    check("POST", URL, 400, data=b'{"body":', content_type="application/json", headers=bob)
    check("POST", URL, 400, json={**PAGE, "object_id": 999, "body": "x"}, headers=bob)
    check("POST", URL, 413, json={**PAGE, "body": "x" * 3000}, headers=bob)
    check("POST", URL, 415, data="hi", content_type="text/plain", headers=bob)
    check("PATCH", f"{URL}102/", 200, json={"is_read": True}, headers=ann)
    for _ in range(2):
        check("PATCH", f"{URL}102/", 200, json={"is_read": True},
              headers={**ann, "Idempotency-Key": "doc-2"})
    check("PATCH", f"{URL}102/", 422, json={"is_read": False},
          headers={**ann, "Idempotency-Key": "doc-2"})
    check("PATCH", f"{URL}102/", 200, data={"is_read": "false"}, headers=ann)
    check("PATCH", f"{URL}102/", 400, json={"is_read": True, "body": "x"}, headers=ann)
    check("PATCH", f"{URL}102/", 403, json={"is_read": True}, headers=bob)
    check("PATCH", f"{URL}999/", 404, json={"is_read": True}, headers=ann)
    check("PATCH", f"{URL}102/", 415, data="x", content_type="text/plain", headers=ann)
    check("DELETE", f"{URL}100/", 403, headers=bob)
    check("DELETE", f"{URL}100/", 401)
    check("DELETE", f"{URL}100/", 204, headers=ann)
    for _ in range(2):
        check("DELETE", f"{URL}100/", 204, headers={**ann, "Idempotency-Key": "doc-3"})
    check("DELETE", f"{URL}100/", 400, headers={**ann, "Idempotency-Key": ""})
    check("DELETE", f"{URL}102/", 422, headers={**ann, "Idempotency-Key": "doc-3"})
    # A key another request is writing (as if it had not been found under the lock).
    with monkeypatch.context() as patched:
        patched.setattr(idempotency, "find", lambda *_args: None)
        check("DELETE", f"{URL}100/", 409, headers={**ann, "Idempotency-Key": "doc-3"})
    check("DELETE", f"{URL}999/", 404, headers=ann)
    check("GET", URL, 200, headers=bob)  # a deleted root with its replies, as bob sees it
    # The server's own failures.
    monkeypatch.setattr(store, "one", _raise(RuntimeError("boom")))
    check("GET", f"{URL}100/", 500)
    monkeypatch.setattr(store, "one", _raise(sa.exc.OperationalError("SELECT", {}, OSError())))
    check("GET", f"{URL}100/", 503)
    with app.app_context(), app.extensions["sqlalchemy"].engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE commentsvc_token")
    check("GET", "/readyz", 503)
    assert seen >= {200, 201, 204, 304, 400, 401, 403, 404, 405, 409, 413, 415, 422, 429, 500,
                    503}


def _raise(exc: Exception):
    def fail(*_args, **_kwargs):
        raise exc
    return fail


def test_every_page_of_the_sample_matches_the_document(app, sample):
    client = app.test_client()
    doc = document(client)
    for query in ("?page_size=7", "?content_type=comics.comicpage&page_size=3"):
        url = URL + query
        while url:
            response = client.get(url)
            assert_matches(app, doc, response, "GET", URL)
            url = response.get_json()["p8n"]["next_url"]


def test_the_document_is_built_once_per_app(app, monkeypatch):
    client = app.test_client()
    first = client.get("/api/schema/").get_data()
    monkeypatch.setattr(openapi, "build_document", _raise(AssertionError("built again")))
    assert client.get("/api/schema/").get_data() == first


def test_embedded_replies_match_the_reply_shape(app):
    """A root's replies carry no ``replies`` key: the document forbids one there."""
    insert_records(app, [
        {"type": "user", "id": 1, "username": "ann", "avatar": None},
        {"type": "comicpage", "id": 10, "title": "Ten"},
        {"type": "comment", "id": 1, "content_type": "comics.comicpage", "object_id": 10,
         "parent_id": None, "author_id": 1, "body": "root", "date_added": "2024-01-01T00:00:00Z",
         "is_deleted": False, "is_anonymous": False, "is_read": False},
        {"type": "comment", "id": 2, "content_type": "comics.comicpage", "object_id": 10,
         "parent_id": 1, "author_id": 1, "body": "reply", "date_added": "2024-01-02T00:00:00Z",
         "is_deleted": False, "is_anonymous": True, "is_read": False},
    ])
    client = app.test_client()
    doc = document(client)
    body = client.get(URL).get_json()
    reply = Draft202012Validator({"$ref": "#/components/schemas/Reply",
                                  "components": doc["components"]})
    assert reply.is_valid(body["results"][1]["replies"][0])
    assert not reply.is_valid(body["results"][0])  # a top-level entry has replies
