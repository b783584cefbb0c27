"""POST /api/comments/: who may post, what a post must hold, and that a refusal writes nothing."""

from __future__ import annotations

import gzip
import json
import threading

import pytest

from conftest import table_rows
from helpers import assert_error

URL = "/api/comments/"
PAGE = {"content_type": "comics.comicpage", "object_id": 10}


def post(client, community, name="ann", **fields):
    return client.post(URL, json={**PAGE, "body": "Hello", **fields},
                       headers=community.auth(name))


def listed(client, query: str = "", headers=None) -> list[dict]:
    return client.get(URL + query, headers=headers or {}).get_json()["results"]


def test_a_post_is_201_with_the_comment_as_lists_show_it(client, community):
    response = post(client, community, body="Hello <b>there</b>\nwww.example.com")
    assert response.status_code == 201, response.get_json()
    created = response.get_json()
    assert list(created) == ["id", "author", "body", "date_added", "is_deleted",
                             "is_anonymous", "is_read", "author_url", "author_avatar",
                             "can_delete", "can_reply", "replies"]
    assert created["author"] == "ann" and created["replies"] == []
    assert created["body"] == ('Hello &lt;b&gt;there&lt;/b&gt;<br /><a href="http://www.example'
                               '.com" rel="nofollow">www.example.com</a>')
    assert created["can_delete"] is True and created["can_reply"] is True
    first = listed(client, "?content_type=comics.comicpage&object_id=10",
                   community.auth("ann"))[0]
    assert first == created
    assert response.headers["Location"] == f"http://localhost/api/comments/{created['id']}/"
    assert client.get(response.headers["Location"],
                      headers=community.auth("ann")).get_json() == created


def test_the_new_comment_tops_page_1_of_every_list_it_is_in(client, community):
    before = client.get(URL + "?page_size=1").get_json()["p8n"]["num_pages"]
    created = post(client, community).get_json()
    for query in ("", "?content_type=comics.comicpage",
                  "?content_type=comics.comicpage&object_id=10"):
        assert listed(client, query)[0]["id"] == created["id"]
    assert client.get(URL + "?page_size=1").get_json()["p8n"]["num_pages"] == before + 1
    assert created["id"] not in [c["id"] for c in listed(
        client, "?content_type=comics.comicpage&object_id=11")]


@pytest.mark.parametrize("kind", ["form", "multipart"])
def test_form_data_is_accepted(client, community, kind):
    data = {**PAGE, "body": "From a form", "parent": ""}
    response = client.post(URL, data=data, headers=community.auth("bob"),
                           content_type=None if kind == "form" else "multipart/form-data")
    assert response.status_code == 201, response.get_json()
    assert response.get_json()["author"] == "bob"


def test_a_profile_can_be_commented_on(client, community):
    response = post(client, community, content_type="users.user", object_id=2)
    assert response.status_code == 201
    assert listed(client, "?content_type=users.user&object_id=2")[0]["id"] == \
        response.get_json()["id"]


def test_an_anonymous_post_hides_its_author(client, community):
    created = post(client, community, is_anonymous=True).get_json()
    assert (created["author"], created["author_url"]) == ("Anonymous", "")
    assert created["can_delete"] is True  # the author may still delete it


def test_a_reply_is_embedded_under_its_root(client, community):
    reply = post(client, community, "bob", parent=100, body="Agreed").get_json()
    assert reply["replies"] is None
    root = next(c for c in listed(client, "?content_type=comics.comicpage&object_id=10")
                if c["id"] == 100)
    assert root["replies"][0]["id"] == reply["id"]


def test_a_reply_to_a_reply_joins_the_thread_root(client, community):
    reply = post(client, community, parent=101, body="Me too").get_json()
    root = next(c for c in listed(client, "?content_type=comics.comicpage&object_id=10")
                if c["id"] == 100)
    assert reply["id"] in [r["id"] for r in root["replies"]]


def test_a_live_reply_of_a_deleted_root_may_be_answered(client, community):
    """The comment answered is the one named, which offers can_reply; the answer joins
    the thread under the deleted root, which itself cannot be answered."""
    assert client.delete(URL + "100/", headers=community.auth("carol")).status_code == 204
    reply = next(c for c in listed(client, "?content_type=comics.comicpage&object_id=10",
                                   community.auth("bob")) if c["id"] == 101)
    assert reply["can_reply"] is True
    answer = post(client, community, "bob", parent=101, body="Still here")
    assert answer.status_code == 201, answer.get_json()
    root = next(c for c in listed(client, "?content_type=comics.comicpage&object_id=10")
                if c["id"] == 100)
    assert root["is_deleted"] is True
    assert answer.get_json()["id"] in [r["id"] for r in root["replies"]]
    assert_error(post(client, community, "bob", parent=100), 400,
                 {"parent": ["A deleted comment cannot be replied to."]})


