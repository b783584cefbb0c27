"""Events: each write records one in its own transaction (storage.outbox), with the
payload docs/EVENTS.md gives; refusals and replays record none; deleted and erased text
leaves the events kept; old events are pruned once every endpoint has them."""

from __future__ import annotations

import doctest
import json
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from commentsvc.rules import events as event_rules
from commentsvc.storage import engine, outbox
from conftest import Community, table_rows

URL = "/api/comments/"


def stored_events(app) -> list[dict]:
    """Every event kept, oldest first, with its row's columns beside its body."""
    with app.app_context(), engine.get_engine().connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT id, event_uid, event_type, comment_id, created, payload "
            "FROM commentsvc_event ORDER BY id").columns(created=sa.DateTime())).all()
    return [{"row_id": row.id, "uid": row.event_uid, "type": row.event_type,
             "comment_id": row.comment_id, "created": row.created,
             "body": json.loads(row.payload)} for row in rows]


def post(client, community, who="bob", **fields):
    body = {"content_type": "users.user", "object_id": 1, "body": "Hello <b>ann</b>",
            **fields}
    return client.post(URL, json=body, headers=community.auth(who))


def test_docstring_examples_hold():
    assert doctest.testmod(event_rules).failed == 0


def test_a_post_records_one_created_event_with_the_comment_as_lists_show_it(
        app, client, community):
    response = post(client, community, is_anonymous=True)
    assert response.status_code == 201
    shown = response.get_json()
    [event] = stored_events(app)
    body = event["body"]
    assert list(body) == ["id", "type", "created", "data"]
    assert (body["id"], body["type"]) == (event["uid"], "comment.created")
    assert body["created"] == event_rules.timestamp(event["created"])
    assert abs(event["created"] - datetime.now(UTC).replace(tzinfo=None)) < timedelta(minutes=1)
    data = body["data"]
    assert data == {"comment_id": shown["id"], "content_type": "users.user", "object_id": 1,
                    "parent_id": None, "comment": data["comment"]}
    expected = {k: v for k, v in shown.items() if k not in ("can_delete", "can_reply",
                                                             "replies")}
    assert data["comment"] == expected
    assert data["comment"]["author"] == "Anonymous"  # never the real author
    assert "bob" not in json.dumps(body)
    assert data["comment"]["body"] == "Hello &lt;b&gt;ann&lt;/b&gt;"


def test_a_reply_names_its_thread_root(app, client, community):
    response = post(client, community, content_type="comics.comicpage", object_id=10,
                     parent=101)  # a reply to a reply joins the root
    assert response.status_code == 201
    [event] = stored_events(app)
    assert event["body"]["data"]["parent_id"] == 100
    assert event["comment_id"] == response.get_json()["id"]


def test_refused_and_replayed_writes_record_nothing(app, client, community):
    before = table_rows(app)
    assert post(client, community, object_id=999).status_code == 400
    assert post(client, community, body="").status_code == 400
    assert client.patch(f"{URL}102/", json={"is_read": True},
                        headers=community.auth("bob")).status_code == 403
    assert client.delete(f"{URL}102/", headers=community.auth("ann")).status_code == 403
    assert table_rows(app) == before
    keyed = {**community.auth("bob"), "Idempotency-Key": "k-1"}
    body = {"content_type": "users.user", "object_id": 1, "body": "once"}
    assert client.post(URL, json=body, headers=keyed).status_code == 201
    replay = client.post(URL, json=body, headers=keyed)
    assert replay.headers.get("Idempotent-Replayed") == "true"
    assert [e["type"] for e in stored_events(app)] == ["comment.created"]


def test_marking_read_records_the_new_flag_only_when_it_changes(app, client, community):
    mark = lambda flag: client.patch(f"{URL}102/", json={"is_read": flag},  # noqa: E731
                                     headers=community.auth("ann"))
    assert mark(True).status_code == 200
    assert mark(True).status_code == 200  # no change: no event
    assert mark(False).status_code == 200
    found = stored_events(app)
    assert [(e["type"], e["body"]["data"]["is_read"]) for e in found] == [
        ("comment.read_changed", True), ("comment.read_changed", False)]
    assert found[0]["body"]["data"] == {"comment_id": 102, "content_type": "users.user",
                                        "object_id": 1, "parent_id": None, "is_read": True}


