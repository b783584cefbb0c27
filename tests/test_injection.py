"""SQL injection in every parameter does nothing: query parameters, POST and PATCH fields,
path ids, the Authorization header and X-Request-ID. Each attempt is refused or taken as
plain text, and the tables hold exactly what they held (plus, for a body, that text)."""

from __future__ import annotations

from urllib.parse import quote

import pytest
import sqlalchemy as sa

from commentsvc.storage import engine
from conftest import table_rows
from injections import INJECTIONS

LIST = "/api/comments/"
GOOD_POST = {"content_type": "comics.comicpage", "object_id": 10, "body": "hello"}


@pytest.mark.parametrize("name", ["content_type", "object_id", "page", "page_size", "format"])
def test_query_parameters(app, client, community, name):
    before = table_rows(app)
    for text in INJECTIONS:
        response = client.get(LIST, query_string={name: text})
        assert response.status_code in (400, 404), (name, text, response.get_json())
        assert response.mimetype == "application/json"
    # An unknown parameter is ignored (page links keep it): the list is the whole list.
    plain = client.get(LIST).get_json()["results"]
    for text in INJECTIONS:
        assert client.get(LIST, query_string={text: text}).get_json()["results"] == plain
    assert table_rows(app) == before


@pytest.mark.parametrize("name", ["content_type", "object_id", "parent", "is_anonymous"])
@pytest.mark.parametrize("encoding", ["json", "form"])
def test_post_fields_other_than_the_body_are_refused(app, client, community, name, encoding):
    before = table_rows(app)
    for text in INJECTIONS:
        fields = {**GOOD_POST, name: text}
        sent = {"json": fields} if encoding == "json" else {"data": fields}
        response = client.post(LIST, headers=community.auth("ann"), **sent)
        assert response.status_code == 400, (name, text)
        assert list(response.get_json()) == [name]
    assert table_rows(app) == before


def test_a_body_is_stored_and_shown_as_the_text_it_is(app, client, community):
    for text in INJECTIONS:
        if "\x00" in text:
            continue  # refused as any NUL is (test_writing)
        response = client.post(LIST, headers=community.auth("ann"), json={**GOOD_POST,
                                                                           "body": text})
        assert response.status_code == 201, text
        comment_id = response.get_json()["id"]
        with app.app_context(), engine.get_engine().connect() as conn:
            stored = conn.execute(sa.text("SELECT body FROM commentsvc_comment WHERE id = :id"),
                                  {"id": comment_id}).scalar_one()
        assert stored == text
    with app.app_context(), engine.get_engine().connect() as conn:
        tables = {name for name in sa.inspect(conn).get_table_names()
                  if name.startswith("commentsvc_")}
        staff = conn.execute(sa.text("SELECT id FROM commentsvc_user WHERE is_staff")).all()
    assert {"commentsvc_comment", "commentsvc_token", "commentsvc_user"} <= tables
    assert [row.id for row in staff] == [3]  # carol only, as before


def test_patch_fields(app, client, community):
    before = table_rows(app)
    for text in INJECTIONS:
        for fields in ({"is_read": text}, {"is_read": True, text: True}):
            response = client.patch("/api/comments/102/", headers=community.auth("ann"),
                                    json=fields)
            assert response.status_code == 400, (fields, response.get_json())
    assert table_rows(app) == before


@pytest.mark.parametrize("method", ["GET", "PATCH", "DELETE"])
def test_path_ids(app, client, community, method):
    before = table_rows(app)
    for text in INJECTIONS:
        for path in (f"{LIST}{quote(text, safe='')}/", f"{LIST}100{quote(text, safe='')}/"):
            response = client.open(path, method=method, headers=community.auth("carol"),
                                   json={"is_read": True})
            assert response.status_code == 404, (path, response.status_code)
    assert table_rows(app) == before


@pytest.mark.parametrize("method", ["GET", "POST", "DELETE"])
def test_authorization_header(app, client, community, method):
    before = table_rows(app)
    path = LIST if method != "DELETE" else f"{LIST}103/"
    for text in INJECTIONS:
        if "\x00" in text:
            continue  # not a value a header can carry
        for header in (f"Token {text}", f"Token {text.replace(' ', '')}", text):
            response = client.open(path, method=method, json=GOOD_POST,
                                   headers={"Authorization": header})
            # A Token header that names no key is 401; another scheme is no credentials:
            # a read is served as to anyone, a write is 401.
            expected = 200 if method == "GET" and not header.lower().startswith("token") else 401
            assert response.status_code == expected, (header, response.get_json())
    assert table_rows(app) == before


def test_request_id_header(app, client, community):
    before = table_rows(app)
    plain = client.get(LIST).get_json()
    for text in INJECTIONS:
        if "\x00" in text:
            continue
        response = client.get(LIST, headers={"X-Request-ID": text})
        assert response.status_code == 200 and response.get_json() == plain
    assert table_rows(app) == before
