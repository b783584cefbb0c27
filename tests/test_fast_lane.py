"""The fast lane (web.fast_lane): a cached list page asked for again alike is answered
before Flask, another page of a list Flask answered is built before Flask, and the
answer is always the one Flask would give."""

from __future__ import annotations

import doctest
import json
import logging
import time

import pytest
from test_metrics import requests_counted

from app import create_app
from commentsvc.operations import request_log
from commentsvc.rules.comment_lists import CommentList
from commentsvc.storage import counters, engine, store
from commentsvc.web import current, fast_lane, page_shapes
from commentsvc.web.conditional import AGAIN, CANDIDATE, Candidate
from commentsvc.web.fast_lane import FastLane
from conftest import insert_records, read_ndjson, sample_path
from helpers import calls_of

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


def counted(app) -> list[str]:
    """The requests that reach Flask through ``app``'s fast lane from now on (their paths
    and queries)."""
    lane = lane_of(app)
    assert lane is not None
    calls: list[str] = []
    inner = lane.flask_wsgi

    def counting(environ, start_response):
        calls.append(f"{environ['PATH_INFO']}?{environ.get('QUERY_STRING', '')}")
        return inner(environ, start_response)

    lane.flask_wsgi = counting
    return calls


@pytest.fixture
def flask_calls(app) -> list[str]:
    """The requests that reached Flask through the fast lane (their paths and queries)."""
    return counted(app)


@pytest.fixture
def flask_only(database_url, app):
    """A client of an app on the same database with no fast lane: Flask's own answers."""
    yield from lane_off(database_url)


def lane_off(database_url: str, **config):
    """A client of an app on ``database_url`` with no fast lane (the schema kept), while
    the generator runs."""
    made = create_app({"TESTING": True, "COMMENTSVC_DATABASE_URL": database_url,
                       "COMMENTSVC_FAST_LANE": "off", **config})
    assert lane_of(made) is None
    yield made.test_client()
    with made.app_context():
        engine.get_engine().dispose()


@pytest.fixture
def uncached(app_factory, database_url):
    """An app with no response cache, the sample loaded, and the requests that reach its
    Flask through its fast lane."""
    made = app_factory(COMMENTSVC_RESPONSE_CACHE_MB=0)
    insert_records(made, read_ndjson(sample_path()))
    return made, counted(made)


@pytest.fixture
def uncached_flask_only(database_url, uncached):
    """Flask's own answers with no response cache, on the uncached app's database."""
    yield from lane_off(database_url, COMMENTSVC_RESPONSE_CACHE_MB=0)


def answer(response) -> tuple[int, list[tuple[str, str]], bytes]:
    """What a client is sent, the per-answer headers left out."""
    return (response.status_code,
            [(name, value) for name, value in response.headers if name not in PER_ANSWER],
            response.data)


def test_a_page_asked_for_again_is_answered_before_flask(app, client, sample, flask_calls):
    built = client.get(TARGET)  # Flask's: built and cached, its shape learned
    cached = client.get(TARGET)  # the lane's, from the cache: remembered
    fast, faster = client.get(TARGET), client.get(TARGET)
    assert len(flask_calls) == 1
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
    assert len(flask_calls) == (1 if built.status_code == 200 else 3)


def test_each_host_and_scheme_is_its_own_answer(client, sample, flask_calls):
    for _ in range(2):
        one = client.get(LIST, base_url="http://one.example")
        other = client.get(LIST, base_url="https://other.example")
    again = client.get(LIST, base_url="http://one.example")
    assert len(flask_calls) == 2
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
    assert len(flask_calls) == 3


@pytest.mark.parametrize("named", ["{tag}", "W/{tag}", '"other", {tag}', "*"])
def test_a_revalidation_is_answered_304_before_flask(client, sample, flask_calls, named):
    tag = client.get(LIST).headers["ETag"]
    client.get(LIST)  # the lane's, from the cache: remembered
    asked = {"If-None-Match": named.format(tag=tag)}
    flasks = client.get(LIST, headers=asked)  # Flask's 304: remembered too
    fast = [client.get(LIST, headers=asked) for _ in range(2)]
    assert len(flask_calls) == 2
    assert flasks.status_code == 304 and flasks.data == b""
    assert answer(fast[0]) == answer(fast[1]) == answer(flasks)


def test_a_tag_that_is_not_the_pages_gets_the_page(client, sample, flask_calls):
    plain = client.get(LIST)
    client.get(LIST)
    other = client.get(LIST, headers={"If-None-Match": '"other"'})
    assert len(flask_calls) == 1 and answer(other) == answer(plain)


