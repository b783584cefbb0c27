"""The key a stored render is checked by (rules.rendered.render_key): the form every write
stores, the earlier MD5 form still served, and a database whose key column ``init-db`` has
not widened yet (PostgreSQL), where writes keep storing the earlier form and lose nothing.

A stored render is marked here by rewriting its body behind the service's back: a page
that shows the mark served the stored render, one that does not made it again.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from commentsvc.rules.rendered import display_tag, legacy_render_key, render_key
from commentsvc.storage import engine
from commentsvc.web import current
from conftest import Community, insert_records, make_app

MARK = "stored-render-served"
PAGE = "/api/comments/?content_type=users.user&object_id=1"


def key_and_author(app, comment_id: int) -> tuple[str, str, str | None, str]:
    """The comment's stored key, its author's name and avatar, and the app's display key."""
    with app.app_context(), engine.get_engine().connect() as conn:
        row = conn.execute(sa.text(
            "SELECT c.shown_key, u.username, u.avatar FROM commentsvc_comment AS c "
            "JOIN commentsvc_user AS u ON u.id = c.author_id WHERE c.id = :id"),
            {"id": comment_id}).one()
        return (*row, current.service().settings.render_display)


def set_key(app, comment_id: int, key: str) -> None:
    with app.app_context(), engine.get_engine().begin() as conn:
        conn.execute(sa.text("UPDATE commentsvc_comment SET shown_key = :key WHERE id = :id"),
                     {"key": key, "id": comment_id})


def mark(app, comment_id: int) -> None:
    """The stored render's body replaced by MARK, its key left as it is."""
    with app.app_context(), engine.get_engine().begin() as conn:
        conn.execute(sa.text("UPDATE commentsvc_comment SET shown = replace(shown, "
                             "'\"body\":\"hello\"', '\"body\":\"" + MARK + "\"') "
                             "WHERE id = :id"), {"id": comment_id})


def served_body(app) -> str:
    page = app.test_client().get(PAGE, headers={"Cache-Control": "no-cache"})
    assert page.status_code == 200
    return str(page.get_json()["results"][0]["body"])


def post(app, community) -> int:
    posted = app.test_client().post("/api/comments/", headers=community.auth("ann"), json={
        "content_type": "users.user", "object_id": 1, "body": "hello"})
    assert posted.status_code == 201, posted.get_json()
    return int(posted.get_json()["id"])


def test_a_write_stores_the_key_of_the_author_as_rendered(app_factory):
    app = app_factory(COMMENTSVC_RESPONSE_CACHE_MB=0)
    comment_id = post(app, Community(app))
    key, username, avatar, display = key_and_author(app, comment_id)
    assert key == render_key(display, username, avatar)
    assert username in key  # the name itself, not a digest of it


@pytest.mark.parametrize("name", ["ann", "Zoë Ünal/x", "名前 😀"])
def test_a_stored_render_under_either_form_of_its_key_is_served(app_factory, name):
    """The key of today and the MD5 of earlier versions both match: the stored render is
    served (the mark shows); a key of neither form is not, and the page renders it again.
    A name beyond ASCII too (its length in the key is in bytes, the MD5's in characters)."""
    app = app_factory(COMMENTSVC_RESPONSE_CACHE_MB=0)
    community = Community(app)
    with app.app_context(), engine.get_engine().begin() as conn:
        conn.execute(sa.text("UPDATE commentsvc_user SET username = :name WHERE id = 1"),
                     {"name": name})
    comment_id = post(app, community)
    key, username, avatar, display = key_and_author(app, comment_id)
    mark(app, comment_id)
    assert served_body(app) == MARK
    set_key(app, comment_id, legacy_render_key(display, username, avatar))
    assert served_body(app) == MARK
    for wrong in (legacy_render_key(display, username + "x", avatar),
                  render_key(display, username, "other.png"), key[:-1], key + "x"):
        set_key(app, comment_id, wrong)
        assert served_body(app) == "hello"


