"""Rendered responses are reused by ETag, and a write is never hidden behind a cached page."""

from __future__ import annotations

from commentsvc.storage import counters, engine, store
from commentsvc.storage.page_cache import ResponseCache
from conftest import insert_records

URL = "/api/comments/?content_type=users.user&object_id=17"


def test_least_recently_used_bodies_leave_first():
    cache = ResponseCache(max_bytes=10)
    cache.put('"a"', b"1234")
    cache.put('"b"', b"5678")
    assert cache.get('"a"') == b"1234"  # "a" is now the most recently used
    cache.put('"c"', b"90ab")
    assert cache.get('"b"') is None
    assert cache.get('"a"') == b"1234" and cache.get('"c"') == b"90ab"
    assert cache.size == 8 and len(cache) == 2


def test_a_body_larger_than_the_cache_is_not_kept():
    cache = ResponseCache(max_bytes=3)
    cache.put('"a"', b"1234")
    assert cache.get('"a"') is None and cache.size == 0


def count_page_builds(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = counters.ListStateReader.read_page

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(counters.ListStateReader, "read_page", counting)
    return calls


def test_same_tag_is_served_from_the_cache(client, sample, monkeypatch):
    builds = count_page_builds(monkeypatch)
    first, second = client.get(URL), client.get(URL)
    assert first.data == second.data and first.headers["ETag"] == second.headers["ETag"]
    assert len(builds) == 1


def test_a_write_makes_a_new_page(app, client, sample, monkeypatch):
    builds = count_page_builds(monkeypatch)
    before = client.get(URL).get_json()
    with app.app_context(), engine.writing(engine.get_engine()) as conn:
        store.soft_delete(conn, 1298)
    after = client.get(URL).get_json()
    assert len(builds) == 2
    assert [e["is_deleted"] for e in before["results"] if e["id"] == 1298] == [False]
    assert [e["is_deleted"] for e in after["results"] if e["id"] == 1298] == [True]


def test_the_cache_can_be_turned_off(app_factory, sample_records, monkeypatch):
    app = app_factory(COMMENTSVC_RESPONSE_CACHE_MB=0)
    insert_records(app, sample_records)
    builds = count_page_builds(monkeypatch)
    client = app.test_client()
    assert client.get(URL).data == client.get(URL).data
    assert len(builds) == 2


def test_the_pages_cached_here_are_remembered_up_to_a_bound():
    from commentsvc.storage.page_cache import RecentlyCached

    recent = RecentlyCached(size=2)
    for page in ("a", "b", "a", "c"):  # "a" again: now newer than "b"
        recent.add(page)
    assert [recent.holds(page) for page in "abc"] == [True, False, True]
