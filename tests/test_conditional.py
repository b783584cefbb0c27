"""ETag and Cache-Control on list responses; If-None-Match gets 304 without building a page."""

from __future__ import annotations

import pytest

from commentsvc.storage import engine, store
from conftest import insert_records

URL = "/api/comments/?content_type=users.user&object_id=17"


def add(app, **fields):
    with app.app_context(), engine.writing(engine.get_engine()) as conn:
        return store.add_comment(conn, store.NewComment(**fields))


def test_list_responses_carry_a_strong_etag_and_cache_control(client, sample):
    response = client.get(URL)
    tag = response.headers["ETag"]
    assert tag.startswith('"') and not tag.startswith("W/")
    assert response.headers["Cache-Control"] == "max-age=0, must-revalidate"
    assert client.get(URL).headers["ETag"] == tag  # same data, same tag


def test_matching_if_none_match_is_304_without_reading_the_page(client, sample, monkeypatch):
    tag = client.get(URL).headers["ETag"]

    def must_not_run(*_args, **_kwargs):
        raise AssertionError("the page was built")

    monkeypatch.setattr(store, "page", must_not_run)
    for header in (tag, f'"other", {tag}', f"W/{tag}", "*"):
        response = client.get(URL, headers={"If-None-Match": header})
        assert response.status_code == 304, header
        assert response.data == b""
        assert response.headers["ETag"] == tag
        assert response.headers["Vary"] == "Accept"


def test_stale_tag_gets_the_full_page(client, sample):
    response = client.get(URL, headers={"If-None-Match": '"not-the-tag"'})
    assert response.status_code == 200 and response.get_json()["results"]


@pytest.mark.parametrize("other", [
    URL + "&page_size=2",
    "/api/comments/?content_type=users.user&object_id=10",
    "/api/comments/?object_id=17&content_type=users.user",
    URL + "&format=json",
])
def test_every_different_response_has_a_different_tag(client, sample, other):
    assert client.get(URL).headers["ETag"] != client.get(other).headers["ETag"]


def test_a_new_comment_changes_the_tag_of_its_lists_only(app, client, sample):
    mine, site, other = (client.get(u).headers["ETag"] for u in (
        URL, "/api/comments/", "/api/comments/?content_type=comics.comicpage&object_id=100"))
    add(app, content_type="users.user", object_id=17, author_id=10, body="new")
    assert client.get(URL).headers["ETag"] != mine
    assert client.get("/api/comments/").headers["ETag"] != site
    assert client.get(
        "/api/comments/?content_type=comics.comicpage&object_id=100").headers["ETag"] == other
    assert client.get(URL, headers={"If-None-Match": mine}).status_code == 200


def test_display_settings_are_part_of_the_tag(app_factory, sample_records):
    utc = app_factory()
    insert_records(utc, sample_records)
    paris = app_factory(COMMENTSVC_TIME_ZONE="Europe/Paris", COMMENTSVC_CACHE_MAX_AGE=60)
    insert_records(paris, sample_records)
    first, second = utc.test_client().get(URL), paris.test_client().get(URL)
    assert first.headers["ETag"] != second.headers["ETag"]
    assert second.headers["Cache-Control"] == "max-age=60, must-revalidate"


@pytest.mark.parametrize("base_url", ["http://other.example", "https://localhost",
                                      "http://localhost:8080"])
def test_the_host_and_scheme_the_page_urls_name_are_part_of_the_tag(client, sample, base_url):
    here = client.get(URL + "&page_size=1")
    there = client.get(URL + "&page_size=1", base_url=base_url)
    assert here.get_json()["p8n"]["next_url"] != there.get_json()["p8n"]["next_url"]
    assert here.headers["ETag"] != there.headers["ETag"]
    again = client.get(URL + "&page_size=1", base_url=base_url)  # served from the cache
    assert again.get_json() == there.get_json()


# What a 304 leaves out of its 200's headers (RFC 9110 section 15.4.5): the body's own
# metadata, and what is new on every answer.
NOT_ON_A_304 = {"Content-Type", "Content-Length", "X-Request-ID", "Date"}


def headers_of(response) -> dict[str, str]:
    return {name: value for name, value in response.headers.items()
            if name not in NOT_ON_A_304}


@pytest.mark.parametrize("method", ["GET", "HEAD"])
@pytest.mark.parametrize(("url", "headers"), [
    (URL, {}),
    (URL + "&format=api", {}),
    ("/api/comments/", {"Accept": "text/html"}),
    ("/api/comments/?content_type=users.user&object_id=" + "9" * 30, {}),
])
def test_a_304_carries_every_header_its_200_would(client, sample, method, url, headers):
    full = client.open(url, method=method, headers=headers)
    assert full.status_code == 200
    for condition in (full.headers["ETag"], "*"):
        response = client.open(url, method=method, headers={**headers,
                                                             "If-None-Match": condition})
        assert response.status_code == 304 and response.data == b""
        assert headers_of(response) == headers_of(full)
        assert {"ETag", "Vary", "Cache-Control", "Allow"} <= set(response.headers.keys())
        assert "Content-Type" not in response.headers


def test_a_signed_in_304_carries_every_header_its_200_would(client, community):
    signed_in = community.auth("ann")
    full = client.get("/api/comments/", headers=signed_in)
    response = client.get("/api/comments/", headers={**signed_in,
                                                    "If-None-Match": full.headers["ETag"]})
    assert response.status_code == 304
    assert headers_of(response) == headers_of(full)
    assert response.headers["Cache-Control"].startswith("private, ")


def test_the_stylesheet_304_carries_what_its_200_does(client):
    """The one other answer of the API with a validator: the browsable page's stylesheet
    (one comment, the schema, health and metrics have no ETag, so never a 304)."""
    with client.get("/api/static/browsable.css") as full:
        tag = full.headers["ETag"]
    with client.get("/api/static/browsable.css", headers={"If-None-Match": tag}) as response:
        assert response.status_code == 304
    for name in ("ETag", "Cache-Control", "X-Content-Type-Options"):
        assert response.headers[name] == full.headers[name]
    for path in ("/api/comments/100/", "/api/schema/", "/healthz"):
        assert client.get(path, headers={"If-None-Match": "*"}).status_code != 304, path


def test_a_list_loaded_again_never_repeats_a_tag(app, client, sample_records):
    """Dropped and loaded again with other text but the same sizes, a list gets new tags:
    a page cached (by this worker, Redis, a browser or a CDN) under an old one is never
    served for it."""
    insert_records(app, sample_records)
    old = [client.get(URL) for _ in range(3)][-1]  # cached, and remembered by the lane
    with app.app_context(), engine.get_engine().begin() as conn:
        engine.drop_schema(conn)
        engine.create_schema(conn)
    insert_records(app, [{**r, "body": "loaded again"} if r["type"] == "comment" else r
                         for r in sample_records])
    new = client.get(URL)
    again = client.get(URL, headers={"If-None-Match": old.headers["ETag"]})
    assert new.headers["ETag"] != old.headers["ETag"] and again.status_code == 200
    assert len(new.get_json()["results"]) == len(old.get_json()["results"])
    assert {e["body"] for e in new.get_json()["results"] if not e["is_deleted"]} == {
        "loaded again"}
