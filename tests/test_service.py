"""The CommentService extension, its typed settings, and the one conditional step of a
list request (the list's counter read once; a write in between answered as it is)."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
from flask import Flask
from flask_sqlalchemy import SQLAlchemy

from commentsvc import CommentService, settings
from commentsvc.storage import counters, engine
from commentsvc.web import current
from conftest import Community


def bare_host(database_url: str) -> Flask:
    host = Flask("host_with_service")
    host.config.update(SQLALCHEMY_DATABASE_URI=database_url, COMMENTSVC_PAGE_SIZE=3)
    SQLAlchemy().init_app(host)
    return host


def test_the_extension_mounts_the_api_under_its_prefix(database_url):
    host = bare_host(database_url)
    service = CommentService()
    service.init_app(host, url_prefix="/talk")
    with host.app_context():
        assert current.service() is service is CommentService.current()
        with engine.get_engine().begin() as conn:
            engine.drop_schema(conn)
            engine.create_schema(conn)
        engine.get_engine().dispose()
    answer = host.test_client().get("/talk/api/comments/")
    assert answer.status_code == 200
    assert answer.get_json()["results"] == []
    assert service.settings.page_size == 3
    assert host.test_client().get("/api/comments/").status_code == 404


def test_the_extension_bound_at_construction_serves_one_app(database_url):
    host = bare_host(database_url)
    service = CommentService(host)
    assert host.extensions["commentsvc"] is service
    with pytest.raises(RuntimeError, match="one app"):
        service.init_app(bare_host(database_url))


def test_settings_are_frozen_and_typed_from_the_one_table():
    values = settings.Settings.from_config({"COMMENTSVC_PAGE_SIZE": "7",
                                            "COMMENTSVC_TIME_ZONE": "Europe/Paris"})
    assert (values.page_size, values.time_zone, str(values.tzinfo)) == (
        7, "Europe/Paris", "Europe/Paris")
    assert values.cache_control == "max-age=0, must-revalidate"
    fields = {f.name for f in dataclasses.fields(values) if f.init}
    assert fields == {s.name.lower() for s in settings.SETTINGS}
    with pytest.raises(dataclasses.FrozenInstanceError):
        values.page_size = 8  # type: ignore[misc]
    with pytest.raises(settings.SettingsError, match="COMMENTSVC_PAGE_SIZE"):
        settings.Settings.from_config({"COMMENTSVC_PAGE_SIZE": "0"})


def counting(monkeypatch) -> list[str]:
    """Every statement that reads a list's counter row: the counter read alone, or the
    page read that brings it with the page."""
    reads: list[str] = []
    original_read, original_page = counters.ListStateReader.read, counters.ListStateReader.read_page

    def read(self, list_key):
        reads.append("counter")
        return original_read(self, list_key)

    def read_page(self, page_read):
        reads.append("page")
        return original_page(self, page_read)

    monkeypatch.setattr(counters.ListStateReader, "read", read)
    monkeypatch.setattr(counters.ListStateReader, "read_page", read_page)
    return reads


@pytest.mark.parametrize("cache_mb", [0, 64])
@pytest.mark.parametrize("revalidate", [False, True])
def test_a_list_request_reads_the_counter_once(app_factory, monkeypatch, cache_mb, revalidate):
    """One statement when nothing can spare the page (the page read brings the counter);
    the counter alone for a 304 or a page cached here; the counter, then the page read,
    when a tag was named but the page must be built after all."""
    app = app_factory(COMMENTSVC_RESPONSE_CACHE_MB=cache_mb)
    Community(app)
    client = app.test_client()
    tag = client.get("/api/comments/").headers["ETag"]
    reads = counting(monkeypatch)
    headers = {"If-None-Match": tag} if revalidate else {}
    for url in ("/api/comments/", "/api/comments/?page=2&page_size=1",
                "/api/comments/?content_type=users.user"):
        client.get(url, headers=headers)
    if revalidate:  # the first page is named by the tag; the other two are built
        assert reads == ["counter"] + ["counter", "page"] * 2
    elif cache_mb:  # the first page was cached here: counter, cached body; the others
        assert reads == ["counter", "page", "page"]  # were not: the page read at once
    else:
        assert reads == ["page"] * 3


def test_a_write_between_the_counter_and_the_page_is_answered_as_the_page_sees_it(
        app_factory, monkeypatch):
    app = app_factory(COMMENTSVC_RESPONSE_CACHE_MB=64)
    people = Community(app)
    client = app.test_client()
    original_read = counters.ListStateReader.read
    posted = []

    def read_then_someone_posts(self, list_key):
        state = original_read(self, list_key)
        if not posted:
            posted.append(client.post("/api/comments/", headers=people.auth("ann"), json={
                "content_type": "users.user", "object_id": 2, "body": "In between"}))
        return state

    monkeypatch.setattr(counters.ListStateReader, "read", read_then_someone_posts)
    # A tag the client holds from before: the counter row is read first, alone.
    raced = client.get("/api/comments/", headers={"If-None-Match": '"from-before"'})
    monkeypatch.undo()
    assert posted[0].status_code == 201
    assert raced.get_json()["results"][0]["id"] == posted[0].get_json()["id"]
    cached = client.get("/api/comments/")  # what was cached under that tag is that body
    assert (cached.headers["ETag"], cached.get_data()) == (raced.headers["ETag"],
                                                            raced.get_data())
    app.extensions["commentsvc"].page_cache = None
    fresh = client.get("/api/comments/")  # built from the database, as it is now
    assert (fresh.headers["ETag"], fresh.get_data()) == (raced.headers["ETag"],
                                                          raced.get_data())


def test_the_standalone_app_asks_once_per_function_whether_it_is_a_coroutine(
        app_factory, monkeypatch):
    """The answer Flask's ensure_sync would give, remembered per function: a bound method
    (new on every request) by its function, so the memory stays as small as the app."""
    app = app_factory()
    asked: list[object] = []
    real = inspect.iscoroutinefunction
    monkeypatch.setattr(inspect, "iscoroutinefunction",
                        lambda func: asked.append(func) or real(func))

    class Hooks:
        def hook(self) -> str:
            return "ran"

    def plain() -> str:
        return "plain"

    async def coroutine() -> str:
        return "coroutine"

    assert app.ensure_sync(plain) is plain and app.ensure_sync(plain) is plain
    for _ in range(3):
        method = Hooks().hook
        assert app.ensure_sync(method) is method
    assert asked == [plain, Hooks.hook]
    with pytest.raises(RuntimeError, match="async"):  # as Flask's own without its extra
        app.ensure_sync(coroutine)
    client = app.test_client()
    for _ in range(3):
        assert client.get("/api/comments/").status_code == 200
    assert len(app._coroutines) < 50
