"""Idempotency-Key on POST, PATCH and DELETE: a retry gets the first answer and writes
nothing; a key names one request of one user; keys expire and are purged."""

from __future__ import annotations

import re
import threading
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from commentsvc.storage import engine as db
from commentsvc.web import idempotency
from conftest import table_rows
from helpers import assert_error

URL = "/api/comments/"
DETAIL_ALLOW = "GET, PATCH, DELETE, HEAD, OPTIONS"
PAGE = {"content_type": "comics.comicpage", "object_id": 10}
INVALID = ("Idempotency-Key must be 1 to 255 printable ASCII characters (space to tilde).")
REUSED = ("This Idempotency-Key was already used for a different request; use a new key "
          "for a new request.")


def post(client, community, key=None, name="ann", **fields):
    headers = community.auth(name)
    if key is not None:
        headers["Idempotency-Key"] = key
    return client.post(URL, json={**PAGE, "body": "Hello", **fields}, headers=headers)


def query(app, sql: str, **params):
    with app.app_context(), db.get_engine().connect() as conn:
        return conn.execute(sa.text(sql), params).all()


def stored_with_body(app, body: str) -> int:
    return query(app, "SELECT count(*) FROM commentsvc_comment WHERE body = :body",
                 body=body)[0][0]


def age_keys(app, hours: float) -> None:
    """Make every stored key ``hours`` old."""
    then = datetime.now(UTC).replace(tzinfo=None) - timedelta(hours=hours)
    with app.app_context(), db.get_engine().begin() as conn:
        conn.execute(sa.text("UPDATE commentsvc_idempotency_key SET created = :then")
                     .bindparams(sa.bindparam("then", type_=sa.DateTime())), {"then": then})


def key_count(app) -> int:
    return query(app, "SELECT count(*) FROM commentsvc_idempotency_key")[0][0]


def test_a_retry_gets_the_first_answer_and_writes_nothing(app, client, community):
    first = post(client, community, "k-1", body="only once")
    assert first.status_code == 201
    assert "Idempotent-Replayed" not in first.headers
    again = post(client, community, "k-1", body="only once")
    assert again.status_code == 201
    assert again.get_data() == first.get_data()
    assert again.headers["Location"] == first.headers["Location"]
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.headers["Content-Type"] == "application/json"
    assert stored_with_body(app, "only once") == 1
    assert key_count(app) == 1


def test_a_post_without_a_key_is_written_each_time(app, client, community):
    assert post(client, community, body="twice").status_code == 201
    assert post(client, community, body="twice").status_code == 201
    assert stored_with_body(app, "twice") == 2
    assert key_count(app) == 0


def rename_ann(app) -> None:
    with app.app_context(), db.get_engine().begin() as conn:
        conn.execute(sa.text("UPDATE commentsvc_user SET username = 'anna' WHERE id = 1"))


def test_the_replay_is_the_first_answer_verbatim_after_a_rename(app, client, community):
    first = post(client, community, "k-2", body="said once")
    rename_ann(app)
    assert client.get(first.headers["Location"]).get_json()["author"] == "anna"
    again = post(client, community, "k-2", body="said once")
    assert again.get_data() == first.get_data()
    assert again.get_json()["author"] == "ann"


def test_a_replay_never_sends_the_text_of_a_comment_deleted_since(app, client, community):
    first = post(client, community, "k-2d", body="taken back")
    assert client.delete(first.headers["Location"],
                         headers=community.auth("ann")).status_code == 204
    rename_ann(app)
    comments = query(app, "SELECT count(*) FROM commentsvc_comment")[0][0]
    again = post(client, community, "k-2d", body="taken back")
    assert again.status_code == 201 and again.headers["Idempotent-Replayed"] == "true"
    assert again.headers["Location"] == first.headers["Location"]
    assert again.get_json() == {**first.get_json(), "body": "", "is_deleted": True}
    # nothing written again (and deletion took the text out of the comment's row)
    assert query(app, "SELECT count(*) FROM commentsvc_comment")[0][0] == comments
    assert stored_with_body(app, "taken back") == 0


def test_keys_belong_to_a_user(app, client, community):
    ann = post(client, community, "shared", body="same words")
    bob = post(client, community, "shared", name="bob", body="same words")
    assert (ann.status_code, bob.status_code) == (201, 201)
    assert "Idempotent-Replayed" not in bob.headers
    assert ann.get_json()["id"] != bob.get_json()["id"]
    assert stored_with_body(app, "same words") == 2