def test_deleting_records_an_event_and_takes_the_text_out_of_earlier_ones(
        app, client, community):
    created = post(client, community, body="secret words").get_json()
    assert client.delete(f"{URL}{created['id']}/",
                         headers=community.auth("bob")).status_code == 204
    assert client.delete(f"{URL}{created['id']}/",
                         headers=community.auth("bob")).status_code == 204  # already gone
    first, deleted = stored_events(app)
    assert deleted["type"] == "comment.deleted"
    assert deleted["body"]["data"] == {"comment_id": created["id"],
                                       "content_type": "users.user", "object_id": 1,
                                       "parent_id": None}
    comment = first["body"]["data"]["comment"]
    assert (comment["body"], comment["is_deleted"]) == ("", True)
    assert first["body"]["id"] == first["uid"]  # the same event, its text removed
    everything = json.dumps(table_rows(app)["commentsvc_event"], default=str)
    assert "secret words" not in everything


def test_erasing_a_user_records_an_event_per_comment_and_leaves_no_text(
        app, client, community, runner):
    mine = post(client, community, body="bob was here").get_json()
    result = runner.invoke(args=["erase-user", "2"])
    assert result.exit_code == 0, result.output
    found = stored_events(app)
    erased = [e for e in found if e["type"] == "comment.erased"]
    # bob's comments that still held something: 101, 102, the new one, and 103, deleted
    # before deletion removed text (its row still holds "gone")
    assert sorted(e["comment_id"] for e in erased) == [101, 102, 103, mine["id"]]
    assert {e["body"]["data"]["comment_id"] for e in erased} == {101, 102, 103, mine["id"]}
    created = found[0]["body"]["data"]["comment"]
    assert (created["author"], created["body"], created["is_deleted"]) == (
        "erased-user-2", "", True)
    everything = json.dumps(table_rows(app)["commentsvc_event"], default=str)
    assert "bob was here" not in everything and '"bob"' not in everything
    assert runner.invoke(args=["erase-user", "2"]).exit_code == 0
    assert len(stored_events(app)) == len(found)  # nothing showed any more: no event


def test_event_ids_rise_and_each_event_id_is_unique(app, client, community):
    for n in range(5):
        assert post(client, community, body=f"n{n}").status_code == 201
    found = stored_events(app)
    assert [e["row_id"] for e in found] == [1, 2, 3, 4, 5]
    assert len({e["uid"] for e in found}) == 5


def age_events(app, hours: float) -> None:
    with app.app_context(), engine.get_engine().begin() as conn:
        for row in conn.execute(sa.text("SELECT id, created FROM commentsvc_event")
                                .columns(created=sa.DateTime())).all():
            conn.execute(sa.text("UPDATE commentsvc_event SET created = :c WHERE id = :id")
                         .bindparams(sa.bindparam("c", type_=sa.DateTime())),
                         {"c": row.created - timedelta(hours=hours), "id": row.id})


def add_endpoint(app, url: str, delivered_through: int) -> None:
    with app.app_context(), engine.get_engine().begin() as conn:
        conn.execute(sa.text(
            "INSERT INTO commentsvc_webhook_endpoint (url, delivered_through, next_attempt) "
            "VALUES (:url, :through, :now)").bindparams(
                sa.bindparam("now", type_=sa.DateTime())),
            {"url": url, "through": delivered_through,
             "now": datetime.now(UTC).replace(tzinfo=None)})


@pytest.mark.parametrize("batch", [None, 2])
def test_pruning_keeps_recent_events_the_newest_and_what_an_endpoint_lacks(
        app, client, community, batch):
    for n in range(6):
        post(client, community, body=f"n{n}")
    age_events(app, 200)
    post(client, community, body="recent")
    add_endpoint(app, "http://a.example/", 4)
    add_endpoint(app, "http://b.example/", 5)
    with app.app_context():
        pruned = outbox.prune(engine.get_engine(), 168, batch=batch)
    assert pruned == (2 if batch else 4)
    kept = [e["row_id"] for e in stored_events(app)]
    assert kept == ([3, 4, 5, 6, 7] if batch else [5, 6, 7])
    with app.app_context(), engine.get_engine().begin() as conn:
        conn.execute(sa.text("UPDATE commentsvc_webhook_endpoint SET delivered_through = 7"))
    age_events(app, 200)
    with app.app_context():
        outbox.prune(engine.get_engine(), 168, batch=None)
    assert [e["row_id"] for e in stored_events(app)] == [7], "the newest stays"
    assert post(client, community, body="next").status_code == 201
    assert [e["row_id"] for e in stored_events(app)] == [7, 8], "numbered on from it"


def test_writes_prune_old_events_after_their_answer(app_factory):
    app = app_factory(COMMENTSVC_EVENT_RETENTION_HOURS="1")
    community = Community(app)
    client = app.test_client()
    post(client, community, body="old").close()  # the process's first turn
    age_events(app, 2)
    app.extensions["commentsvc"].idempotency_purge._next = 0.0  # its next turn
    response = post(client, community, body="new")
    assert len(stored_events(app)) == 2, "pruned only once the answer is out"
    response.close()
    assert [e["body"]["data"]["comment"]["body"] for e in stored_events(app)] == ["new"]
