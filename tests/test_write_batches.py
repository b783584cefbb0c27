"""Posts written in batches (web.write_batches, storage.posting.write_batch): each post of a
batch meets the rules it would meet alone and is refused alone, the rest are written
together with exact positions, events in commit order, and keyed answers."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from commentsvc.storage import engine as db
from commentsvc.storage import posting, prepared, store
from commentsvc.web import auth, current, idempotency, write_batches
from commentsvc.web.deletion import Deletion
from commentsvc.web.exceptions import PermissionDenied, ValidationFailed
from commentsvc.web.rendering import locator
from conftest import Community, make_app
from helpers import assert_positions_exact

URL = "/api/comments/"
PAGE = {"content_type": "comics.comicpage", "object_id": 10, "parent": None,
        "is_anonymous": False}
ANN, BOB = auth.Viewer(1, username="ann"), auth.Viewer(2, username="bob", avatar="bob.png")


def request_of(viewer, key=None, **fields):
    """A post as the view hands it to its batch (fields as the schema loads them)."""
    loaded = {**PAGE, "body": "Hello", **fields}
    write = None
    if key is not None:
        write = idempotency.Keyed(viewer.id, key, "POST", URL,
                                  idempotency.request_digest("POST", URL, loaded))
    return write_batches.PostRequest(viewer, loaded, write, locator())


def write_batch(app, requests_of):
    """``requests_of()`` written as one batch, in a request of the app."""
    with app.test_request_context(URL, base_url="https://comments.example"):
        requests = requests_of()
        return write_batches.write(current.service(), lambda: requests)


def events_of(app) -> list[tuple[int, str, int]]:
    with app.app_context(), db.get_engine().connect() as conn:
        return [tuple(row) for row in conn.execute(sa.text(
            "SELECT id, event_type, comment_id FROM commentsvc_event ORDER BY id"))]


def test_one_batch_writes_each_post_or_refuses_it_alone(app, community):
    outcomes = write_batch(app, lambda: [
        request_of(ANN, body="a new root"),
        request_of(BOB, body="a reply", parent=100),
        request_of(ANN, body="a reply to a reply", parent=101),
        request_of(ANN, object_id=99),  # no such page
        request_of(BOB, parent=103),  # deleted
        request_of(ANN, object_id=11, parent=100),  # parent on another page
        request_of(auth.Viewer(77)),  # a host's user the service has no name for
        request_of(BOB, content_type="users.user", object_id=1, body="on ann's profile"),
    ])
    written = [o for o in outcomes if isinstance(o, write_batches.Posted)]
    assert [o.comment.body for o in written] == [
        "a new root", "a reply", "a reply to a reply", "on ann's profile"]
    ids = [o.comment.id for o in written]
    assert ids == list(range(ids[0], ids[0] + 4))  # the next ids, in the batch's order
    assert [o.comment.parent_id for o in written] == [None, 100, 100, None]
    assert written[1].comment.username == "bob" and written[1].comment.avatar == "bob.png"
    assert all(o.location == f"https://comments.example/api/comments/{o.comment.id}/"
               for o in written)
    refusals = [o for o in outcomes if not isinstance(o, write_batches.Posted)]
    assert [type(o) for o in refusals] == [ValidationFailed] * 3 + [PermissionDenied]
    assert refusals[0].detail == {"object_id": ['Invalid pk "99" - object does not exist.']}
    assert refusals[1].detail == {"parent": ["A deleted comment cannot be replied to."]}
    assert refusals[2].detail == {"parent": ["The parent comment is on another object."]}
    with app.app_context(), db.get_engine().connect() as conn:
        assert_positions_exact(conn)
        shown = conn.execute(sa.text("SELECT count(*) FROM commentsvc_comment "
                                     "WHERE id IN :ids AND shown IS NOT NULL").bindparams(
            sa.bindparam("ids", expanding=True)), {"ids": ids}).scalar_one()
    assert shown == 4  # each written with its stored render
    created = [(kind, comment) for _, kind, comment in events_of(app)]
    assert created == [("comment.created", i) for i in ids]  # numbered in commit order


def test_a_batch_of_posts_lists_them_newest_first_on_top(app, client, community):
    write_batch(app, lambda: [request_of(ANN, body=f"batch {n}") for n in range(3)])
    page = client.get(URL + "?content_type=comics.comicpage&object_id=10").get_json()
    assert [c["body"] for c in page["results"][:3]] == ["batch 2", "batch 1", "batch 0"]


def test_a_key_sent_twice_in_one_batch_is_written_once(app, community):
    outcomes = write_batch(app, lambda: [request_of(ANN, key="k1", body="once"),
                                         request_of(ANN, key="k1", body="once")])
    assert isinstance(outcomes[0], write_batches.Posted) and outcomes[0].replay is None
    assert outcomes[1] is write_batches.TRY_AGAIN
    # its next batch finds the first one's answer
    again = write_batch(app, lambda: [request_of(ANN, key="k1", body="once")])[0]
    assert again.replay is not None
    assert again.replay.payload()["id"] == outcomes[0].comment.id
    with app.app_context(), db.get_engine().connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM commentsvc_comment "
                                    "WHERE body = 'once'")).scalar_one() == 1


def test_a_key_used_for_another_post_is_refused_alone(app, community):
    write_batch(app, lambda: [request_of(ANN, key="k2", body="first")])
    outcomes = write_batch(app, lambda: [request_of(ANN, key="k2", body="other"),
                                         request_of(BOB, body="fine")])
    assert isinstance(outcomes[0], idempotency.KeyReused)
    assert isinstance(outcomes[1], write_batches.Posted)


def test_a_batch_refused_for_one_post_is_written_post_by_post(app, community, monkeypatch):
    """Something only one post hits (here its key found taken as it is kept) fails the
    batch's transaction; each post is then written alone, so only that post fails."""
    remember = idempotency.remember

    def taken(conn, write, *args, **kwargs):
        if write is not None and write.key == "taken":
            raise idempotency.KeyInUse()
        return remember(conn, write, *args, **kwargs)

    monkeypatch.setattr(idempotency, "remember", taken)
    outcomes = write_batch(app, lambda: [request_of(ANN, body="before"),
                                         request_of(BOB, key="taken", body="unlucky"),
                                         request_of(ANN, key="fine", body="after")])
    assert isinstance(outcomes[0], write_batches.Posted)
    assert isinstance(outcomes[1], idempotency.KeyInUse)
    assert isinstance(outcomes[2], write_batches.Posted)
    with app.app_context(), db.get_engine().connect() as conn:
        bodies = conn.execute(sa.text("SELECT body FROM commentsvc_comment "
                                      "WHERE id > 103 ORDER BY id")).scalars().all()
        assert_positions_exact(conn)
    assert bodies == ["before", "after"]