@pytest.mark.parametrize(("fields", "errors"), [
    ({"body": ""}, {"body": ["This field may not be blank."]}),
    ({"body": " \n\t "}, {"body": ["This field may not be blank."]}),
    ({"body": "a\x00b"}, {"body": ["Null characters are not allowed."]}),
    ({"body": 5}, {"body": ["Not a valid string."]}),
    ({"body": None}, {"body": ["This field may not be null."]}),
    ({"object_id": "ten"}, {"object_id": ["A valid integer is required."]}),
    ({"object_id": True}, {"object_id": ["A valid integer is required."]}),
    ({"object_id": 10.5}, {"object_id": ["A valid integer is required."]}),
    ({"object_id": 999}, {"object_id": ['Invalid pk "999" - object does not exist.']}),
    ({"object_id": 2**63}, {"object_id": [f'Invalid pk "{2**63}" - object does not exist.']}),
    ({"object_id": -1}, {"object_id": ['Invalid pk "-1" - object does not exist.']}),
    ({"content_type": "auth.group"}, {"content_type": [
        'Unknown content type "auth.group". Allowed values: comics.comicpage, users.user.']}),
    ({"content_type": "users.user", "object_id": 10},
     {"object_id": ['Invalid pk "10" - object does not exist.']}),
    ({"parent": 999}, {"parent": ['Invalid pk "999" - object does not exist.']}),
    ({"parent": 102}, {"parent": ["The parent comment is on another object."]}),
    ({"parent": 103}, {"parent": ["A deleted comment cannot be replied to."]}),
    ({"parent": "x"}, {"parent": ["A valid integer is required."]}),
    ({"is_anonymous": "perhaps"}, {"is_anonymous": ["Must be a valid boolean."]}),
    ({"is_anonymous": None}, {"is_anonymous": ["This field may not be null."]}),
])
def test_bad_fields_are_400_and_write_nothing(app, client, community, fields, errors):
    before = table_rows(app)
    response = post(client, community, **fields)
    assert_error(response, 400, errors)
    assert table_rows(app) == before


def test_a_refusals_fields_come_in_the_schemas_order(client, community):
    response = client.post(URL, json={"is_anonymous": "x", "parent": "y", "body": "",
                                      "object_id": "z", "content_type": "auth.group"},
                           headers=community.auth("ann"))
    assert response.status_code == 400
    assert list(response.get_json()) == ["content_type", "object_id", "body", "parent",
                                         "is_anonymous"]


def test_missing_fields_are_each_named(app, client, community):
    before = table_rows(app)
    response = client.post(URL, json={}, headers=community.auth("ann"))
    assert_error(response, 400, {name: ["This field is required."]
                                 for name in ("content_type", "object_id", "body")})
    assert table_rows(app) == before


def test_the_body_limit_is_configurable(app_factory):
    from conftest import Community

    app = app_factory(COMMENTSVC_MAX_BODY_LENGTH=10)
    community, client = Community(app), app.test_client()
    assert post(client, community, body="x" * 10).status_code == 201
    assert_error(post(client, community, body="x" * 11),
                 400, {"body": ["Ensure this field has no more than 10 characters."]})


def test_the_default_body_limit_is_5000_characters(client, community):
    assert post(client, community, body="é" * 5000).status_code == 201
    assert_error(post(client, community, body="é" * 5001),
                 400, {"body": ["Ensure this field has no more than 5000 characters."]})