def test_rerender_rewrites_keys_of_the_earlier_form(app, runner):
    insert_records(app, [
        {"type": "user", "id": 1, "username": "Ann Lee", "avatar": "avatars/ann.png"},
        {"type": "comment", "id": 5, "content_type": "users.user", "object_id": 1,
         "parent_id": None, "author_id": 1, "body": "hello",
         "date_added": "2024-01-01T00:00:00Z", "is_deleted": False, "is_anonymous": False,
         "is_read": False}])
    assert "Rendered 1 comment." in runner.invoke(args=["rerender"]).output
    key, username, avatar, display = key_and_author(app, 5)
    assert key == render_key(display, username, avatar)
    set_key(app, 5, legacy_render_key(display, username, avatar))
    versions = list_versions(app)
    assert "Rendered 1 comment." in runner.invoke(args=["rerender"]).output
    assert key_and_author(app, 5)[0] == key
    assert list_versions(app) == versions  # the same render: no list changed
    assert "Rendered 0 comments." in runner.invoke(args=["rerender"]).output


def list_versions(app) -> dict[str, int]:
    with app.app_context(), engine.get_engine().connect() as conn:
        return dict(conn.execute(sa.text(
            "SELECT list_key, version FROM commentsvc_list_count")).all())


def test_a_key_column_not_yet_widened_keeps_the_earlier_form_until_init_db(pg_app_factory):
    """A PostgreSQL database upgraded without init-db: shown_key is still VARCHAR(32).
    Posts and deletes succeed and store MD5 keys, which pages serve and rerender keeps;
    init-db widens the column, and from then on writes store the new form and rerender
    rewrites the earlier keys."""
    app = pg_app_factory(COMMENTSVC_RESPONSE_CACHE_MB=0)
    with app.app_context(), engine.get_engine().begin() as conn:
        conn.execute(sa.text(
            "ALTER TABLE commentsvc_comment ALTER COLUMN shown_key TYPE VARCHAR(32)"))
    community = Community(app)
    runner = app.test_cli_runner()
    first = post(app, community)
    key, username, avatar, display = key_and_author(app, first)
    assert key == legacy_render_key(display, username, avatar)
    mark(app, first)
    assert served_body(app) == MARK
    assert runner.invoke(args=["rerender"]).exit_code == 0
    assert key_and_author(app, first)[0] == key and served_body(app) == MARK
    deleted = post(app, community)
    assert app.test_client().delete(f"/api/comments/{deleted}/",
                                    headers=community.auth("ann")).status_code == 204
    assert len(key_and_author(app, deleted)[0]) == 32

    assert runner.invoke(args=["init-db"]).exit_code == 0
    with app.app_context(), engine.get_engine().connect() as conn:
        assert conn.execute(sa.text(
            "SELECT data_type FROM information_schema.columns WHERE table_name = "
            "'commentsvc_comment' AND column_name = 'shown_key'")).scalar_one() == "text"
    second = post(app, community)
    assert key_and_author(app, second)[0] == render_key(display, username, avatar)
    assert runner.invoke(args=["rerender"]).exit_code == 0
    with app.app_context(), engine.get_engine().connect() as conn:
        keys = conn.execute(sa.text("SELECT shown_key FROM commentsvc_comment")).scalars()
        assert all(k.startswith(display_tag(display)) for k in keys)
    assert key_and_author(app, first)[0] == render_key(display, username, avatar)