def test_a_clock_behind_the_newest_comment_places_posts_below_it(app, client, community):
    """A comment dated ahead of the clock (an import, another node's clock) stays on top;
    posts written meanwhile go below it, every position still exact."""
    ahead = datetime.now(UTC).replace(tzinfo=None) + timedelta(days=1)
    with app.app_context(), db.writing(db.get_engine()) as conn:
        future = store.add_comment(conn, store.NewComment(
            "comics.comicpage", 10, 1, "from the future", date_added=ahead))
    outcomes = write_batch(app, lambda: [request_of(ANN, body="now 1"),
                                         request_of(BOB, body="now 2")])
    assert all(isinstance(o, write_batches.Posted) for o in outcomes)
    page = client.get(URL + "?content_type=comics.comicpage&object_id=10").get_json()
    assert [c["id"] for c in page["results"][:3]] == [
        future, outcomes[1].comment.id, outcomes[0].comment.id]
    with app.app_context(), db.get_engine().connect() as conn:
        assert_positions_exact(conn)
    assert [comment for _, _, comment in events_of(app)] == [
        outcomes[0].comment.id, outcomes[1].comment.id]


def test_an_imported_comment_with_the_largest_id_leaves_posts_the_free_ids_below(
        app, client, community):
    """An import may take the largest id there is (2^63 - 1); posts written after it take
    the highest free ids below it instead of failing on the next one up."""
    from conftest import insert_records

    top = 2**63 - 1
    insert_records(app, [{
        "type": "comment", "id": top, "content_type": "comics.comicpage", "object_id": 11,
        "parent_id": None, "author_id": 2, "body": "imported last", "is_deleted": False,
        "date_added": "2020-06-01T00:00:00Z", "is_anonymous": False, "is_read": False}])
    outcomes = write_batch(app, lambda: [request_of(ANN, body="one"),
                                         request_of(BOB, body="two")])
    assert [o.comment.id for o in outcomes] == [top - 1, top - 2]
    posted = client.post(URL, headers=community.auth("carol"), json={
        "content_type": "comics.comicpage", "object_id": 11, "body": "over HTTP"})
    assert posted.status_code == 201, posted.get_json()
    assert posted.get_json()["id"] == top - 3
    page = client.get(URL + "?content_type=comics.comicpage&object_id=11").get_json()
    assert [c["id"] for c in page["results"][:2]] == [top - 3, top]  # by date: newest first
    with app.app_context(), db.get_engine().connect() as conn:
        assert_positions_exact(conn)