@pytest.mark.parametrize(("data", "content_type", "status", "detail"), [
    (b'{"body": ', "application/json", 400, None),
    (b'["a"]', "application/json", 400,
     {"non_field_errors": ["Invalid data. Expected a dictionary, but got list."]}),
    (b'{"body": "\\ud800"}', "application/json", 400, None),
    (b"body=hi", "text/plain", 415, 'Unsupported media type "text/plain" in request.'),
    (b"content_type=comics.comicpage&object_id=10&body=MK-%ff%fe",
     "application/x-www-form-urlencoded", 400, "The form data is not valid UTF-8."),
    (b"content_type=comics.comicpage&object_id=10&body=MK-\xff\xfe",
     "application/x-www-form-urlencoded", 400, "The form data is not valid UTF-8."),
    (b"<x/>", "application/xml; charset=utf-8", 415,
     'Unsupported media type "application/xml; charset=utf-8" in request.'),
    (b'{"body": "hi"}', "application/vnd.api+json", 415,
     'Unsupported media type "application/vnd.api+json" in request.'),
])
def test_unreadable_bodies(app, client, community, data, content_type, status, detail):
    before = table_rows(app)
    response = client.post(URL, data=data, content_type=content_type,
                           headers=community.auth("ann"))
    if detail is None:
        assert response.status_code == status
        assert response.get_json()["detail"].startswith("JSON parse error - ")
    else:
        assert_error(response, status, detail)
    assert table_rows(app) == before


@pytest.mark.parametrize("coding", ["gzip", "br", "GZIP, identity"])
def test_a_body_in_a_content_coding_is_415_and_writes_nothing(app, client, community, coding):
    """Bytes in a coding the API does not decode, or a plain body said to be in one."""
    before = table_rows(app)
    body = gzip.compress(b'{"body": "hi"}') if coding == "gzip" else json.dumps(
        {**PAGE, "body": "hi"}).encode()
    response = client.post(URL, data=body, content_type="application/json",
                           headers={**community.auth("ann"), "Content-Encoding": coding})
    assert_error(response, 415, f'Unsupported content encoding "{coding}" in request.')
    assert table_rows(app) == before


def test_an_identity_coding_is_no_coding(client, community):
    response = client.post(URL, json={**PAGE, "body": "hi"},
                           headers={**community.auth("ann"), "Content-Encoding": "identity"})
    assert response.status_code == 201


def test_an_oversized_request_is_413_and_writes_nothing(app_factory):
    from conftest import Community

    app = app_factory(COMMENTSVC_MAX_REQUEST_BYTES=1000)
    community, client = Community(app), app.test_client()
    before = table_rows(app)
    response = post(client, community, body="x" * 2000)
    assert_error(response, 413, "The request body is too large.")
    assert table_rows(app) == before


def test_no_credentials_and_bad_tokens_are_401_and_write_nothing(app, client, community):
    before = table_rows(app)
    response = client.post(URL, json={**PAGE, "body": "hi"})
    assert_error(response, 401, "Authentication credentials were not provided.")
    assert response.headers["WWW-Authenticate"] == 'Token realm="api"'
    response = client.post(URL, json={**PAGE, "body": "hi"},
                           headers={"Authorization": "Token " + "0" * 40})
    assert_error(response, 401, "Invalid token.")
    assert response.headers["WWW-Authenticate"] == 'Token realm="api"'
    assert table_rows(app) == before


def test_a_bad_token_is_401_on_reads_too(client, community):
    response = client.get(URL, headers={"Authorization": "Token nope"})
    assert_error(response, 401, "Invalid token.")


def test_many_writers_at_once_each_comment_listed_once(app, client, community):
    """Threads post to one target together: every comment is listed once, in order, and
    the counts and page numbers are right."""
    writers, per_writer = 8, 5
    created: list[int] = []
    failures: list = []
    lock = threading.Lock()

    def write(name: str) -> None:
        own_client = app.test_client()
        for n in range(per_writer):
            response = post(own_client, community, name, body=f"{name} {n}")
            with lock:
                if response.status_code == 201:
                    created.append(response.get_json()["id"])
                else:
                    failures.append(response.get_json())

    threads = [threading.Thread(target=write, args=(("ann", "bob", "carol")[i % 3],))
               for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    query = "?content_type=comics.comicpage&object_id=10&page_size=7"
    first = client.get(query and URL + query).get_json()
    total = writers * per_writer + 3  # the target had 100, 101 (a reply) and 103
    assert first["p8n"]["num_pages"] == -(-total // 7)
    ids = []
    for page in range(1, first["p8n"]["num_pages"] + 1):
        ids += [c["id"] for c in listed(client, f"{query}&page={page}")]
    assert sorted(ids) == sorted(created + [100, 101, 103])
    assert len(ids) == len(set(ids)) == total
    assert ids[:len(created)] == sorted(created, reverse=True)  # newest first, by id on ties
