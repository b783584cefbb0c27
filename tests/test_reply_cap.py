"""A root with many replies: the cap on embedded replies keeps its page bounded."""

from __future__ import annotations

from datetime import datetime, timedelta

from commentsvc.storage import engine, store
from conftest import insert_records

ROOT_URL = "/api/comments/?content_type=comics.comicpage&object_id=100&page_size=100"


def add_replies(app, parent_id: int, count: int) -> list[int]:
    ids = []
    with app.app_context(), engine.writing(engine.get_engine()) as conn:
        for n in range(count):
            ids.append(store.add_comment(conn, store.NewComment(
                content_type="comics.comicpage", object_id=100, author_id=10,
                body=f"reply {n}", parent_id=parent_id,
                date_added=datetime(2024, 1, 1) + timedelta(minutes=n % 7))))
    return ids


def replies_of(body: dict, root_id: int) -> list[int]:
    return [r["id"] for e in body["results"] if e["id"] == root_id for r in e["replies"]]


def test_default_embeds_every_reply(app, sample):
    added = add_replies(app, 1029, 40)
    body = app.test_client().get(ROOT_URL).get_json()
    embedded = replies_of(body, 1029)
    assert set(added) <= set(embedded) and len(embedded) == 40 + 2


def test_cap_embeds_the_newest_replies_only(app_factory, sample_records):
    app = app_factory(COMMENTSVC_MAX_EMBEDDED_REPLIES=5)
    insert_records(app, sample_records)
    added = add_replies(app, 1029, 40)
    client = app.test_client()
    listed = client.get(ROOT_URL).get_json()["results"]  # 69 comments: one page
    (root,) = [e for e in listed if e["id"] == 1029]
    # the newest replies are those dated at minute 6 (n = 6, 13, 20, 27, 34), newest id first
    assert [r["id"] for r in root["replies"]] == [added[n] for n in (34, 27, 20, 13, 6)]
    on_their_own = {e["id"] for e in listed if e["replies"] is None}
    assert set(added) <= on_their_own  # every reply is still listed on its own
    (short,) = [e for e in listed if e["id"] == 1202]
    assert [r["id"] for r in short["replies"]] == [1214]  # short threads are untouched