def test_posts_at_once_are_batched_and_every_list_stays_exact(app, community, monkeypatch):
    """Threads post together while each batch takes a while: later posts queue and are
    written in batches of several; every post is answered, listed once, in order."""
    sizes: list[int] = []
    write = posting.write_batch

    def slow_write(conn, facts, posts, settings):
        sizes.append(len(posts))
        time.sleep(0.02)
        return write(conn, facts, posts, settings)

    monkeypatch.setattr(posting, "write_batch", slow_write)
    answers: list = []
    lock = threading.Lock()

    def poster(name: str, n: int) -> None:
        client = app.test_client()
        for i in range(6):
            fields = {"content_type": "comics.comicpage", "object_id": 10 + (i % 2),
                      "body": f"{name} {n} {i}"}
            if i == 2:  # on page 10: a reply to its comment 100
                fields["parent"] = 100
            response = client.post(URL, json=fields, headers=community.auth(name))
            with lock:
                answers.append(response.status_code)

    threads = [threading.Thread(target=poster, args=(("ann", "bob", "carol")[n % 3], n))
               for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert answers == [201] * 48
    assert max(sizes) > 1 and sum(sizes) == 48
    with app.app_context(), db.get_engine().connect() as conn:
        assert_positions_exact(conn)
        comment_ids = conn.execute(sa.text(
            "SELECT id FROM commentsvc_comment WHERE id > 103 ORDER BY id")).scalars().all()
    assert [comment for _, _, comment in events_of(app)] == comment_ids


def _on_every_pooled_connection(app, use) -> None:
    """``use(cursor)`` on every connection the app's pool holds (one at least), past the
    pool: what its records say of the connections stays as it was."""
    with app.app_context():
        engine = db.get_engine()
        held = [engine.raw_connection() for _ in range(max(1, engine.pool.checkedin()))]
        for connection in held:
            with connection.cursor() as cursor:
                use(cursor)
            connection.commit()
        for connection in held:
            connection.close()


def _run_on_every_pooled_connection(app, statements) -> None:
    def run(cursor) -> None:
        for statement in statements:
            cursor.execute(statement)

    _on_every_pooled_connection(app, run)


def _lose_prepared_statements(app) -> None:
    """Every pooled connection forgets what it prepared; their pool records still say
    prepared (as behind a pooler that hands another session)."""
    _run_on_every_pooled_connection(app, ["DEALLOCATE ALL"])


@pytest.fixture
def pg_app(postgres_url):
    """A PostgreSQL app with the community loaded; afterwards the process prepares its
    statements again (a test may have switched that off) and the app's connections close."""
    app = make_app(postgres_url)
    Community(app)
    yield app
    prepared._Switch.enabled = True
    with app.app_context():
        db.get_engine().dispose()


def test_a_connection_that_lost_its_prepared_statements_still_writes(pg_app):
    """A pooler may hand a session that no longer has what this connection prepared: the
    batch runs again with its statements sent whole, from then on."""
    app = pg_app
    assert isinstance(write_batch(app, lambda: [request_of(ANN, body="prepared")])[0],
                      write_batches.Posted)
    _lose_prepared_statements(app)
    outcome = write_batch(app, lambda: [request_of(ANN, body="sent whole")])[0]
    assert isinstance(outcome, write_batches.Posted)
    assert prepared._Switch.enabled is False
    with app.app_context(), db.get_engine().connect() as conn:
        assert_positions_exact(conn)


def _posted_by_ann(app, bodies):
    """Comments ``bodies`` written by ann, one batch each; their ids."""
    ids = []
    for body in bodies:
        outcome = write_batch(app, lambda b=body: [request_of(ANN, body=b)])[0]
        assert isinstance(outcome, write_batches.Posted)
        ids.append(outcome.comment.id)
    return ids


def _delete(app, comment_id):
    """A delete of ``comment_id`` by ann, as its own batch; its outcome."""
    return write_batch(app, lambda: [
        Deletion(ANN, comment_id, None, current.service().settings)])[0]


def _assert_deleted_everywhere(app, ids, bodies):
    """Each comment of ``ids`` blanked, and no comment.created event still holds its text."""
    with app.app_context(), db.get_engine().connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT is_deleted, body FROM commentsvc_comment WHERE id IN :ids").bindparams(
            sa.bindparam("ids", expanding=True)), {"ids": ids}).all()
        payloads = conn.execute(sa.text(
            "SELECT payload FROM commentsvc_event WHERE event_type = 'comment.created' "
            "AND comment_id IN :ids").bindparams(sa.bindparam("ids", expanding=True)),
            {"ids": ids}).scalars().all()
    assert sorted(map(tuple, rows)) == [(True, "")] * len(ids)
    assert len(payloads) == len(ids)
    assert not [body for body in bodies if any(body in payload for payload in payloads)]


