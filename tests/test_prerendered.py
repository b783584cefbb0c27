"""What a list serves is exactly the comment schema's dump, whether each comment's stored
render is current, missing or made under other settings, for every viewer (rules.rendered).

The expected results are made independently of the page read: the comments read by the
store's own page and reply queries, dumped by ``dump_comments`` for the viewer.
"""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import orjson
import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st

from commentsvc.rules import rendered
from commentsvc.rules.comment_lists import CommentList
from commentsvc.rules.schemas import Display, dump_comments
from commentsvc.storage import engine, renders, store
from commentsvc.storage.counters import PageRead
from commentsvc.web import auth, current
from conftest import insert_records

# (time zone, default avatar) of the app that renders and of the app that serves.
SETTINGS = [
    ("UTC", "/static/img/default-avatar.png"),
    ("America/New_York", "/static/other.png"),
    ("Asia/Kolkata", "/static/img/default-avatar.png"),
]
_targets = itertools.count(5000)
_ids = itertools.count(100_000, 100)
_users = itertools.count(10_000, 10)

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",),
                              exclude_characters="\x00"), min_size=1, max_size=12)
bodies = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",),
                               exclude_characters="\x00"), max_size=40) | st.sampled_from(
    ["see https://ex.com/?a=1&b=<2>.", "<b>bold</b>\r\nnext\rline", "www.example.org, ok"])


@st.composite
def threads(draw):
    """Two or three authors, and up to twelve comments among them (roots and replies)."""
    authors = [(next(_users) + k, draw(names), draw(st.none() | st.just("") | names))
               for k in range(draw(st.integers(2, 3)))]
    comments = []
    for _ in range(draw(st.integers(0, 12))):
        roots = [i for i, c in enumerate(comments) if c["parent"] is None]
        comments.append({
            "parent": draw(st.none() | st.sampled_from(roots)) if roots else None,
            "author": draw(st.integers(0, len(authors) - 1)),
            "body": draw(bodies), "minutes": draw(st.integers(0, 60 * 24 * 400)),
            "is_deleted": draw(st.booleans()), "is_anonymous": draw(st.booleans()),
            "is_read": draw(st.booleans())})
    return authors, comments


def load(app, authors, comments) -> tuple[int, list[int]]:
    """The thread stored on a comic page of its own, with no render; its target and the
    authors' ids."""
    target, first = next(_targets), next(_ids)
    start = datetime(2024, 2, 28, 23, 30)
    records = [{"type": "user", "id": uid, "username": name, "avatar": avatar}
               for uid, name, avatar in authors]
    records += [{"type": "comment", "id": first + i, "content_type": "comics.comicpage",
                 "object_id": target,
                 "parent_id": None if c["parent"] is None else first + c["parent"],
                 "author_id": authors[c["author"]][0],
                 "body": "" if c["is_deleted"] else c["body"],
                 "date_added": (start + timedelta(minutes=c["minutes"])).isoformat() + "Z",
                 "is_deleted": c["is_deleted"], "is_anonymous": c["is_anonymous"],
                 "is_read": c["is_read"]}
                for i, c in enumerate(comments)]
    insert_records(app, records)
    return target, [uid for uid, _, _ in authors]


def expected(app, target: int, viewer: auth.Viewer | None) -> list[dict]:
    """The schema's dump of the list, read by the store's own queries."""
    with app.app_context(), engine.get_engine().connect() as conn:
        comments = CommentList("comics.comicpage", target)
        size = store.count(conn, comments)
        entries = store.page(conn, comments, 1, size, reply_cap=current.service().settings
                             .max_embedded_replies)
        settings = current.service().settings
        return dump_comments(entries, Display(settings.tzinfo, settings.default_avatar,
                                              viewer))


def viewers(app, author_ids: list[int]) -> list[tuple[auth.Viewer | None, dict]]:
    """Nobody, an author, a staff member who wrote none of it."""
    staff_id = author_ids[0] + 9
    with app.app_context(), engine.writing(engine.get_engine()) as conn:
        conn.execute(sa.text("INSERT INTO commentsvc_user (id, username) VALUES (:id, 's')"),
                     {"id": staff_id})
        auth.set_staff(conn, staff_id, True)
        tokens = {uid: auth.create_token(conn, uid) for uid in (author_ids[0], staff_id)}
    return [(None, {}),
            (auth.Viewer(author_ids[0]), {"Authorization": f"Token {tokens[author_ids[0]]}"}),
            (auth.Viewer(staff_id, True), {"Authorization": f"Token {tokens[staff_id]}"})]


@pytest.mark.parametrize("rendered_with", [None, *range(len(SETTINGS))],
                         ids=["no render", "UTC", "New York", "Kolkata"])
