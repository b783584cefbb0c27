"""Every avatar a comment names is a real image: the default one standalone and mounted,
and each user's identicon under the standalone /media/."""

from __future__ import annotations

import doctest
import struct
import zlib
from urllib.parse import unquote

import pytest
from flask import Flask
from test_mounting import make_host

from commentsvc.rules import formatting
from commentsvc.standalone import avatars
from commentsvc.storage import engine

DEFAULT = "/static/img/default-avatar.png"


def pixels(data: bytes) -> bytes:
    """The raw scanlines of a PNG, after checking every chunk's CRC."""
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    position, idat = 8, b""
    while position < len(data):
        (length,) = struct.unpack(">I", data[position:position + 4])
        kind_and_data = data[position + 4:position + 8 + length]
        (crc,) = struct.unpack(">I", data[position + 8 + length:position + 12 + length])
        assert zlib.crc32(kind_and_data) & 0xFFFFFFFF == crc
        if kind_and_data[:4] == b"IDAT":
            idat += kind_and_data[4:]
        position += 12 + length
    return zlib.decompress(idat)


def test_the_examples_in_the_docstrings_hold():
    result = doctest.testmod(avatars)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("data", [avatars.silhouette(), avatars.identicon("Zoë Kraus")],
                         ids=["default", "identicon"])
def test_pictures_are_whole_64_pixel_rgb_pngs(data):
    assert avatars.png_size(data) == (64, 64)
    assert len(pixels(data)) == 64 * (1 + 64 * 3)


def test_the_committed_default_avatar_is_the_drawing():
    assert avatars.DEFAULT_AVATAR_FILE.read_bytes() == avatars.silhouette()


def test_identicons_differ_by_name_and_are_mirrored():
    names = ["ann", "bob", "carol", "x/y?z#w", "  spaced  ", "日本の読者"]
    assert len({avatars.identicon(name) for name in names}) == len(names)
    for name in names:
        assert all(row == row[::-1] for row in avatars.cells(avatars.name_digest(name)))


def test_every_avatar_of_a_page_is_served_as_an_image(client, sample):
    """Names with spaces, slashes, ?, # and non-ASCII letters among them."""
    results = client.get("/api/comments/?page_size=100").get_json()["results"]
    shown = {c["author_avatar"] for c in results} | {
        r["author_avatar"] for c in results for r in c["replies"] or []}
    assert DEFAULT in shown
    assert "/media/users/x%2Fy%3Fz%23w/thumb/av5.png" in shown
    assert "/media/users/%C3%89mile%20Zola/thumb/av7.png" in shown
    for url in shown:
        with client.get(url) as response:
            assert_image(response, url)


def assert_image(response, url: str) -> None:
    """A 200 PNG: the identicon of the name in a /media/ URL, else the default avatar."""
    assert response.status_code == 200, url
    assert response.mimetype == "image/png"
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    if url.startswith("/media/users/"):
        name = unquote(url.removeprefix("/media/users/").rpartition("/thumb/")[0])
        assert response.data == avatars.identicon(name)
    else:
        assert response.data == avatars.silhouette()


def test_a_thumbnail_is_cached_and_revalidated(client):
    first = client.get("/media/users/Ann%20Smith/thumb/a.png")
    assert first.headers["Cache-Control"] == "public, max-age=86400"
    again = client.get("/media/users/Ann%20Smith/thumb/a.png",
                       headers={"If-None-Match": first.headers["ETag"]})
    assert again.status_code == 304 and again.data == b""
    other = client.get("/media/users/Ann%20Smyth/thumb/a.png")
    assert other.headers["ETag"] != first.headers["ETag"]


def test_a_media_path_without_a_file_is_a_json_404(client):
    response = client.get("/media/users/ann/thumb/")
    assert response.status_code == 404
    assert response.get_json() == {"detail": "Not found."}


@pytest.fixture
def host(host_factory):
    return host_factory()