def test_a_stale_tag_gets_the_new_page(app, client, sample, flask_calls, flask_only):
    stale = {"If-None-Match": client.get(LIST).headers["ETag"]}
    client.get(LIST)
    assert client.get(LIST, headers=stale).status_code == 304  # Flask's, remembered
    with app.app_context(), engine.writing(engine.get_engine()) as conn:
        store.add_comment(conn, store.NewComment("users.user", 17, 45, "just now"))
    fresh = client.get(LIST, headers=stale)  # no page under the new tag: the lane builds it
    again = client.get(LIST, headers=stale)  # and finds it cached
    assert fresh.status_code == 200 and fresh.headers["ETag"] != stale["If-None-Match"]
    assert fresh.get_json()["results"][0]["body"] == "just now"
    assert answer(again) == answer(fresh) == answer(flask_only.get(LIST, headers=stale))
    assert len(flask_calls) == 2


def test_other_methods_go_to_flask(client, sample, flask_calls):
    client.get(LIST)
    client.get(LIST)
    assert client.head(LIST).status_code == 200
    assert client.options(LIST).status_code == 200
    assert len(flask_calls) == 3


def test_a_write_is_never_hidden_and_the_counter_is_read_once(app, client, sample,
                                                              flask_calls, monkeypatch):
    before = client.get(TARGET).get_json()
    client.get(TARGET)
    client.get(TARGET)
    with app.app_context(), engine.writing(engine.get_engine()) as conn:
        store.soft_delete(conn, 1298)
    reads = calls_of(monkeypatch, counters.ListStateReader, "read")
    after = client.get(TARGET)
    assert len(flask_calls) == 1 and len(reads) == 1  # the lane built it, no 2nd read
    shown = {e["id"]: e["is_deleted"] for e in after.get_json()["results"]}
    assert {e["id"]: e["is_deleted"] for e in before["results"]}[1298] is False
    assert shown[1298] is True
    assert answer(client.get(TARGET)) == answer(after) and len(flask_calls) == 1


@pytest.mark.parametrize("url", [LIST, f"{LIST}?page=2"])
def test_a_new_comment_is_shown_at_once(app, client, sample, flask_calls, flask_only, url):
    for _ in range(3):
        client.get(url)  # Flask's, the lane's from the cache (remembered), the lane's
    with app.app_context(), engine.writing(engine.get_engine()) as conn:
        written = store.add_comment(conn, store.NewComment("users.user", 17, 45, "just now"))
    assert client.get(LIST).get_json()["results"][0]["id"] == written
    for page in (2, 3):  # the remembered one rebuilt, another built by its shape
        assert answer(client.get(f"{LIST}?page={page}")) == answer(
            flask_only.get(f"{LIST}?page={page}"))
    assert len(flask_calls) == 1


@pytest.mark.parametrize(("read", "earlier", "url", "calls"), [
    ("read", [LIST, LIST], LIST, 2),  # the counter read of a remembered request
    ("read_page", [f"{LIST}?page=2"], f"{LIST}?page=3", 2),  # a page built by its shape
], ids=["remembered", "shape"])
def test_a_database_error_is_left_to_flask(client, sample, flask_calls, monkeypatch, read,
                                           earlier, url, calls):
    for asked in earlier:
        client.get(asked)
    real = getattr(counters.ListStateReader, read)
    failures = [RuntimeError("the database is gone")]

    def failing_once(self, what):
        if failures:
            raise failures.pop()
        return real(self, what)

    monkeypatch.setattr(counters.ListStateReader, read, failing_once)
    response = client.get(url)
    assert response.status_code == 200 and not failures
    assert len(flask_calls) == calls


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
        environ[CANDIDATE] = Candidate("url", "page=5", "shown", '"t"', "list", LIST,
                                       CommentList(None, None), 25, "http://h" + LIST)
        environ[AGAIN] = True
        start_response(statuses.pop(0), [("ETag", '"t"'), ("Content-Length", "2"),
                                         ("X-Request-ID", "r")])
        return [b"{}"]

    lane = FastLane(app, flask_wsgi, current.of(app))
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": LIST, "QUERY_STRING": "page=5"}
    lane(dict(environ), lambda *args: None)
    assert len(lane.remembered) == 1
    # remembered, not cached, and the empty list has no page 5: Flask answers 404
    lane(dict(environ), lambda *args: None)
    assert lane.remembered == {} and statuses == []


@pytest.mark.parametrize(("asked", "kept"), [(2, "remembered"), (1, "shapes")])
def test_it_remembers_a_bounded_number_of_requests_and_shapes(app, client, sample, asked,
                                                               kept):
    lane = lane_of(app)
    assert lane is not None
    lane.kept = 2
    for size in (1, 2, 3):
        for _ in range(asked):
            client.get(f"{LIST}?page_size={size}")
    assert sorted(key[1] for key in getattr(lane, kept)) == ["page_size=2", "page_size=3"]