def test_served_entries_are_the_schemas_dump(app_factory, rendered_with):
    """Stored renders made by an app with each of the settings (or none at all), served by
    an app with the first settings: every page equals the schema's dump, for every viewer."""
    time_zone, avatar = SETTINGS[0]
    app = app_factory(COMMENTSVC_TIME_ZONE=time_zone, COMMENTSVC_DEFAULT_AVATAR=avatar,
                      COMMENTSVC_RESPONSE_CACHE_MB=0, COMMENTSVC_MAX_EMBEDDED_REPLIES=2)
    renderer = None
    if rendered_with is not None:
        other_zone, other_avatar = SETTINGS[rendered_with]
        renderer = app_factory(COMMENTSVC_TIME_ZONE=other_zone,
                               COMMENTSVC_DEFAULT_AVATAR=other_avatar)
    client = app.test_client()

    @given(threads())
    def check(thread):
        target, author_ids = load(app, *thread)
        if renderer is not None:
            with renderer.app_context(), engine.writing(engine.get_engine()) as conn:
                renders.for_settings(current.service().settings).save_missing(conn)
        for viewer, headers in viewers(app, author_ids):
            served = client.get(f"/api/comments/?content_type=comics.comicpage"
                                f"&object_id={target}&page_size=100", headers=headers)
            assert served.status_code == 200
            assert served.get_json()["results"] == expected(app, target, viewer)
            assert_both_ways_agree(app, target, viewer)

    check()


def assert_both_ways_agree(app, target: int, viewer) -> None:
    """The JSON answer's fragments and the browsable page's dicts are the same entries."""
    with app.app_context():
        settings = current.service().settings
        reader = current.service().counter_readers.for_engine(engine.get_engine())
        _, rows = reader.read_page(PageRead(
            "target", f"target:comics.comicpage:{target}", 1, 100,
            settings.max_embedded_replies, settings.render_display, "comics.comicpage",
            target))
    display = Display(settings.tzinfo, settings.default_avatar)
    assert orjson.loads(orjson.dumps(rendered.results_json(rows, display, viewer))) == (
        rendered.results(rows, display, viewer))


def ann_rendered(app, runner) -> None:
    """Ann and her one comment on comic page 1, its render stored by rerender."""
    insert_records(app, [
        {"type": "user", "id": 1, "username": "Ann", "avatar": "a.png"},
        {"type": "comment", "id": 1, "content_type": "comics.comicpage", "object_id": 1,
         "parent_id": None, "author_id": 1, "body": "hi", "date_added": "2024-01-01T00:00:00Z",
         "is_deleted": False, "is_anonymous": False, "is_read": False}])
    assert "Rendered 1 comment." in runner.invoke(args=["rerender"]).output


def test_a_stale_render_is_never_served_and_rerender_brings_it_up_to_date(app, runner):
    """A user renamed behind the service's back: pages show the new name at once, and the
    ``rerender`` command stores it."""
    ann_rendered(app, runner)
    with app.app_context(), engine.get_engine().begin() as conn:
        conn.execute(sa.text("UPDATE commentsvc_user SET username = 'Ann B/x' WHERE id = 1"))
    page = app.test_client().get("/api/comments/?content_type=comics.comicpage&object_id=1")
    entry = page.get_json()["results"][0]
    assert (entry["author"], entry["author_url"]) == ("Ann B/x", "/user/Ann%20B%2Fx/")
    assert "Rendered 1 comment." in runner.invoke(args=["rerender"]).output
    assert "Rendered 0 comments." in runner.invoke(args=["rerender"]).output
    with app.app_context(), engine.get_engine().connect() as conn:
        shown = conn.execute(sa.text("SELECT shown FROM commentsvc_comment")).scalar_one()
    assert '"author":"Ann B/x"' in shown


def stored(app, comment_id: int) -> str | None:
    with app.app_context(), engine.get_engine().connect() as conn:
        return conn.execute(sa.text("SELECT shown FROM commentsvc_comment WHERE id = :id"),
                            {"id": comment_id}).scalar_one()


def test_writes_store_what_they_change(app, community):
    """A post is stored rendered; marking it read and deleting it render it again."""
    client = app.test_client()
    posted = client.post("/api/comments/", headers=community.auth("ann"), json={
        "content_type": "users.user", "object_id": 1, "body": "<i>x</i>"})
    comment_id = posted.get_json()["id"]
    assert '"body":"&lt;i&gt;x&lt;/i&gt;"' in stored(app, comment_id)
    assert client.patch(f"/api/comments/{comment_id}/", headers=community.auth("ann"),
                        json={"is_read": True}).status_code == 200
    assert '"is_read":true' in stored(app, comment_id)
    assert client.delete(f"/api/comments/{comment_id}/",
                         headers=community.auth("ann")).status_code == 204
    shown = stored(app, comment_id)
    assert '"body":""' in shown and '"is_deleted":true' in shown


def test_erasing_a_user_renders_their_comments_again(app, community, runner):
    client = app.test_client()
    posted = client.post("/api/comments/", headers=community.auth("bob"), json={
        "content_type": "users.user", "object_id": 1, "body": "mine"})
    comment_id = posted.get_json()["id"]
    assert runner.invoke(args=["erase-user", "2"]).exit_code == 0
    shown = stored(app, comment_id)
    assert '"body":""' in shown and '"is_deleted":true' in shown
    assert "mine" not in shown