def _plans(app) -> tuple[dict[str, list[int]], set[str]]:
    """Generic and custom plans of each statement prepared on the pool's connections, and
    the plan_cache_mode settings those connections are left with."""
    plans: dict[str, list[int]] = {}
    settings = set()

    def read(cursor) -> None:
        cursor.execute("SELECT name, generic_plans, custom_plans FROM pg_prepared_statements")
        for name, generic, custom in cursor.fetchall():
            found = plans.setdefault(name, [0, 0])
            found[0] += generic
            found[1] += custom
        cursor.execute("SHOW plan_cache_mode")
        settings.add(cursor.fetchone()[0])

    _on_every_pooled_connection(app, read)
    return plans, settings


def test_a_deletes_statements_run_prepared_on_their_one_generic_plan(pg_app):
    """A delete holds the writers' lock through three statements (its check's read, the
    blanking, the texts rewritten), and planning them took longer than running them: each
    is prepared once on a connection and runs on the one plan made then."""
    app = pg_app
    bodies = [f"to be deleted {n}" for n in range(8)]
    ids = _posted_by_ann(app, bodies)
    for comment_id in ids:  # past the 5 custom plans PostgreSQL would try first
        assert isinstance(_delete(app, comment_id), write_batches.Changed)
    _assert_deleted_everywhere(app, ids, bodies)
    plans, settings = _plans(app)
    for name in ("commentsvc_comment_facts", "commentsvc_delete", "commentsvc_rewrite"):
        assert plans[name][0] >= 8 and plans[name][1] == 0, plans
    assert settings == {"auto"}
    with app.app_context(), db.get_engine().connect() as conn:
        assert_positions_exact(conn)


def test_a_delete_on_a_connection_that_lost_its_prepared_statements_still_deletes(
        pg_app):
    """As a post does: the batch runs again with its statements sent whole, from then on."""
    app = pg_app
    bodies = ["deleted prepared", "deleted sent whole"]
    ids = _posted_by_ann(app, bodies)
    assert isinstance(_delete(app, ids[0]), write_batches.Changed)
    _lose_prepared_statements(app)
    assert isinstance(_delete(app, ids[1]), write_batches.Changed)
    assert prepared._Switch.enabled is False
    _assert_deleted_everywhere(app, ids, bodies)
    refused = _delete(app, 10**6)  # and a missing comment is still a 404, sent whole
    assert refused.status == 404


def _prepared_by_another_client(app, names) -> None:
    """Every pooled connection's session holds statements of these names that its pool
    record does not know of (as a pooler hands a session another client prepared on)."""
    _run_on_every_pooled_connection(app, [f"PREPARE {name} AS SELECT 1" for name in names])