@pytest.mark.parametrize("change", [
    {"body": "other words"},
    {"object_id": 11},
    {"parent": 100},
    {"is_anonymous": True},
])
def test_the_same_key_for_another_body_is_422_and_writes_nothing(app, client, community,
                                                                 change):
    post(client, community, "k-3", body="first words")
    before = table_rows(app)
    response = post(client, community, "k-3", **{"body": "first words", **change})
    assert_error(response, 422, REUSED)
    assert table_rows(app) == before


def test_the_same_key_on_another_method_or_path_is_422(app, client, community):
    post(client, community, "k-4")
    before = table_rows(app)
    headers = {**community.auth("ann"), "Idempotency-Key": "k-4"}
    assert_error(client.delete(f"{URL}102/", headers=headers), 422, REUSED, DETAIL_ALLOW)
    assert_error(client.patch(f"{URL}102/", json={"is_read": True}, headers=headers), 422,
                 REUSED, DETAIL_ALLOW)
    assert table_rows(app) == before


def test_a_retry_matches_whatever_the_encoding_of_the_same_fields(app, client, community):
    first = post(client, community, "k-5", body="encoded")
    form = client.post(URL, data={"object_id": "10", "body": "encoded",
                                  "content_type": "comics.comicpage"},
                       headers={**community.auth("ann"), "Idempotency-Key": "k-5"})
    assert form.status_code == 201 and form.headers["Idempotent-Replayed"] == "true"
    assert form.get_data() == first.get_data()


@pytest.mark.parametrize("key", ["", "x" * 256, "caf\u00e9", "tab\there", "bell\x07"])
def test_a_malformed_key_is_400_naming_the_header_and_writes_nothing(app, client,
                                                                     community, key):
    before = table_rows(app)
    response = client.post(URL, json={**PAGE, "body": "Hello"},
                           headers=[*community.auth("ann").items(),
                                    ("Idempotency-Key", key)])
    assert_error(response, 400, INVALID)
    assert table_rows(app) == before


def test_keys_of_1_and_255_printable_characters_are_accepted(client, community):
    for key in ("a", " ~!\"#$%&'()*+,-./09:;<=>?@AZ[\\]^_`az{|}" + "x" * 215):
        assert len(key) <= 255
        assert post(client, community, key).status_code == 201
    assert post(client, community, "y" * 255).status_code == 201


def test_a_form_carries_its_key_in_the_idempotency_key_field(app, client, community):
    form = {**PAGE, "body": "from a form", "idempotency_key": "form-1"}
    first = client.post(URL, data=form, headers=community.auth("ann"))
    again = client.post(URL, data=form, headers=community.auth("ann"))
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.headers["Idempotent-Replayed"] == "true"
    assert stored_with_body(app, "from a form") == 1
    both = client.post(URL, data=form, headers={**community.auth("ann"),
                                                "Idempotency-Key": "form-1"})
    assert both.headers["Idempotent-Replayed"] == "true"
    differ = client.post(URL, data=form, headers={**community.auth("ann"),
                                                  "Idempotency-Key": "form-2"})
    assert_error(differ, 400, "The Idempotency-Key header and the idempotency_key field "
                              "differ.")


def test_the_field_is_a_form_field_only(app, client, community):
    """In JSON, idempotency_key is an unknown field, ignored as every other one is."""
    for _ in range(2):
        assert post(client, community, idempotency_key="json-1",
                    body="json field").status_code == 201
    assert stored_with_body(app, "json field") == 2


def test_a_refused_write_leaves_no_key_and_a_retry_writes(app, client, community):
    refused = post(client, community, "k-6", object_id=999)
    assert refused.status_code == 400
    assert key_count(app) == 0
    assert post(client, community, "k-6", object_id=999).status_code == 400
    assert post(client, community, "k-6").status_code == 201


def test_a_write_that_fails_after_its_key_leaves_neither(app, client, community,
                                                         monkeypatch):
    """The key is in the write's transaction: if that rolls back, so does the key."""
    remember = idempotency.remember

    def remember_then_fail(*args, **kwargs):
        remember(*args, **kwargs)
        raise sa.exc.OperationalError("COMMIT", {}, Exception("server closed the connection"))

    monkeypatch.setattr(idempotency, "remember", remember_then_fail)
    assert post(client, community, "k-7", body="rolled back").status_code == 503
    assert stored_with_body(app, "rolled back") == 0 and key_count(app) == 0
    monkeypatch.setattr(idempotency, "remember", remember)
    retried = post(client, community, "k-7", body="rolled back")
    assert retried.status_code == 201 and "Idempotent-Replayed" not in retried.headers
    assert stored_with_body(app, "rolled back") == 1