@pytest.mark.parametrize(("asked", "kept", "again"), [
    (2, "remembered", "page_size=1"), (1, "shapes", "page_size=1&page=2")])
def test_what_it_used_lately_is_forgotten_last(app, client, sample, flask_calls, asked, kept,
                                               again):
    lane = lane_of(app)
    assert lane is not None
    lane.kept = 2
    for size in (1, 2):
        for _ in range(asked):
            client.get(f"{LIST}?page_size={size}")
    flask_calls.clear()
    assert client.get(f"{LIST}?{again}").status_code == 200
    assert flask_calls == []  # the lane's answer, from what it remembered
    for _ in range(asked):
        client.get(f"{LIST}?page_size=3")
    assert sorted(key[1] for key in getattr(lane, kept)) == ["page_size=1", "page_size=3"]


def test_equal_headers_are_kept_once_without_their_per_answer_values(app, client, sample):
    lane = lane_of(app)
    assert lane is not None
    for size in (1, 2):
        for _ in range(2):
            client.get(f"{LIST}?page_size={size}")
    kept = [found.headers[200] for found in (*lane.shapes.values(), *lane.remembered.values())]
    assert len(kept) == 4 and all(headers is kept[0] for headers in kept)
    values = {lowered: value for _, lowered, value in kept[0]}
    assert values["etag"] == values["content-length"] == values["x-request-id"] == ""
    assert values["content-type"] == "application/json"


def test_the_shared_header_sets_are_bounded(app):
    lane = lane_of(app)
    assert lane is not None
    sets = [(("X-N", "x-n", str(n)),) for n in range(fast_lane._HEADER_SETS + 1)]
    with lane._lock:
        for headers in sets:
            assert lane._shared(headers) is headers
        assert len(lane._header_sets) <= fast_lane._HEADER_SETS
        assert lane._shared(tuple(list(sets[-1]))) is sets[-1]


def test_it_can_be_turned_off(app_factory):
    assert lane_of(app_factory(COMMENTSVC_FAST_LANE="off")) is None


def test_it_is_on_by_default(app):
    assert lane_of(app) is not None


# Pairs of one page of a list, which Flask answers, and another page of the same shape,
# which the lane then builds.
SHAPES = [
    (LIST, f"{LIST}?page=2"),
    (f"{LIST}?page=2", f"{LIST}?page=5"),
    (f"{LIST}?page=3", f"{LIST}?page=1"),
    (f"{TARGET}&page=2&page_size=1", f"{TARGET}&page=1&page_size=1"),
    (f"{TARGET}&page_size=1", f"{TARGET}&page_size=1&page=2"),
    (f"{LIST}?page_size=2&content_type=comics.comicpage",
     f"{LIST}?page_size=2&content_type=comics.comicpage&page=2"),
    (f"{LIST}?page=2&page_size=1&page_size=4", f"{LIST}?page=4&page_size=1&page_size=4"),
    (f"{LIST}?format=json&page=1", f"{LIST}?format=json&page=6"),
    (f"{LIST}?unknown=1&page=2", f"{LIST}?unknown=1&page=3"),
    (f"{LIST}?page_size=9999", f"{LIST}?page_size=9999"),
    (f"{LIST}?page=2", f"{LIST}?page=last"),
    (f"{TARGET}&page_size=1&page=last", f"{TARGET}&page_size=1&page=2"),
    (f"{TARGET}&page_size=100&page=1", f"{TARGET}&page_size=100&page=last"),
]


@pytest.mark.parametrize("accept", ACCEPTS)
@pytest.mark.parametrize(("seen", "other"), SHAPES)
def test_another_page_of_a_list_is_built_before_flask(client, sample, flask_calls, flask_only,
                                                      seen, other, accept):
    headers = {"Accept": accept} if accept else {}
    assert client.get(seen, headers=headers).status_code == 200  # Flask's
    built = client.get(other, headers=headers)
    assert answer(built) == answer(flask_only.get(other, headers=headers))
    assert built.status_code == 200 and built.get_json()["results"]
    assert len(flask_calls) == 1  # the same page, cached lately: the lane's from the cache


@pytest.mark.parametrize("query", ["page=LAST", "page=02", "page=2&page=3", "%70age=2",
                                   "page=2&q=a+b", "page=", "page=9999999999999"])
def test_a_query_without_a_shape_goes_to_flask(client, sample, flask_calls, flask_only,
                                               query):
    client.get(f"{LIST}?page=2")
    response = client.get(f"{LIST}?{query}")
    assert answer(response) == answer(flask_only.get(f"{LIST}?{query}"))
    assert len(flask_calls) == 2


def test_a_page_the_list_does_not_have_goes_to_flask(client, sample, flask_calls, flask_only):
    client.get(f"{LIST}?page=2")
    response = client.get(f"{LIST}?page=999")
    assert response.status_code == 404
    assert answer(response) == answer(flask_only.get(f"{LIST}?page=999"))
    assert len(flask_calls) == 2


