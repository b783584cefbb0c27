"""The blueprint inside a host Flask site: its prefix, its database, its own error pages."""

from __future__ import annotations

import pytest
from flask import Flask
from flask_sqlalchemy import SQLAlchemy
from werkzeug.exceptions import HTTPException

from commentsvc import comments_api, settings
from commentsvc.storage import engine
from conftest import insert_records
from helpers import ALLOW


def make_host(database_url: str, **config) -> Flask:
    """A host site as its authors would write it, with the blueprint under /community."""
    host = Flask("host_site")
    host.config.update(SQLALCHEMY_DATABASE_URI=database_url, **config)
    host_db = SQLAlchemy()
    host_db.init_app(host)

    @host.get("/")
    def home():
        return "host home"

    @host.errorhandler(HTTPException)
    def host_error(exc):
        return f"host says {exc.code}", exc.code

    host.register_blueprint(comments_api, url_prefix="/community")
    with host.app_context(), engine.get_engine().begin() as conn:
        engine.drop_schema(conn)
        engine.create_schema(conn)
    return host


@pytest.fixture
def host(host_factory):
    return host_factory(COMMENTSVC_PAGE_SIZE=5)


def test_listing_under_the_host_prefix(host, sample_records):
    insert_records(host, sample_records)
    client = host.test_client()
    body = client.get("/community/api/comments/?content_type=comics.comicpage").get_json()
    assert len(body["results"]) == 5  # the host's page size
    assert body["p8n"]["next_url"] == (
        "http://localhost/community/api/comments/?content_type=comics.comicpage&page=2")
    assert client.get("/").data == b"host home"


def test_errors_under_the_prefix_are_json_and_the_hosts_stay_its_own(host):
    client = host.test_client()
    response = client.put("/community/api/comments/")
    assert response.status_code == 405
    assert response.get_json() == {"detail": 'Method "PUT" not allowed.'}
    assert response.headers["Allow"] == ALLOW
    assert client.get("/community/api/unknown/").get_json() == {"detail": "Not found."}
    assert client.get("/elsewhere").data == b"host says 404"


@pytest.mark.parametrize("handlers_first", [True, False])
def test_a_hosts_handlers_for_status_codes_keep_the_prefix_json(database_url, handlers_first):
    """Most sites answer 404 and 405 with pages of their own, registered by status code,
    which Flask chooses before any handler by exception class: under the prefix the
    router's answers stay JSON whether the host registered them before or after."""
    host = Flask("host_with_pages")
    host.config.update(SQLALCHEMY_DATABASE_URI=database_url)
    SQLAlchemy().init_app(host)

    def add_pages() -> None:
        for code in (400, 404, 405):
            host.register_error_handler(code, lambda exc: (f"<h1>host {exc.code}</h1>",
                                                           exc.code))

    if handlers_first:
        add_pages()
    host.register_blueprint(comments_api, url_prefix="/community")
    if not handlers_first:
        add_pages()
    client = host.test_client()
    try:
        for path in ("/community/api/unknown/", "/community/api/comments/abc/",
                     "/community/api/comments/0/", "/community/api/static/nope.css"):
            response = client.get(path)
            assert response.status_code == 404, path
            assert response.get_json() == {"detail": "Not found."}, path
        response = client.put("/community/api/comments/")
        assert response.status_code == 405
        assert response.get_json() == {"detail": 'Method "PUT" not allowed.'}
        assert response.headers["Allow"] == ALLOW
        # Paths with an empty segment, some of which Werkzeug would match with their
        # slashes merged, and a malformed Host: refused as JSON before any view runs.
        for path in ("/community/api//comments/", "/community/api/comments//",
                     "/community/api/comments//5/"):
            response = client.get("/", environ_overrides={"PATH_INFO": path})
            assert response.status_code == 404, path
            assert response.get_json() == {"detail": "Not found."}, path
        response = client.get("/community/api/comments/", headers={"Host": "a b"})
        assert response.status_code == 400
        assert response.get_json() == {"detail": "Invalid Host header."}
        assert client.get("/elsewhere").data == b"<h1>host 404</h1>"
        assert client.get("/community/api/comments").status_code == 308  # still redirected
    finally:
        with host.app_context():
            engine.get_engine().dispose()


def test_bad_host_setting_stops_registration(database_url):
    with pytest.raises(settings.SettingsError, match="COMMENTSVC_PAGE_SIZE"):
        make_host(database_url, COMMENTSVC_PAGE_SIZE="ten")
