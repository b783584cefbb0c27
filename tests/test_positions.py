"""List positions and counts stay exact under bulk loads, live writes and concurrent writers."""

from __future__ import annotations

import random
import threading
from datetime import datetime, timedelta

import sqlalchemy as sa

from commentsvc.storage import engine, store
from helpers import assert_positions_exact, newest_first, walk

T0 = datetime(2023, 1, 1)


def seed_minimal(app) -> None:
    with app.app_context(), engine.get_engine().begin() as conn:
        conn.execute(sa.text("INSERT INTO commentsvc_user (id, username) VALUES (1, 'ann')"))


def add(app, **fields) -> int:
    values = {"content_type": "comics.comicpage", "object_id": 1, "author_id": 1,
              "body": "hi", **fields}
    with app.app_context(), engine.writing(engine.get_engine()) as conn:
        return store.add_comment(conn, store.NewComment(**values))


def check(app) -> None:
    with app.app_context(), engine.get_engine().connect() as conn:
        assert_positions_exact(conn)


def versions(app) -> dict[str, int]:
    with app.app_context(), engine.get_engine().connect() as conn:
        rows = conn.execute(sa.text("SELECT list_key, version FROM commentsvc_list_count"))
        return dict(rows.all())


def test_bulk_load_numbers_every_list(app, sample):
    check(app)


def test_renumbering_again_changes_no_version(app, sample):
    before = versions(app)
    with app.app_context(), engine.get_engine().begin() as conn:
        store.renumber(conn)
    assert versions(app) == before
    check(app)


def test_new_comment_goes_on_top_of_its_three_lists(app, sample):
    before = versions(app)
    new_id = add(app, content_type="users.user", object_id=17, author_id=10, body="latest")
    check(app)
    client = app.test_client()
    for query in ("", "?content_type=users.user", "?content_type=users.user&object_id=17"):
        assert client.get("/api/comments/" + query).get_json()["results"][0]["id"] == new_id
    after = versions(app)
    for key in ("site", "kind:users.user", "target:users.user:17"):
        assert after[key] == before[key] + 1
    assert after["target:users.user:10"] == before["target:users.user:10"]


def test_back_dated_comment_takes_its_place_in_time(app, sample, sample_records):
    new_id = add(app, content_type="comics.comicpage", object_id=100, author_id=10,
                 body="late", date_added=datetime(2023, 1, 5, 12, 0))
    check(app)
    records = sample_records + [{
        "type": "comment", "id": new_id, "content_type": "comics.comicpage", "object_id": 100,
        "parent_id": None, "date_added": "2023-01-05T12:00:00Z"}]
    client = app.test_client()
    for content_type, object_id in ((None, None), ("comics.comicpage", None),
                                    ("comics.comicpage", 100)):
        query = "?page_size=7" + (f"&content_type={content_type}" if content_type else "")
        query += f"&object_id={object_id}" if object_id else ""
        listed = [e["id"] for page in walk(client, "/api/comments/" + query)
                  for e in page["results"]]
        assert listed == newest_first(records, content_type, object_id)


def test_reply_to_a_reply_joins_the_thread_root(app, sample):
    reply_id = add(app, object_id=100, author_id=10, body="nested", parent_id=1019)
    with app.app_context(), engine.get_engine().connect() as conn:
        parent = conn.execute(sa.text("SELECT parent_id FROM commentsvc_comment WHERE id = :id"),
                              {"id": reply_id}).scalar_one()
    assert parent == 1024  # 1019 is a reply to the root 1024


def test_concurrent_writers_keep_positions_exact(app):
    seed_minimal(app)
    errors: list[BaseException] = []
    written: list[int] = []
    lock = threading.Lock()

    def writer(worker: int) -> None:
        rng = random.Random(worker)
        try:
            for _ in range(15):
                back_dated = rng.random() < 0.3
                new_id = add(app, object_id=rng.choice([1, 2, 3]),
                             content_type=rng.choice(["comics.comicpage", "users.user"]),
                             date_added=T0 + timedelta(minutes=rng.randrange(600))
                             if back_dated else None)
                with lock:
                    written.append(new_id)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(written) == list(range(1, 121))  # every writer got its own id
    check(app)