def test_init_db_widens_the_key_column_without_holding_reads(pg_app_factory, monkeypatch):
    """The widening takes the comment table's lock against every read; init-db commits it
    at once, before its long transaction (which blanks old deleted comments): a page read
    made meanwhile does not wait."""
    from commentsvc.storage import erasure

    app = pg_app_factory()
    with app.app_context(), engine.get_engine().begin() as conn:
        conn.execute(sa.text(
            "ALTER TABLE commentsvc_comment ALTER COLUMN shown_key TYPE VARCHAR(32)"))
    blank_deleted, read_meanwhile = erasure.blank_deleted, []

    def blank_and_read(conn):
        with engine.get_engine().connect() as other:
            other.execute(sa.text("SET lock_timeout = '1s'"))
            read_meanwhile.append(other.execute(sa.text(
                "SELECT COUNT(*) FROM commentsvc_comment")).scalar_one())
        return blank_deleted(conn)

    monkeypatch.setattr(erasure, "blank_deleted", blank_and_read)
    result = app.test_cli_runner().invoke(args=["init-db"])
    assert result.exit_code == 0, result.output
    assert read_meanwhile == [0]


def test_a_rename_moving_a_nul_between_name_and_avatar_is_not_served_stale(tmp_path):
    """SQLite stores a NUL that a host writes with SQL (PostgreSQL text cannot hold one) and
    its length() stops at one: (ann, NUL Mallory.png) renamed to (ann NUL Mallory, .png)
    must not pass for the render of the first, under either form of the key."""
    app = make_app(f"sqlite:///{tmp_path / 'nul.sqlite3'}", COMMENTSVC_RESPONSE_CACHE_MB=0)
    comment_id = post(app, Community(app))
    with app.app_context(), engine.get_engine().begin() as conn:
        conn.execute(sa.text("UPDATE commentsvc_user SET avatar = char(0) || 'Mallory.png' "
                             "WHERE id = 1"))
    _, username, avatar, display = key_and_author(app, comment_id)
    for key in (render_key(display, username, avatar),
                legacy_render_key(display, username, avatar)):
        with app.app_context(), engine.get_engine().begin() as conn:
            conn.execute(sa.text("UPDATE commentsvc_user SET username = 'ann', "
                                 "avatar = char(0) || 'Mallory.png' WHERE id = 1"))
        set_key(app, comment_id, key)
        mark(app, comment_id)
        assert served_body(app) == MARK  # the render of (ann, NUL Mallory.png) is current
        with app.app_context(), engine.get_engine().begin() as conn:
            conn.execute(sa.text("UPDATE commentsvc_user SET username = 'ann' || char(0) "
                                 "|| 'Mallory', avatar = '.png' WHERE id = 1"))
        assert served_body(app) == "hello"  # rendered again: the author changed
        with app.app_context(), engine.get_engine().begin() as conn:
            conn.execute(sa.text("UPDATE commentsvc_comment SET shown = replace(shown, "
                                 "'\"body\":\"" + MARK + "\"', '\"body\":\"hello\"')"))


def test_a_name_that_is_not_utf8_is_a_server_error_not_an_outage(tmp_path):
    """SQLite keeps bytes a host's SQL casts to text that are not UTF-8, and the driver
    cannot read them: the pages showing that author are 500, not 503 (the database
    answers; a retry would fail alike), and rerender says so in one line."""
    app = make_app(f"sqlite:///{tmp_path / 'bytes.sqlite3'}", COMMENTSVC_RESPONSE_CACHE_MB=0)
    Community(app)
    with app.app_context(), engine.get_engine().begin() as conn:
        conn.execute(sa.text("UPDATE commentsvc_user SET username = CAST(x'41ff42' AS TEXT) "
                             "WHERE id = 2"))
    for url in ("/api/comments/", "/api/comments/feed/"):
        response = app.test_client().get(url)
        assert response.status_code == 500, url
        assert "Retry-After" not in response.headers
    assert app.test_client().get("/api/comments/?content_type=comics.comicpage&object_id=11"
                                 ).status_code == 200  # no comment of that author there
    result = app.test_cli_runner().invoke(args=["rerender", "--user", "2"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1] == (
        "Error: A stored text is not UTF-8 (SQLite, column username): something other "
        "than the service wrote bytes there; fix that row.")
