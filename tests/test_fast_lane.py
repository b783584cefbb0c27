"""The fast lane (web.fast_lane): a cached list page asked for again alike is answered
before Flask, and its answer is always the one Flask would give."""

from __future__ import annotations

import json
import logging

import pytest
from test_metrics import requests_counted

from commentsvc.operations import request_log
from commentsvc.storage import counters, engine, store
from commentsvc.web import current
from commentsvc.web.conditional import CANDIDATE, Candidate
from commentsvc.web.fast_lane import FastLane

LIST = "/api/comments/"
TARGET = "/api/comments/?content_type=users.user&object_id=17"
PER_ANSWER = {"X-Request-ID"}


def lane_of(app) -> FastLane | None:
    """The app's fast lane, found among its WSGI layers (None: it has none)."""
    layer = app.wsgi_app
    while layer is not None:
        if isinstance(layer, FastLane):
            return layer
        layer = getattr(layer, "app", None)
    return None


@pytest.fixture
def flask_calls(app) -> list[str]:
    """The requests that reached Flask through the fast lane (their paths and queries)."""
    lane = lane_of(app)
    assert lane is not None
    calls: list[str] = []
    inner = lane.flask_wsgi

    def counting(environ, start_response):
        calls.append(f"{environ['PATH_INFO']}?{environ.get('QUERY_STRING', '')}")
        return inner(environ, start_response)

    lane.flask_wsgi = counting
    return calls


def answer(response) -> tuple[int, list[tuple[str, str]], bytes]:
    """What a client is sent, the per-answer headers left out."""
    return (response.status_code,
            [(name, value) for name, value in response.headers if name not in PER_ANSWER],
            response.data)


def test_a_page_asked_for_again_is_answered_before_flask(app, client, sample, flask_calls):
    built, cached = client.get(TARGET), client.get(TARGET)  # Flask's: built, then cached
    fast, faster = client.get(TARGET), client.get(TARGET)
    assert len(flask_calls) == 2
    assert answer(built) == answer(cached) == answer(fast) == answer(faster)
    assert built.status_code == 200 and built.get_json()["results"]


def test_a_page_asked_for_once_is_not_remembered(app, client, sample):
    lane = lane_of(app)
    assert lane is not None
    for page in (1, 2, 3):
        client.get(f"{LIST}?page={page}")
    assert len(lane.remembered) == 0
    client.get(f"{LIST}?page=2")
    assert [key[1] for key in lane.remembered] == ["page=2"]


URLS = [
    LIST,
    TARGET,
    f"{TARGET}&page=2&page_size=3",
    f"{LIST}?content_type=comics.comicpage",
    f"{LIST}?page_size=1&page=2&page_size=4",  # the last of a repeated parameter counts
    f"{LIST}?format=json",
    f"{LIST}?page=last",
    f"{LIST}?unknown=1",
    f"{LIST}?page_size=9999",
]
ACCEPTS = [None, "*/*", "application/json", "application/json; q=0.5, text/plain"]


@pytest.mark.parametrize("accept", ACCEPTS)
@pytest.mark.parametrize("url", URLS)
def test_its_answer_is_flasks(client, sample, flask_calls, url, accept):
    headers = {"Accept": accept} if accept else {}
    built = client.get(url, headers=headers)  # Flask's (each is counted)
    cached = client.get(url, headers=headers)
    fast = client.get(url, headers=headers)
    assert answer(fast) == answer(cached) == answer(built)
    assert len(flask_calls) == (2 if built.status_code == 200 else 3)


def test_each_host_and_scheme_is_its_own_answer(client, sample, flask_calls):
    for _ in range(2):
        one = client.get(LIST, base_url="http://one.example")
        other = client.get(LIST, base_url="https://other.example")
    again = client.get(LIST, base_url="http://one.example")
    assert len(flask_calls) == 4
    assert one.get_json()["p8n"] != other.get_json()["p8n"]
    assert answer(again) == answer(one)


@pytest.mark.parametrize("headers", [
    {"Authorization": "Token nobody"},
    {"Accept": "text/html"},
], ids=["signed-in", "html"])
def test_these_always_go_to_flask(client, sample, flask_calls, headers):
    for _ in range(3):
        client.get(LIST, headers=headers)
    assert len(flask_calls) == 3


def test_a_request_with_a_cookie_goes_to_flask(client, sample, flask_calls):
    client.get(LIST)
    client.get(LIST)
    client.set_cookie("session", "x")
    client.get(LIST)
    client.get(LIST)
    assert len(flask_calls) == 4


@pytest.mark.parametrize("named", ["{tag}", "W/{tag}", '"other", {tag}', "*"])
def test_a_revalidation_is_answered_304_before_flask(client, sample, flask_calls, named):
    tag = client.get(LIST).headers["ETag"]
    client.get(LIST)  # Flask, from the cache: remembered
    asked = {"If-None-Match": named.format(tag=tag)}
    flasks = client.get(LIST, headers=asked)  # Flask's 304: remembered too
    fast = [client.get(LIST, headers=asked) for _ in range(2)]
    assert len(flask_calls) == 3
    assert flasks.status_code == 304 and flasks.data == b""
    assert answer(fast[0]) == answer(fast[1]) == answer(flasks)


def test_a_tag_that_is_not_the_pages_gets_the_page(client, sample, flask_calls):
    plain = client.get(LIST)
    client.get(LIST)
    other = client.get(LIST, headers={"If-None-Match": '"other"'})
    assert len(flask_calls) == 2 and answer(other) == answer(plain)


