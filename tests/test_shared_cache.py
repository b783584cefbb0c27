"""Rendered pages in Redis: shared by every app (worker, node) on one database, replaced
exactly when their list changes, and a Redis outage costs nothing but the cache."""

from __future__ import annotations

import logging

import redis

from commentsvc.storage.shared_page_cache import KEY_PREFIX, RedisResponseCache
from conftest import Community

URL = "/api/comments/?content_type=comics.comicpage&object_id=10"
POST = {"content_type": "comics.comicpage", "object_id": 10, "body": "Fresh news"}


def page_keys(redis_url: str) -> list[bytes]:
    return redis.Redis.from_url(redis_url).keys(KEY_PREFIX + "*")


def test_two_nodes_share_pages_and_a_write_replaces_them(app_factory, redis_url):
    node_a = app_factory(COMMENTSVC_RESPONSE_CACHE_URL=redis_url)
    node_b = app_factory(COMMENTSVC_RESPONSE_CACHE_URL=redis_url)
    community = Community(node_a)
    a, b = node_a.test_client(), node_b.test_client()
    first = a.get(URL)
    [key] = page_keys(redis_url)
    assert key == (KEY_PREFIX + first.headers["ETag"]).encode()
    # Node B serves node A's stored page: prove it by marking the stored body.
    redis.Redis.from_url(redis_url).set(key, b'{"marked": true}')
    assert b.get(URL).get_json() == {"marked": True}
    # A write through node B: node A's next answer on the same URL is the new page.
    created = b.post("/api/comments/", json=POST, headers=community.auth("ann")).get_json()
    fresh = a.get(URL)
    assert fresh.headers["ETag"] != first.headers["ETag"]
    assert fresh.get_json()["results"][0]["id"] == created["id"]
    assert len(page_keys(redis_url)) == 2  # the old version's page is simply never asked for


def test_pages_over_the_size_cap_are_not_stored(redis_url):
    cache = RedisResponseCache(redis.Redis.from_url(redis_url), max_body_bytes=4)
    cache.put('"small"', b"1234")
    cache.put('"large"', b"12345")
    assert cache.get('"small"') == b"1234" and cache.get('"large"') is None


def test_a_redis_outage_is_a_miss_logged_once(app_factory, caplog):
    from test_health import closed_port

    app = app_factory(COMMENTSVC_RESPONSE_CACHE_URL=f"redis://127.0.0.1:{closed_port()}/0")
    Community(app)
    client = app.test_client()
    caplog.set_level(logging.WARNING, logger="commentsvc")
    answers = [client.get(URL) for _ in range(3)]
    assert [answer.status_code for answer in answers] == [200, 200, 200]
    assert answers[0].data == answers[2].data
    warnings = [r for r in caplog.records if "response cache unavailable" in r.getMessage()]
    assert len(warnings) == 1  # then Redis is left alone for a while


def test_a_socket_url_that_answers_nothing_is_a_miss_too(app_factory, tmp_path):
    app = app_factory(COMMENTSVC_RESPONSE_CACHE_URL=f"unix://{tmp_path / 'no-redis.sock'}")
    Community(app)
    client = app.test_client()
    answers = [client.get(URL) for _ in range(2)]
    assert [answer.status_code for answer in answers] == [200, 200]
    assert answers[0].data == answers[1].data
