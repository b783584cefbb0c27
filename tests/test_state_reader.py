"""The reader behind 304s, built pages and sign-in keys: same answers, one round trip, and
a connection that heals itself, closes with its engine and never crosses a fork."""

from __future__ import annotations

import os

import sqlalchemy as sa

from commentsvc.rules.comment_lists import CommentList
from commentsvc.storage import counters, store
from commentsvc.storage import engine as db
from commentsvc.storage.queries import auth as auth_sql
from commentsvc.storage.queries import listing
from commentsvc.web import auth, current
from conftest import Community, backends, insert_records, terminate_backends


def reader_for(engine):
    """The current app's counter reader of ``engine``."""
    return current.service().counter_readers.for_engine(engine)


def states(app, comments: CommentList):
    """The list's state as the reader and as a snapshot read it."""
    with app.app_context():
        engine = db.get_engine()
        with db.snapshot(engine) as conn:
            return reader_for(engine).read(comments.key), store.state(conn, comments)


def test_reader_agrees_with_the_snapshot_read(app, sample_records):
    empty = CommentList("users.user", 999_999)
    assert states(app, CommentList()) == (store.ListState(0, 0), store.ListState(0, 0))
    insert_records(app, sample_records)
    comment = next(r for r in sample_records if r["type"] == "comment")
    for comments in (CommentList(), CommentList(comment["content_type"]),
                     CommentList(comment["content_type"], comment["object_id"]), empty):
        by_reader, by_snapshot = states(app, comments)
        assert by_reader == by_snapshot
    assert states(app, CommentList())[0].count == sum(
        r["type"] == "comment" for r in sample_records)


def test_reader_sees_each_write_at_once(app, sample_records):
    insert_records(app, sample_records)
    before, _ = states(app, CommentList())
    with app.app_context(), db.writing(db.get_engine()) as conn:
        root = next(r for r in sample_records if r["type"] == "comment")
        store.soft_delete(conn, root["id"])
    after, _ = states(app, CommentList())
    assert after.count == before.count and after.version > before.version


def read_site(app) -> store.ListState:
    with app.app_context():
        return reader_for(db.get_engine()).read("site")


def test_reads_leave_no_transaction_open_on_postgresql(pg_app):
    read_site(pg_app)
    assert backends(pg_app, "idle in transaction") == 0
    assert backends(pg_app, "idle") >= 1


def test_a_killed_connection_is_replaced_without_an_error(pg_app):
    read_site(pg_app)
    terminate_backends(pg_app)
    assert read_site(pg_app) == store.ListState(0, 0)


def test_dispose_closes_the_readers_connections(pg_app):
    read_site(pg_app)
    with pg_app.app_context():
        db.get_engine().dispose()
    assert backends(pg_app) == 0
    assert read_site(pg_app) == store.ListState(0, 0)  # and reads again afterwards