def test_a_stale_tag_gets_the_new_page(app, client, sample, flask_calls):
    stale = {"If-None-Match": client.get(LIST).headers["ETag"]}
    client.get(LIST)
    assert client.get(LIST, headers=stale).status_code == 304  # Flask's, remembered
    with app.app_context(), engine.writing(engine.get_engine()) as conn:
        store.add_comment(conn, store.NewComment("users.user", 17, 45, "just now"))
    fresh = client.get(LIST, headers=stale)  # no page under the new tag: Flask builds it
    again = client.get(LIST, headers=stale)
    assert fresh.status_code == 200 and fresh.headers["ETag"] != stale["If-None-Match"]
    assert fresh.get_json()["results"][0]["body"] == "just now"
    assert answer(again) == answer(fresh) and len(flask_calls) == 4


def test_other_methods_go_to_flask(client, sample, flask_calls):
    client.get(LIST)
    client.get(LIST)
    assert client.head(LIST).status_code == 200
    assert client.options(LIST).status_code == 200
    assert len(flask_calls) == 4


def test_a_write_is_never_hidden_and_the_counter_is_read_once(app, client, sample,
                                                              flask_calls, monkeypatch):
    before = client.get(TARGET).get_json()
    client.get(TARGET)
    client.get(TARGET)
    with app.app_context(), engine.writing(engine.get_engine()) as conn:
        store.soft_delete(conn, 1298)
    reads: list[str] = []
    real = counters.ListStateReader.read

    def counting(self, list_key):
        reads.append(list_key)
        return real(self, list_key)

    monkeypatch.setattr(counters.ListStateReader, "read", counting)
    after = client.get(TARGET)
    assert len(flask_calls) == 3 and len(reads) == 1  # Flask built it without a 2nd read
    shown = {e["id"]: e["is_deleted"] for e in after.get_json()["results"]}
    assert {e["id"]: e["is_deleted"] for e in before["results"]}[1298] is False
    assert shown[1298] is True
    assert answer(client.get(TARGET)) == answer(after) and len(flask_calls) == 3


def test_a_new_comment_is_shown_at_once(app, client, sample, flask_calls):
    for _ in range(3):
        client.get(LIST)
    with app.app_context(), engine.writing(engine.get_engine()) as conn:
        written = store.add_comment(conn, store.NewComment("users.user", 17, 45, "just now"))
    assert client.get(LIST).get_json()["results"][0]["id"] == written
    assert len(flask_calls) == 3


def test_a_database_error_is_left_to_flask(client, sample, flask_calls, monkeypatch):
    client.get(LIST)
    client.get(LIST)
    real = counters.ListStateReader.read
    failures = [RuntimeError("the database is gone")]

    def failing_once(self, list_key):
        if failures:
            raise failures.pop()
        return real(self, list_key)

    monkeypatch.setattr(counters.ListStateReader, "read", failing_once)
    response = client.get(LIST)
    assert response.status_code == 200 and not failures
    assert len(flask_calls) == 3


def test_its_answers_are_logged_and_counted(client, sample, caplog):
    caplog.set_level(logging.INFO, logger="commentsvc.request")
    client.get(LIST)
    client.get(LIST)
    counted = requests_counted(client, "GET", "commentsvc.comment_list", 200)
    caplog.clear()
    sent = client.get(LIST, headers={"X-Request-ID": "abc-123"},
                      environ_base={"REMOTE_ADDR": "10.1.2.3"})
    made = client.get(LIST)
    formatter = request_log.JsonFormatter()
    lines = [json.loads(formatter.format(record)) for record in caplog.records
             if getattr(record, "fields", {}).get("path") == LIST]
    assert [(line["method"], line["path"], line["status"], line["request_id"],
             line["remote_addr"]) for line in lines] == [
        ("GET", LIST, 200, "abc-123", "10.1.2.3"),
        ("GET", LIST, 200, made.headers["X-Request-ID"], "127.0.0.1")]
    assert sent.headers["X-Request-ID"] == "abc-123"
    assert len(made.headers["X-Request-ID"]) == 32
    assert requests_counted(client, "GET", "commentsvc.comment_list", 200) == counted + 2


def test_an_answer_that_is_no_longer_a_200_is_forgotten(app):
    statuses = ["200 OK", "404 NOT FOUND"]

    def flask_wsgi(environ, start_response):
        environ[CANDIDATE] = Candidate("site", "url", "", "shown", '"t"', "list", LIST)
        start_response(statuses.pop(0), [("ETag", '"t"'), ("Content-Length", "2"),
                                         ("X-Request-ID", "r")])
        return [b"{}"]

    lane = FastLane(app, flask_wsgi, current.of(app))
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": LIST}
    lane(dict(environ), lambda *args: None)
    assert len(lane.remembered) == 1
    lane(dict(environ), lambda *args: None)  # remembered, not cached: Flask answers 404
    assert lane.remembered == {} and statuses == []


def test_it_remembers_a_bounded_number_of_requests(app, client, sample):
    lane = lane_of(app)
    assert lane is not None
    lane.kept = 2
    for size in (1, 2, 3):
        client.get(f"{LIST}?page_size={size}")
        client.get(f"{LIST}?page_size={size}")
    assert sorted(key[1] for key in lane.remembered) == ["page_size=2", "page_size=3"]


@pytest.mark.parametrize("config", [{"COMMENTSVC_FAST_LANE": "off"},
                                    {"COMMENTSVC_RESPONSE_CACHE_MB": 0}],
                         ids=["turned-off", "no-cache"])
def test_it_can_be_turned_off(app_factory, config):
    assert lane_of(app_factory(**config)) is None


def test_it_is_on_by_default(app):
    assert lane_of(app) is not None