def test_mounted_the_default_avatar_is_the_mounts_own_copy(host, sample_records):
    from conftest import insert_records

    insert_records(host, sample_records)
    client = host.test_client()
    results = client.get("/community/api/comments/?page_size=100").get_json()["results"]
    default = "/community/api/static/img/default-avatar.png"
    assert default in {c["author_avatar"] for c in results}
    assert DEFAULT not in {c["author_avatar"] for c in results}
    with client.get(default) as response:
        assert response.status_code == 200 and response.data == avatars.silhouette()
    # The host's own /static and /media are left to the host.
    with client.get(DEFAULT) as response:
        assert response.data == b"host says 404"
    assert client.get("/media/users/bob/thumb/av1.png").data == b"host says 404"


def test_mounted_a_configured_default_avatar_is_kept(database_url):
    host = make_host(database_url, COMMENTSVC_DEFAULT_AVATAR=DEFAULT)
    try:
        assert host.extensions["commentsvc"].settings.default_avatar == DEFAULT
    finally:
        with host.app_context():
            engine.get_engine().dispose()


def test_a_host_serving_the_package_static_folder_keeps_the_default(database_url):
    """The rule is what the app serves, not how it was built."""
    from commentsvc import comments_api

    host = Flask("host_site", static_folder=comments_api.static_folder)
    host.config["SQLALCHEMY_DATABASE_URI"] = database_url
    from flask_sqlalchemy import SQLAlchemy

    SQLAlchemy().init_app(host)
    host.register_blueprint(comments_api, url_prefix="/community")
    try:
        assert host.extensions["commentsvc"].settings.default_avatar == DEFAULT
        with host.test_client().get(DEFAULT) as response:
            assert response.data == avatars.silhouette()
    finally:
        with host.app_context():
            engine.get_engine().dispose()


@pytest.mark.parametrize("name", ["%2Fx", "x%2F", "a%2F%2Fb"])
def test_a_name_with_an_empty_path_segment_is_a_404_like_any_such_path(client, name):
    response = client.get(f"/media/users/{name}/thumb/a.png")
    assert response.status_code == 404
    assert response.get_json() == {"detail": "Not found."}


def test_a_slash_in_a_name_is_part_of_the_name(client):
    with client.get("/media/users/AC%2FDC/thumb/a.png") as response:
        assert response.data == avatars.identicon("AC/DC")


@pytest.mark.parametrize(("name", "avatar"), [
    ("x", "avatars/2024/ann.png"), ("AC/DC", "a/b.png"), ("p/thumb/q", "c/thumb/d.png"),
    ("p/thumb/q", "d.png"), ("ann", "thumb/x.png"),
])
def test_a_slash_in_an_avatar_file_name_keeps_the_users_picture(client, name, avatar):
    """The name and the file name each holding slashes, as author_avatar spells them: the
    file name does not change the picture (a Django avatar is stored under its folder)."""
    path = formatting.avatar_url(name, avatar, "/static/img/default-avatar.png")
    with client.get(path) as response:
        assert response.status_code == 200
        assert response.data == avatars.identicon(name)


def test_without_the_raw_path_the_shortest_name_is_taken(app):
    """A server that passes no raw path: the decoded path alone, split at its first
    /thumb/ (a name holding /thumb/ then shows another picture, never a 404)."""
    from werkzeug.test import EnvironBuilder

    environ = EnvironBuilder(path="/media/users/x/thumb/a/b.png").get_environ()
    del environ["RAW_URI"], environ["REQUEST_URI"]
    with app.request_context(environ):
        response = app.full_dispatch_request()
    assert response.status_code == 200
    assert b"".join(response.response) == avatars.identicon("x")


@pytest.mark.parametrize("name", ["a\nb", "a\r\nb", "\n", "a\u2028b\x85c"])
def test_a_name_with_a_line_break_has_its_picture(client, name):
    """The name as author_avatar spells it: Werkzeug's path converter stopped at a
    line break, and the avatar of such a name (an import may store one) was a 404."""
    path = formatting.avatar_url(name, "a.png", "/static/img/default-avatar.png")
    with client.get(path) as response:
        assert response.status_code == 200
        assert response.data == avatars.identicon(name)