def test_soft_delete_keeps_every_place_and_bumps_only_its_lists(app, client, sample):
    before_versions = versions(app)
    before_ids = [e["id"] for p in walk(client, "/api/comments/?page_size=7")
                  for e in p["results"]]
    with app.app_context(), engine.writing(engine.get_engine()) as conn:
        assert store.soft_delete(conn, 1030) is True
        assert store.soft_delete(conn, 1030) is False  # already deleted: nothing changes
    check(app)
    pages = walk(client, "/api/comments/?page_size=7")
    assert [e["id"] for p in pages for e in p["results"]] == before_ids
    (deleted,) = [e for p in pages for e in p["results"] if e["id"] == 1030]
    assert deleted["is_deleted"] is True and deleted["body"] == ""
    after = versions(app)
    changed = {k for k in after if after[k] != before_versions[k]}
    assert changed == {"site", "kind:users.user", "target:users.user:17"}
    assert all(after[k] == before_versions[k] + 1 for k in changed)


def test_marking_read_bumps_versions_once_per_change(app, sample):
    before = versions(app)
    with app.app_context(), engine.writing(engine.get_engine()) as conn:
        assert store.set_read(conn, 1222, True) is True
        assert store.set_read(conn, 1222, True) is False
        assert store.set_read(conn, 999999, True) is False  # no such comment
    after = versions(app)
    assert after["target:users.user:10"] == before["target:users.user:10"] + 1
    client = app.test_client()
    body = client.get("/api/comments/?content_type=users.user&object_id=10").get_json()
    assert [e["is_read"] for e in body["results"] if e["id"] == 1222] == [True]


def test_a_post_below_a_later_comment_reads_only_what_sorts_after_it(pg_app):
    """A comment dated ahead of the clock (an import, another node's clock) sends posts
    the slow way; finding each one's place reads the list's position index down from its
    newest comment, so the later comments and the one before them, not the whole list
    (a count of everything before it read every comment of the site for every post)."""
    from commentsvc.operations import demo
    from commentsvc.storage.queries import positions

    with pg_app.app_context(), engine.writing(engine.get_engine()) as conn:
        demo.seed(conn, comments=3000, targets=3, seed=1, progress=False)
    with pg_app.app_context(), engine.get_engine().connect() as conn:
        content_type, object_id, author_id = conn.exec_driver_sql(
            "SELECT content_type, object_id, MIN(author_id) FROM commentsvc_comment "
            "GROUP BY 1, 2 ORDER BY COUNT(*) DESC LIMIT 1").one()
    ahead = datetime.now() + timedelta(days=1)
    later = add(pg_app, content_type=content_type, object_id=object_id, author_id=author_id,
                body="from the future", date_added=ahead)
    key = {"date_added": datetime.now(), "id": later + 1, "content_type": content_type,
           "object_id": object_id}
    with pg_app.app_context(), engine.get_engine().connect() as conn:
        conn.exec_driver_sql("ANALYZE commentsvc_comment")
        for statement in (positions.SITE_BEFORE, positions.KIND_BEFORE, positions.TARGET_BEFORE):
            compiled = statement.compile(dialect=conn.dialect)
            plan = conn.exec_driver_sql(
                "EXPLAIN (ANALYZE, FORMAT JSON) " + str(compiled),
                {name: key[name] for name in compiled.params}).scalar_one()[0]["Plan"]
            scans = list(nodes(plan, "Index Scan"))
            assert [scan["Scan Direction"] for scan in scans] == ["Backward"], plan
            read = scans[0]["Actual Rows"] + scans[0].get("Rows Removed by Filter", 0)
            assert read == 2, plan  # the later comment and the one before the key


def nodes(plan: dict, kind: str):
    """The nodes of an EXPLAIN (FORMAT JSON) plan of one type, depth first."""
    if plan["Node Type"] == kind:
        yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child, kind)