def test_a_replay_is_not_counted_by_the_posting_limit(app_factory, community_on):
    app = app_factory(COMMENTSVC_POST_RATE_LIMIT="1/minute")
    community = community_on(app)
    client = app.test_client()
    assert post(client, community, "k-8").status_code == 201
    assert post(client, community, "k-8").status_code == 201
    assert post(client, community, "k-9").status_code == 429


@pytest.fixture
def community_on():
    from conftest import Community

    return Community


def test_a_keyed_patch_is_replayed(app, client, community):
    headers = {**community.auth("ann"), "Idempotency-Key": "read-1"}
    first = client.patch(f"{URL}102/", json={"is_read": True}, headers=headers)
    assert first.status_code == 200 and "Idempotent-Replayed" not in first.headers
    client.patch(f"{URL}102/", json={"is_read": False}, headers=community.auth("ann"))
    again = client.patch(f"{URL}102/", json={"is_read": True}, headers=headers)
    assert again.status_code == 200 and again.headers["Idempotent-Replayed"] == "true"
    assert again.get_data() == first.get_data()
    assert again.headers["Allow"] == DETAIL_ALLOW
    # The replay wrote nothing: the later unread stands.
    assert client.get(f"{URL}102/").get_json()["is_read"] is False
    assert_error(client.patch(f"{URL}102/", json={"is_read": False}, headers=headers), 422,
                 REUSED, DETAIL_ALLOW)


def test_a_keyed_delete_is_replayed(app, client, community):
    headers = {**community.auth("bob"), "Idempotency-Key": "del-1"}
    first = client.delete(f"{URL}102/", headers=headers)
    assert first.status_code == 204 and "Idempotent-Replayed" not in first.headers
    again = client.delete(f"{URL}102/", headers=headers)
    assert again.status_code == 204 and again.headers["Idempotent-Replayed"] == "true"
    assert again.get_data() == b""
    assert query(app, "SELECT comment_id, status FROM commentsvc_idempotency_key") == [
        (102, 204)]


def test_a_refused_delete_stores_no_key(app, client, community):
    headers = {**community.auth("ann"), "Idempotency-Key": "del-2"}
    assert client.delete(f"{URL}102/", headers=headers).status_code == 403
    assert key_count(app) == 0