def unrendered(app) -> tuple[int, int]:
    with app.app_context(), engine.get_engine().connect() as conn:
        return tuple(conn.execute(sa.text(
            "SELECT COUNT(*), COUNT(shown) FROM commentsvc_comment")).one())


def test_import_and_seed_store_every_comments_render(app, runner):
    from conftest import sample_path

    assert runner.invoke(args=["import", str(sample_path())]).exit_code == 0
    total, rendered_count = unrendered(app)
    assert total > 0 and rendered_count == total
    assert runner.invoke(args=["seed", "--comments", "300", "--targets", "5"]).exit_code == 0
    total_after, rendered_after = unrendered(app)
    assert total_after == total + 300 and rendered_after == total_after
    # what import and seed stored is what a page serves
    served = app.test_client().get("/api/comments/?page_size=100").get_json()["results"]
    with app.app_context(), engine.get_engine().connect() as conn:
        stored_parts = {row.id: row.shown for row in conn.execute(
            sa.text("SELECT id, shown FROM commentsvc_comment"))}
    for entry in served:
        expected_part = orjson.loads(stored_parts[entry["id"]])
        assert {k: entry[k] for k in expected_part} == expected_part


@given(st.sampled_from(SETTINGS), names, st.none() | st.just("") | names, bodies,
       st.booleans(), st.booleans(), st.booleans(), st.booleans(),
       st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(9999, 12, 30)),
       st.sampled_from(["nobody", "author", "staff", "other"]))
def test_a_written_comments_answer_from_its_stored_render_is_the_schemas_dump(
        setting, username, avatar, body, is_root, is_deleted, is_anonymous, is_read,
        date_added, who):
    """A post answers with its entry made from the render it just stored
    (rules.rendered.entry), never a second dump: they are the same, for every viewer."""
    time_zone, default_avatar = setting
    comment = store.Comment(7, None if is_root else 3, 40, username, avatar, body, date_added,
                            is_deleted, is_anonymous, is_read, [] if is_root else None)
    viewer = {"nobody": None, "author": auth.Viewer(40), "staff": auth.Viewer(41, True),
              "other": auth.Viewer(42)}[who]
    display = Display(ZoneInfo(time_zone), default_avatar)
    stored, _ = renders.Renderer(display, "key").render(comment)
    entry = rendered.entry(stored, comment.author_id, is_deleted, is_root, viewer)
    assert orjson.dumps(entry) == orjson.dumps(dump_comments(
        [comment], Display(display.tz, default_avatar, viewer))[0])


def test_rerender_gives_the_lists_it_renders_new_tags(app, runner):
    """A rename by a host's SQL changes no list's version, so a page the response cache
    holds, and a client's copy revalidated by its ETag, still show the old name; rerender
    (for the user, or for every stale render) gives those lists new versions: the page is
    built again and the old tag is no longer confirmed (200, not 304)."""
    ann_rendered(app, runner)
    client = app.test_client()
    urls = ["/api/comments/", "/api/comments/?content_type=comics.comicpage",
            "/api/comments/?content_type=comics.comicpage&object_id=1"]
    for new_name, command in (("Ann B", ["rerender", "--user", "1"]),
                              ("Ann C", ["rerender"])):
        tags = {url: client.get(url).headers["ETag"] for url in urls}  # cached now
        with app.app_context(), engine.get_engine().begin() as conn:
            conn.execute(sa.text("UPDATE commentsvc_user SET username = :name WHERE id = 1"),
                         {"name": new_name})
        assert "Rendered 1 comment." in runner.invoke(args=command).output
        for url in urls:
            assert client.get(url).get_json()["results"][0]["author"] == new_name, url
            revalidated = client.get(url, headers={"If-None-Match": tags[url]})
            assert revalidated.status_code == 200, (url, command)


def test_rerender_walks_the_table_a_window_at_a_time(app, runner, monkeypatch):
    """Each writers' transaction of rerender reads a window of comments at most, most of
    them current here: every stale render is made again all the same, and only those."""
    monkeypatch.setattr(renders, "WINDOW", 3)
    monkeypatch.setattr(renders, "BATCH", 2)
    assert runner.invoke(args=["seed", "--comments", "60", "--targets", "2"]).exit_code == 0
    with app.app_context(), engine.get_engine().begin() as conn:
        stale = conn.execute(sa.text(
            "SELECT id FROM commentsvc_comment WHERE id % 7 = 0")).scalars().all()
        conn.execute(sa.text("UPDATE commentsvc_comment SET shown_key = 'x' WHERE id % 7 = 0"))
    assert len(stale) > 3
    assert f"Rendered {len(stale)} comments." in runner.invoke(args=["rerender"]).output
    assert "Rendered 0 comments." in runner.invoke(args=["rerender"]).output
