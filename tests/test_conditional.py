"""ETag and Cache-Control on list responses; If-None-Match gets 304 without building a page."""

from __future__ import annotations

import pytest

from commentsvc import db, store

URL = "/api/comments/?content_type=users.user&object_id=17"


def add(app, **fields):
    with app.app_context(), db.writing(db.get_engine()) as conn:
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
    from conftest import insert_records

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