def test_concurrent_requests_with_one_key_write_once(app, community):
    """The second waits for the writers' lock, then finds the first's key."""
    answers: list = []
    start = threading.Barrier(6)

    def send() -> None:
        own = app.test_client()
        start.wait()
        answers.append(post(own, community, "race-1", body="raced"))

    threads = [threading.Thread(target=send) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [a.status_code for a in answers] == [201] * 6
    assert sum("Idempotent-Replayed" not in a.headers for a in answers) == 1
    assert len({a.get_data() for a in answers}) == 1
    assert stored_with_body(app, "raced") == 1


def test_a_key_past_its_retention_is_a_new_key(app, client, community):
    post(client, community, "old-1", body="long ago")
    age_keys(app, 25)
    again = post(client, community, "old-1", body="new words")
    assert again.status_code == 201 and "Idempotent-Replayed" not in again.headers
    assert stored_with_body(app, "new words") == 1 and key_count(app) == 1


def test_the_retention_is_a_setting(app_factory, community_on):
    app = app_factory(COMMENTSVC_IDEMPOTENCY_RETENTION_HOURS="0.5")
    community = community_on(app)
    client = app.test_client()
    post(client, community, "half-1")
    age_keys(app, 0.4)
    assert post(client, community, "half-1").headers.get("Idempotent-Replayed") == "true"
    age_keys(app, 0.6)
    assert "Idempotent-Replayed" not in post(client, community, "half-1").headers


def test_the_purge_command_deletes_expired_keys_only(app, client, community):
    runner = app.test_cli_runner()
    for n in range(3):
        post(client, community, f"purge-{n}")
    age_keys(app, 30)
    post(client, community, "fresh")
    result = runner.invoke(args=["purge-idempotency-keys"])
    assert result.exit_code == 0, result.output
    assert result.output == "Purged 3 idempotency keys older than 24 h.\n"
    assert query(app, "SELECT idem_key FROM commentsvc_idempotency_key") == [("fresh",)]
    assert runner.invoke(args=["purge-idempotency-keys"]).output == (
        "Purged 0 idempotency keys older than 24 h.\n")


def test_a_keyed_write_purges_expired_keys_after_its_answer(app_factory, community_on):
    """The purge runs when the server closes the response (the test client: close())."""
    app = app_factory(COMMENTSVC_IDEMPOTENCY_PURGE_SECONDS="3600")
    community = community_on(app)
    client = app.test_client()
    post(client, community, "stale-1").close()  # the process's first turn: nothing old
    post(client, community, "stale-2").close()
    age_keys(app, 30)
    second = post(client, community, "second")
    assert second.status_code == 201
    second.close()  # not due again for an hour: nothing purged
    assert key_count(app) == 3
    app.extensions["commentsvc"].idempotency_purge._next = 0.0  # an hour later
    third = post(client, community, "third")
    assert key_count(app) == 4, "purged only once the answer is out"
    third.close()
    assert sorted(k for (k,) in query(app, "SELECT idem_key FROM "
                                           "commentsvc_idempotency_key")) == [
        "second", "third"]
    replayed = post(client, community, "third")
    replayed.close()  # a replay adds no key: never a turn to purge
    assert app.extensions["commentsvc"].idempotency_purge._next > 0


def test_the_schedule_purges_in_bounded_batches(app):
    then = datetime.now(UTC).replace(tzinfo=None) - timedelta(hours=48)
    with app.app_context(), db.get_engine().begin() as conn:
        for n in range(5):
            conn.execute(sa.text(
                "INSERT INTO commentsvc_idempotency_key (user_id, idem_key, method, target, "
                "request_digest, status, body, created) VALUES (1, :k, 'POST', '/', 'd', "
                "201, '', :then)").bindparams(sa.bindparam("then", type_=sa.DateTime())),
                {"k": f"b-{n}", "then": then})
    schedule = idempotency.PurgeSchedule(3600, 24, batch=2)
    with app.app_context():
        engine = db.get_engine()
        assert schedule.due() and schedule.run(engine) == 2
        assert schedule.due(), "a full batch: more are due at once"
        assert schedule.run(engine) == 2 and schedule.due() and schedule.run(engine) == 1
        assert not schedule.due()
    assert key_count(app) == 0


def test_a_failed_purge_is_logged_and_fails_nothing(app, caplog):
    schedule = idempotency.PurgeSchedule(1, 24)
    broken = sa.create_engine("sqlite:///file:nowhere?mode=ro&uri=true")
    assert schedule.run(broken) == 0
    assert "purging idempotency keys or old events failed" in caplog.text
    broken.dispose()


def form_key(page: str) -> str:
    found = re.findall(r'<input type="hidden" name="idempotency_key" value="([^"]+)">', page)
    assert len(found) == 1
    return found[0]


def test_each_post_form_served_carries_a_fresh_key(client, community):
    url = URL + "?format=api&content_type=comics.comicpage&object_id=10"
    first = client.get(url, headers=community.auth("bob"))
    again = client.get(url, headers=community.auth("bob"))  # from the response cache
    assert first.headers["ETag"] == again.headers["ETag"]
    keys = {form_key(first.get_data(as_text=True)), form_key(again.get_data(as_text=True))}
    assert len(keys) == 2
    assert all(idempotency.valid_key(key) and len(key) == 32 for key in keys)
    assert "Post a comment" not in client.get(url).get_data(as_text=True)  # no user, no form


def test_a_key_sent_as_two_headers_is_the_one_key_they_join_into(app, client, community):
    """Two header lines reach the app joined by "," (gunicorn) or ", " (Werkzeug): either
    spelling, or the two lines again, is the same key, so a retry is never a second post."""
    headers = [*community.auth("ann").items(), ("Idempotency-Key", "a-1"),
               ("Idempotency-Key", "b-2")]
    first = client.post(URL, json={**PAGE, "body": "two lines"}, headers=headers)
    assert first.status_code == 201
    for spelled in ("a-1, b-2", "a-1,b-2", "a-1 ,b-2", "a-1,\tb-2"):
        again = post(client, community, spelled, body="two lines")
        assert again.status_code == 201, spelled
        assert again.headers["Idempotent-Replayed"] == "true"
        assert again.get_data() == first.get_data()
    again = client.post(URL, json={**PAGE, "body": "two lines"}, headers=headers)
    assert again.headers["Idempotent-Replayed"] == "true"
    assert stored_with_body(app, "two lines") == 1
    assert query(app, "SELECT idem_key FROM commentsvc_idempotency_key") == [("a-1, b-2",)]
    other = post(client, community, "a-1, b-3", body="two lines")  # another key
    assert other.status_code == 201 and "Idempotent-Replayed" not in other.headers


def test_a_form_sent_twice_posts_once(app, client, community):
    page = client.get(URL + "?format=api", headers=community.auth("bob"))
    form = {**PAGE, "body": "double click", "parent": "",
            "idempotency_key": form_key(page.get_data(as_text=True))}
    first = client.post(URL + "?format=api", data=form, headers=community.auth("bob"))
    again = client.post(URL + "?format=api", data=form, headers=community.auth("bob"))
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.mimetype == "text/html" and again.headers["Idempotent-Replayed"] == "true"
    assert again.headers["Location"] == first.headers["Location"]
    assert "Idempotent-Replayed" in again.get_data(as_text=True)  # among the JSON's headers
    assert stored_with_body(app, "double click") == 1
    fresh = client.get(URL + "?format=api", headers=community.auth("bob"))
    form["idempotency_key"] = form_key(fresh.get_data(as_text=True))
    assert client.post(URL + "?format=api", data=form,
                       headers=community.auth("bob")).status_code == 201
    assert stored_with_body(app, "double click") == 2


def stored_answers(app) -> str:
    """Every stored answer's body, joined: what the key table holds of people's text."""
    return "\n".join(row[0] for row in query(app, "SELECT body FROM commentsvc_idempotency_key"))


def test_deleting_a_comment_takes_its_text_out_of_the_key_table(app, client, community):
    first = post(client, community, "k-gone", body="words to forget")
    assert "words to forget" in stored_answers(app)
    assert client.delete(first.headers["Location"],
                         headers=community.auth("ann")).status_code == 204
    assert "words to forget" not in stored_answers(app)
    again = post(client, community, "k-gone", body="words to forget")
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.get_json() == {**first.get_json(), "body": "", "is_deleted": True}
    assert stored_with_body(app, "words to forget") == 0  # the comment's own row too


def test_deleting_a_reply_takes_its_text_out_of_its_roots_stored_answers(app, client,
                                                                         community):
    profile = {"content_type": "users.user", "object_id": 1}  # ann's profile: ann marks read
    root = post(client, community, name="bob", body="a root", **profile).get_json()
    reply = post(client, community, name="carol", body="a reply to forget", parent=root["id"],
                 **profile).get_json()
    headers = {**community.auth("ann"), "Idempotency-Key": "read-root"}
    marked = client.patch(f"{URL}{root['id']}/", json={"is_read": True}, headers=headers)
    assert marked.status_code == 200
    assert "a reply to forget" in stored_answers(app)
    assert client.delete(f"{URL}{reply['id']}/",
                         headers=community.auth("carol")).status_code == 204
    assert "a reply to forget" not in stored_answers(app)
    assert "a root" in stored_answers(app)  # the root's own text stays
    again = client.patch(f"{URL}{root['id']}/", json={"is_read": True}, headers=headers)
    assert again.headers["Idempotent-Replayed"] == "true"
    shown_reply = again.get_json()["replies"][0]
    assert shown_reply["id"] == reply["id"]
    assert (shown_reply["body"], shown_reply["is_deleted"]) == ("", True)


def test_erasing_a_user_drops_every_stored_answer_showing_them(app, client, community,
                                                               runner):
    profile = {"content_type": "users.user", "object_id": 1}
    mine = post(client, community, "bob-1", name="bob", body="words of bob", **profile)
    other = post(client, community, "carol-1", name="carol", body="words of carol", **profile)
    read = client.patch(f"{URL}{mine.get_json()['id']}/", json={"is_read": True},
                        headers={**community.auth("ann"), "Idempotency-Key": "ann-read"})
    assert read.status_code == 200 and other.status_code == 201
    assert runner.invoke(args=["erase-user", "2"]).exit_code == 0
    kept = stored_answers(app)
    assert "words of bob" not in kept and '"bob"' not in kept
    assert "words of carol" in kept  # another user's answer about her own comment stays


def test_the_answers_showing_a_comment_are_found_by_index(app):
    """Deleting a comment looks up the stored answers that show it; with a day of keyed
    writes in the table that must not be a scan."""
    from commentsvc.storage.queries import idempotency as sql

    with app.app_context(), db.get_engine().connect() as conn:
        if conn.dialect.name == "sqlite":
            statement = str(sql.ANSWERS_HOLDING).replace("(__[POSTCOMPILE_ids])", "(1)")
            plan = " ".join(row[-1] for row in conn.exec_driver_sql(
                f"EXPLAIN QUERY PLAN {statement}"))
        else:
            plan = " ".join(row[0] for row in conn.execute(sa.text(
                "SELECT indexdef FROM pg_indexes WHERE tablename = 'commentsvc_idempotency_key'")))
    assert "commentsvc_idempotency_key_comment" in plan
    assert "comment_id" in plan  # the index (PostgreSQL) or its use (SQLite) names the column