def test_writes_meeting_a_session_where_their_statements_are_prepared_already_still_write(
        pg_app):
    """Behind a pooler in transaction mode the PREPARE of a name another client prepared
    on that session fails: the batch runs again with its statements sent whole, from then
    on, for posts and deletes alike."""
    app = pg_app
    _prepared_by_another_client(app, ["commentsvc_batch_facts", "commentsvc_comment_facts"])
    outcome = write_batch(app, lambda: [request_of(ANN, body="met a pooler's session")])[0]
    assert isinstance(outcome, write_batches.Posted)
    assert prepared._Switch.enabled is False
    assert isinstance(_delete(app, outcome.comment.id), write_batches.Changed)
    _assert_deleted_everywhere(app, [outcome.comment.id], ["met a pooler's session"])
    with app.app_context(), db.get_engine().connect() as conn:
        assert_positions_exact(conn)


def test_a_delete_meeting_a_session_where_its_check_is_prepared_already_still_deletes(
        pg_app):
    app = pg_app
    ids = _posted_by_ann(app, ["prepared by another client"])  # posts' statements kept
    _prepared_by_another_client(app, ["commentsvc_comment_facts"])
    assert isinstance(_delete(app, ids[0]), write_batches.Changed)
    assert prepared._Switch.enabled is False
    _assert_deleted_everywhere(app, ids, ["prepared by another client"])


def test_a_post_written_alone_that_meets_its_statements_gone_still_writes(pg_app, monkeypatch):
    """A batch refused for one post runs each post alone; the first of those to meet a
    session without its prepared statements runs again sent whole, as a batch does."""
    app = pg_app
    remember = idempotency.remember

    def taken(conn, write, *args, **kwargs):
        if write is not None and write.key == "taken":
            conn.exec_driver_sql("DEALLOCATE ALL")  # not undone by the rollback
            raise idempotency.KeyInUse()
        return remember(conn, write, *args, **kwargs)

    with app.app_context():
        db.get_engine().pool.dispose()  # one connection from here on, used again
    monkeypatch.setattr(idempotency, "remember", taken)
    outcomes = write_batch(app, lambda: [request_of(ANN, body="before"),
                                         request_of(BOB, key="taken", body="unlucky")])
    assert isinstance(outcomes[0], write_batches.Posted), outcomes[0]
    assert isinstance(outcomes[1], idempotency.KeyInUse)
    assert prepared._Switch.enabled is False
    with app.app_context(), db.get_engine().connect() as conn:
        assert_positions_exact(conn)


def test_a_sign_in_read_that_lost_its_prepared_statement_still_signs_in(postgres_url):
    """The same for the sign-in read every signed-in request makes (posts only here: a
    list read would take a pooled connection for its own kept one)."""
    app = make_app(postgres_url)
    try:
        people = Community(app)
        client = app.test_client()
        body = {**PAGE, "parent": 100, "body": "signed in"}
        assert client.post(URL, json=body, headers=people.auth("ann")).status_code == 201
        _lose_prepared_statements(app)
        assert client.post(URL, json=body, headers=people.auth("ann")).status_code == 201
        assert prepared._Switch.enabled is False
    finally:
        prepared._Switch.enabled = True
        with app.app_context():
            db.get_engine().dispose()


def test_a_batchs_statements_run_on_their_one_generic_plan_and_leave_the_setting(
        pg_app):
    """Planning the batch's statements again for each batch cost more than running them:
    each runs on the plan made once (pg_prepared_statements counts no custom plan), and
    the setting ends with the transaction, so the connection keeps the server's default
    for a host's own statements."""
    app = pg_app
    for number in range(8):  # past the 5 custom plans PostgreSQL would try first
        assert isinstance(write_batch(app, lambda n=number: [
            request_of(ANN, body=f"post {n}"), request_of(BOB, body=f"and {n}")])[0],
            write_batches.Posted)
    plans, settings = _plans(app)
    for name in ("commentsvc_batch_facts", "commentsvc_write_batch"):
        assert plans[name][0] >= 8 and plans[name][1] == 0, plans
    assert settings == {"auto"}