def test_a_forked_child_opens_its_own_connection_and_leaves_the_parents(pg_app):
    read_site(pg_app)
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        try:
            ok = read_site(pg_app) == store.ListState(0, 0)
        except BaseException:  # noqa: BLE001
            ok = False
        os._exit(0 if ok else 1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert read_site(pg_app) == store.ListState(0, 0)
    assert backends(pg_app, "idle in transaction") == 0


def test_positional_converts_the_named_parameter():
    assert counters.positional("WHERE k = :list_key", "pyformat") == "WHERE k = %s"
    assert counters.positional("WHERE k = :list_key", "qmark") == "WHERE k = ?"


def reader_connection_sql(app, statement: str) -> None:
    """Run ``statement`` on the reader's own kept connection (this thread's)."""
    with app.app_context():
        reader = reader_for(db.get_engine())
        with reader._connection().cursor() as cursor:
            cursor.execute(statement)


def test_postgresql_reads_use_a_prepared_statement(pg_app):
    read_site(pg_app)
    with pg_app.app_context():
        reader = reader_for(db.get_engine())
        with reader._connection().cursor() as cursor:
            cursor.execute("SELECT name FROM pg_prepared_statements")
            names = [row[0] for row in cursor.fetchall()]
    assert reader.uses_prepared and listing.LIST_STATE_PREPARED in names


def test_a_lost_prepared_statement_switches_to_the_plain_read(pg_app, sample_records):
    """As behind a pooler that hands the next statement to another server session."""
    insert_records(pg_app, sample_records)
    expected = read_site(pg_app)
    reader_connection_sql(pg_app, f"DEALLOCATE {listing.LIST_STATE_PREPARED}")
    assert read_site(pg_app) == expected  # answered by the fallback read
    with pg_app.app_context():
        assert not reader_for(db.get_engine()).uses_prepared
    assert read_site(pg_app) == expected


def test_the_prepared_read_follows_a_recreated_schema(pg_app, sample_records):
    read_site(pg_app)
    with pg_app.app_context(), db.get_engine().begin() as conn:
        db.drop_schema(conn)
        db.create_schema(conn)
    insert_records(pg_app, sample_records)
    count = sum(r["type"] == "comment" for r in sample_records)
    assert read_site(pg_app).count == count
    with pg_app.app_context():  # the server planned it again on the new table
        assert reader_for(db.get_engine()).uses_prepared


def test_a_lost_prepared_page_read_switches_to_the_plain_one(pg_app, sample_records):
    """The page read, too: the same page from the plain statement, then on."""
    insert_records(pg_app, sample_records)
    pg_app.extensions["commentsvc"].page_cache = None  # every request reads the page
    client = pg_app.test_client()
    url = "/api/comments/?page=2&page_size=3"
    expected = client.get(url).get_json()
    reader_connection_sql(pg_app, f"DEALLOCATE {listing.PAGE_READ_PREPARED['site']}")
    assert client.get(url).get_json() == expected  # answered by the engine's read
    with pg_app.app_context():
        assert not reader_for(db.get_engine()).uses_prepared
    assert client.get(url).get_json() == expected  # the plain statement on the kept one


def test_the_sign_in_read_agrees_with_the_snapshot_read(app, community):
    with app.app_context():
        engine = db.get_engine()
        reader = reader_for(engine)
        for key in [*community.tokens.values(), "f" * 40]:
            digest = auth.hash_key(key)
            with db.snapshot(engine) as conn:
                expected = conn.execute(auth_sql.VIEWER_BY_DIGEST, {"digest": digest}).first()
            assert reader.read_viewer(digest) == (tuple(expected) if expected else None)
        assert reader.read_viewer(auth.hash_key(community.tokens["carol"])) == (
            3, True, "carol", None)


def test_the_browser_session_read_agrees_with_the_snapshot_read(app, community):
    """A session's user as the kept connection reads it (PostgreSQL) and as the engine
    does: ann's live session, then none once its key is revoked, and none for no row."""
    from datetime import UTC, datetime

    with app.app_context():
        engine = db.get_engine()
        reader = reader_for(engine)
        with db.writing(engine) as conn:
            conn.execute(auth_sql.START_SESSION, {
                "digest": "s" * 64, "key_digest": auth.hash_key(community.tokens["ann"]),
                "created": datetime.now(UTC).replace(tzinfo=None)})
        assert reader.read_session_viewer("s" * 64) == (1, False, "ann", None)
        assert reader.read_session_viewer("t" * 64) is None
        with db.writing(engine) as conn:
            auth.revoke_token(conn, community.tokens["ann"])
        for digest in ("s" * 64, "t" * 64):
            with db.snapshot(engine) as conn:
                assert conn.execute(auth_sql.VIEWER_BY_SESSION, {"digest": digest}
                                    ).first() is None
            assert reader.read_session_viewer(digest) is None


def test_a_signed_in_page_read_takes_no_pooled_connection(pg_app):
    """Its key and its page are read on the kept connection: no pool checkout, so no
    BEGIN and no ROLLBACK around the key's read."""
    community = Community(pg_app)
    pg_app.extensions["commentsvc"].page_cache = None  # every request reads the page
    client = pg_app.test_client()
    signed_in = client.get("/api/comments/", headers=community.auth("ann"))  # opens it
    checkouts: list[object] = []

    def checked_out(*_args: object) -> None:
        checkouts.append(_args)

    with pg_app.app_context():
        engine = db.get_engine()
    sa.event.listen(engine, "checkout", checked_out)
    try:
        again = client.get("/api/comments/", headers=community.auth("ann"))
        unknown = client.get("/api/comments/", headers={"Authorization": "Token " + "f" * 40})
    finally:
        sa.event.remove(engine, "checkout", checked_out)
    assert again.get_json() == signed_in.get_json()
    assert {c["id"]: c["can_delete"] for c in again.get_json()["results"]} == {
        103: False, 102: False, 101: False, 100: True}  # ann wrote 100
    assert unknown.status_code == 401
    assert checkouts == []


def test_a_lost_prepared_sign_in_read_switches_to_the_plain_one(pg_app):
    community = Community(pg_app)
    client = pg_app.test_client()
    expected = client.get("/api/comments/", headers=community.auth("ann")).get_json()
    reader_connection_sql(pg_app, f"DEALLOCATE {auth_sql.VIEWER_PREPARED}")
    assert client.get("/api/comments/", headers=community.auth("ann")).get_json() == expected
    with pg_app.app_context():
        assert not reader_for(db.get_engine()).uses_prepared
    assert client.get("/api/comments/", headers=community.auth("ann")).get_json() == expected
    unknown = client.get("/api/comments/", headers={"Authorization": "Token " + "f" * 40})
    assert unknown.status_code == 401


def test_a_connection_lost_while_preparing_keeps_the_prepared_reads(pg_app, sample_records,
                                                                     monkeypatch):
    """Only a server or pooler that refuses PREPARE turns the prepared reads off; a kept
    connection that died while preparing is thrown away and the read made as after any
    lost connection."""
    insert_records(pg_app, sample_records)
    expected = read_site(pg_app)
    with pg_app.app_context():
        reader_for(db.get_engine()).discard()
    monkeypatch.setattr(counters, "PREPARE_PAGE_READS",
                        "SELECT pg_terminate_backend(pg_backend_pid())")
    assert read_site(pg_app) == expected  # answered on a pooled connection
    with pg_app.app_context():
        assert reader_for(db.get_engine()).uses_prepared
    monkeypatch.undo()
    assert read_site(pg_app) == expected
    with pg_app.app_context():
        reader = reader_for(db.get_engine())
        with reader._connection().cursor() as cursor:
            cursor.execute("SELECT name FROM pg_prepared_statements")
            assert listing.LIST_STATE_PREPARED in [row[0] for row in cursor.fetchall()]