def test_a_built_page_is_cached_then_remembered(app, client, sample, flask_calls):
    lane = lane_of(app)
    assert lane is not None
    client.get(f"{LIST}?page=2")  # Flask: the shape is learned
    built = client.get(f"{LIST}?page=3")  # the lane builds it and caches it
    cached = client.get(f"{LIST}?page=3")  # the lane's, from the cache: remembered
    fast = client.get(f"{LIST}?page=3")
    assert answer(built) == answer(cached) == answer(fast)
    assert [call.partition("?")[2] for call in flask_calls] == ["page=2"]
    assert [key[1] for key in lane.remembered] == ["page=3"]


def test_a_page_cached_lately_is_sent_from_the_cache_not_built_again(client, sample,
                                                                    flask_calls, monkeypatch):
    client.get(f"{LIST}?page=2")  # Flask: the shape is learned
    built = client.get(f"{LIST}?page=3")  # the lane builds it and caches it
    page_reads = calls_of(monkeypatch, counters.ListStateReader, "read_page")
    again = client.get(f"{LIST}?page=3")
    assert answer(again) == answer(built) and page_reads == [] and len(flask_calls) == 1


def test_a_tag_named_goes_to_flask_until_remembered(client, sample, flask_calls):
    client.get(f"{LIST}?page=2")
    asked = {"If-None-Match": client.get(f"{LIST}?page=3").headers["ETag"]}
    assert client.get(f"{LIST}?page=3", headers=asked).status_code == 304  # Flask's
    assert client.get(f"{LIST}?page=3", headers=asked).status_code == 304  # the lane's
    assert len(flask_calls) == 2


def test_its_built_answers_are_logged_and_counted(client, sample, caplog):
    caplog.set_level(logging.INFO, logger="commentsvc.request")
    client.get(f"{LIST}?page=2")
    counted = requests_counted(client, "GET", "commentsvc.comment_list", 200)
    caplog.clear()
    built = client.get(f"{LIST}?page=3", headers={"X-Request-ID": "abc-123"})
    formatter = request_log.JsonFormatter()
    lines = [json.loads(formatter.format(record)) for record in caplog.records
             if getattr(record, "fields", {}).get("path") == LIST]
    assert [(line["status"], line["request_id"]) for line in lines] == [(200, "abc-123")]
    assert built.headers["X-Request-ID"] == "abc-123"
    assert requests_counted(client, "GET", "commentsvc.comment_list", 200) == counted + 1


def test_without_a_cache_it_builds_every_page_it_can(uncached, uncached_flask_only):
    app, calls = uncached
    client = app.test_client()
    for page in (1, 2, 1, 2, 3):
        assert answer(client.get(f"{LIST}?page={page}")) == answer(
            uncached_flask_only.get(f"{LIST}?page={page}"))
    lane = lane_of(app)
    assert len(calls) == 1 and lane is not None and lane.remembered == {}


def test_a_query_has_a_shape_only_when_plainly_spelled():
    assert doctest.testmod(page_shapes).failed == 0


def test_without_a_cache_a_revalidation_is_answered_304_before_flask(uncached):
    app, calls = uncached
    client = app.test_client()
    asked = {"If-None-Match": client.get(LIST).headers["ETag"]}  # Flask's: the shape
    flasks = client.get(LIST, headers=asked)  # Flask's 304: remembered
    fast = client.get(LIST, headers=asked)
    built = client.get(LIST)  # remembered, nothing cached: built without a counter read
    assert flasks.status_code == fast.status_code == 304 and len(calls) == 2
    assert answer(fast) == answer(flasks) and built.headers["ETag"] == asked["If-None-Match"]


def test_a_request_it_hands_to_flask_is_timed_from_when_it_arrived(client, sample, caplog,
                                                                    monkeypatch):
    """A counter read that failed in the lane (a hung database waits out its deadline)
    counts in the request's logged duration, not only Flask's own part."""
    client.get(LIST)
    client.get(LIST)  # remembered: the next one reads the counter in the lane
    real = counters.ListStateReader.read

    def slow_failure(self, key):
        monkeypatch.setattr(counters.ListStateReader, "read", real)
        time.sleep(0.3)
        raise RuntimeError("the database did not answer")

    monkeypatch.setattr(counters.ListStateReader, "read", slow_failure)
    caplog.set_level(logging.INFO, logger="commentsvc.request")
    caplog.clear()
    assert client.get(LIST).status_code == 200  # Flask's answer
    formatter = request_log.JsonFormatter()
    [line] = [json.loads(formatter.format(record)) for record in caplog.records
              if getattr(record, "fields", {}).get("path") == LIST]
    assert line["duration_ms"] >= 300
