"""Lists known unchanged (storage.list_versions): on PostgreSQL a request the fast lane
remembers is answered without reading the list's counter row while no change to the list
can have committed since it was last read, and never shows a list older than a write a
client saw answered."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time

import psycopg2
import pytest
import sqlalchemy as sa

from commentsvc.storage import counters, engine, node_writes, store
from commentsvc.storage.list_versions import ListVersions
from commentsvc.web import current
from conftest import ADMIN_URL, Community
from helpers import calls_of

PAGE = "/api/comments/?content_type=comics.comicpage&object_id=10"
LIST = "/api/comments/"
POST = {"content_type": "comics.comicpage", "object_id": 10}


@pytest.fixture
def reads(monkeypatch) -> list[str]:
    """The lists whose counter row is read from now on."""
    return calls_of(monkeypatch, counters.ListStateReader, "read")


@pytest.fixture
def made(pg_app_factory):
    """Makes apps on the session's PostgreSQL database; their pools closed after."""
    return pg_app_factory


def versions_of(app) -> ListVersions:
    with app.app_context():
        return current.of(app).reads.list_versions(engine.get_engine())


def listening(app, client, url: str = PAGE) -> ListVersions:
    """The app's list versions once its listener listens (asking for ``url`` until then:
    the first asking starts it)."""
    versions = versions_of(app)
    deadline = time.monotonic() + 10
    while not versions.listening:
        assert time.monotonic() < deadline, "the listener never listened"
        assert client.get(url).status_code == 200
        time.sleep(0.02)
    return versions


def remembered(app, client, url: str = PAGE) -> None:
    """``url`` remembered by the fast lane (Flask answered it twice) and its list's state
    read once while the listener listens."""
    client.get(url)
    client.get(url)
    listening(app, client, url)
    client.get(url)


def served(made, trust: str = "3600"):
    """An app with the community loaded, trusting states for ``trust`` seconds, and a
    client whose PAGE the lane remembers, its state read while the listener listens."""
    app = made(COMMENTSVC_LIST_TRUST_SECONDS=trust)
    Community(app)
    client = app.test_client()
    remembered(app, client)
    return app, client


def count_of(client, url: str = PAGE) -> int:
    """How many comments page 1 of ``url`` shows (all of a short list)."""
    return len(client.get(url).get_json()["results"])


def test_a_remembered_page_is_answered_without_reading_the_counter(made, reads):
    app = made()
    Community(app)
    client = app.test_client()
    remembered(app, client)
    first = client.get(PAGE)
    reads.clear()
    answers = [client.get(PAGE) for _ in range(20)]
    assert reads == []
    assert {(a.status_code, a.headers["ETag"], a.data) for a in answers} == {
        (200, first.headers["ETag"], first.data)}
    named = {"If-None-Match": first.headers["ETag"]}
    assert client.get(PAGE, headers=named).status_code == 304  # Flask's, remembered
    reads.clear()
    assert [client.get(PAGE, headers=named).status_code for _ in range(5)] == [304] * 5
    assert reads == []


def test_each_write_answered_is_seen_by_the_next_read(made, reads, postgres_url):
    """Each write changes the machine's shared word before it is answered, so the next
    read cannot use a state read before it, notified or not."""
    app = made(COMMENTSVC_LIST_TRUST_SECONDS="3600")
    community = Community(app)
    client = app.test_client()
    remembered(app, client)
    count = count_of(client)
    word = node_writes.for_url(sa.engine.make_url(postgres_url))
    for n in range(1, 6):
        before = word.value()
        written = client.post(LIST, headers=community.auth("ann"), json={**POST, "body": f"n{n}"})
        assert written.status_code == 201 and word.value() != before
        page = client.get(PAGE).get_json()
        assert len(page["results"]) == count + n
        assert page["results"][0]["id"] == written.get_json()["id"]
    gone = client.delete(f"{LIST}{written.get_json()['id']}/", headers=community.auth("ann"))
    assert gone.status_code == 204
    assert client.get(PAGE).get_json()["results"][0]["is_deleted"] is True


def test_a_write_of_another_process_on_this_machine_is_seen_at_once(made, reads, postgres_url):
    """The writer's process changes the machine's shared word before it answers; this
    one sees it without any notification."""
    app, client = served(made)
    before = node_writes.for_url(sa.engine.make_url(postgres_url)).value()
    subprocess.run([sys.executable, "-c", (
        "import sqlalchemy as sa, sys\n"
        "from commentsvc.storage import node_writes\n"
        "node_writes.for_url(sa.engine.make_url(sys.argv[1])).changed()\n"), postgres_url],
        check=True)
    assert node_writes.for_url(sa.engine.make_url(postgres_url)).value() != before
    reads.clear()
    client.get(PAGE)
    assert reads == ["target:comics.comicpage:10"]


def test_a_write_from_elsewhere_is_heard(made, reads, monkeypatch):
    """A write this machine's shared word does not hear of (another machine's) reaches
    the process as the database's notification, long before the trust runs out."""
    app, client = served(made)
    count = count_of(client)
    monkeypatch.setattr(node_writes.NodeWrites, "changed", lambda self: None)
    with app.app_context(), engine.writing(engine.get_engine()) as conn:
        store.add_comment(conn, store.NewComment("comics.comicpage", 10, 2, "from afar"))
    deadline = time.monotonic() + 5
    while count_of(client) == count:
        assert time.monotonic() < deadline, "the notification never arrived"
        time.sleep(0.01)
    assert client.get(PAGE).get_json()["results"][0]["body"] == "from afar"


def test_the_trigger_notifies_each_changed_list_at_commit(made, postgres_url):
    app = made()
    Community(app)
    listener = psycopg2.connect(sa.engine.make_url(postgres_url).set(
        drivername="postgresql").render_as_string(hide_password=False))
    listener.autocommit = True
    try:
        with listener.cursor() as cursor:
            cursor.execute("LISTEN commentsvc_lists")
        with app.app_context(), engine.writing(engine.get_engine()) as conn:
            store.add_comment(conn, store.NewComment("comics.comicpage", 10, 2, "a"))
            store.add_comment(conn, store.NewComment("comics.comicpage", 10, 2, "b"))
            listener.poll()
            assert listener.notifies == []  # nothing before the commit
        time.sleep(0.2)
        listener.poll()
        assert sorted(n.payload for n in listener.notifies) == [
            "kind:comics.comicpage", "site", "target:comics.comicpage:10"]
        del listener.notifies[:]
        with listener.cursor() as cursor:
            cursor.execute("TRUNCATE commentsvc_list_count")
        time.sleep(0.2)
        listener.poll()
        assert [n.payload for n in listener.notifies] == ["*"]
    finally:
        listener.close()


def test_every_list_may_have_changed_after_a_truncation(made, reads):
    app, client = served(made)
    with app.app_context(), engine.get_engine().begin() as conn:
        conn.exec_driver_sql("TRUNCATE commentsvc_list_count")
    deadline = time.monotonic() + 5
    while count_of(client) != 0:  # the list is empty as its counter row now says
        assert time.monotonic() < deadline, "the truncation was never heard"
        time.sleep(0.01)


def listeners(postgres_url: str) -> list[int]:
    """The server processes of the database's listeners."""
    admin = sa.create_engine(ADMIN_URL)
    try:
        with admin.connect() as conn:
            return list(conn.execute(sa.text(
                "SELECT pid FROM pg_stat_activity WHERE datname = :db"
                " AND application_name = 'commentsvc list changes'"),
                {"db": sa.engine.make_url(postgres_url).database}).scalars())
    finally:
        admin.dispose()


def backend_of_listener(postgres_url: str) -> int:
    [pid] = listeners(postgres_url)
    return pid


def test_while_not_listening_every_answer_reads_the_counter(made, reads, monkeypatch):
    app, client = served(made)
    versions = versions_of(app)
    count = count_of(client)
    monkeypatch.setattr(node_writes.NodeWrites, "changed", lambda self: None)
    monkeypatch.setattr(ListVersions, "_connect", lambda self, stopped: False)  # stays away
    admin = sa.create_engine(ADMIN_URL)
    with admin.connect() as conn:  # the listener's server process killed, as in a restart
        conn.execute(sa.text("SELECT pg_terminate_backend(:pid)"),
                     {"pid": backend_of_listener(app.config["COMMENTSVC_DATABASE_URL"])})
    admin.dispose()
    with app.app_context(), engine.writing(engine.get_engine()) as conn:
        store.add_comment(conn, store.NewComment("comics.comicpage", 10, 2, "meanwhile"))
    assert count_of(client) == count + 1
    assert not versions.listening
    reads.clear()
    for _ in range(3):
        client.get(PAGE)
    assert len(reads) == 3
    monkeypatch.undo()  # the listener may listen again: then the states are used again
    reads = calls_of(monkeypatch, counters.ListStateReader, "read")
    listening(app, client)
    client.get(PAGE)
    reads.clear()
    client.get(PAGE)
    assert reads == []


def test_a_forked_child_listens_on_its_own_and_leaves_the_parents_connection(
        made, reads, postgres_url):
    app, client = served(made)
    versions = versions_of(app)
    parents = backend_of_listener(postgres_url)
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's own work, judged by its exit status
        try:
            listening(app, app.test_client())
            versions.stop()  # as a host's dispose after fork would
            os._exit(0 if not versions.listening else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert versions.listening and parents in listeners(postgres_url)
    reads.clear()
    client.get(PAGE)
    assert reads == []


def test_without_the_triggers_every_answer_reads_the_counter(made, reads, caplog):
    app = made()
    Community(app)
    with app.app_context(), engine.get_engine().begin() as conn:
        conn.exec_driver_sql("ALTER TABLE commentsvc_list_count "
                             "DISABLE TRIGGER commentsvc_list_count_changed")
    client = app.test_client()
    client.get(PAGE)
    with caplog.at_level(logging.WARNING, "commentsvc.storage.list_versions"):
        deadline = time.monotonic() + 3
        while "triggers are missing or disabled" not in caplog.text:
            assert time.monotonic() < deadline
            client.get(PAGE)
            time.sleep(0.02)
    reads.clear()
    for _ in range(5):
        client.get(PAGE)
    assert len(reads) == 5 and not versions_of(app).listening


def test_a_state_is_used_for_the_trust_seconds_at_most(made, reads):
    app, client = served(made, trust="0.3")
    reads.clear()
    client.get(PAGE)
    assert reads == []
    time.sleep(0.4)
    client.get(PAGE)
    client.get(PAGE)
    assert reads == ["target:comics.comicpage:10"]


def test_it_can_be_turned_off_and_sqlite_always_reads(app_factory, database_url, reads):
    on_sqlite = database_url.startswith("sqlite")
    apps = [app_factory(COMMENTSVC_LIST_TRUST_SECONDS="0")]
    Community(apps[0])
    if on_sqlite:
        apps.append(app_factory())
        Community(apps[1])
    for served in apps:
        client = served.test_client()
        for _ in range(3):
            client.get(PAGE)
        reads.clear()
        for _ in range(4):
            client.get(PAGE)
        assert len(reads) == 4
        assert on_sqlite or not versions_of(served).listening


def test_each_change_of_the_shared_word_is_new():
    url = sa.engine.make_url("postgresql://nobody@localhost/commentsvc_no_such_database")
    word = node_writes.for_url(url)
    assert node_writes.for_url(url) is word
    seen = {word.value()}
    for _ in range(100):
        word.changed()
        seen.add(word.value())
    assert len(seen) == 101
    assert node_writes.file_for(url) != node_writes.file_for(url.set(database="other"))
    assert node_writes.file_for(url) == node_writes.file_for(url.set(password="secret"))
    node_writes.file_for(url).unlink()


def test_init_db_creates_missing_triggers_and_leaves_present_ones_be(made):
    app = made()
    present = ("SELECT tgname FROM pg_trigger WHERE tgrelid = "
               "'commentsvc_list_count'::regclass AND NOT tgisinternal ORDER BY 1")
    with app.app_context(), engine.get_engine().begin() as conn:
        conn.exec_driver_sql("DROP TRIGGER commentsvc_list_count_emptied "
                             "ON commentsvc_list_count")
        engine.create_schema(conn)
        assert list(conn.exec_driver_sql(present).scalars()) == [
            "commentsvc_list_count_changed", "commentsvc_list_count_emptied"]
    with app.app_context(), engine.get_engine().begin() as conn:
        engine.create_schema(conn)  # both there: no DDL on the table, so no lock held
        held = conn.exec_driver_sql(
            "SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND relation = "
            "'commentsvc_list_count'::regclass").scalar()
        assert held == 0


def test_a_child_forked_while_the_word_was_being_changed_can_change_it():
    url = sa.engine.make_url("postgresql://nobody@localhost/commentsvc_forked_word")
    word = node_writes.for_url(url)
    word.changed()
    with word._lock:  # another thread was changing it when the process forked
        child = os.fork()
        if child == 0:  # pragma: no cover - judged by its exit status
            signal.alarm(5)  # a lock never let go would hang it: SIGALRM ends it
            word.changed()
            os._exit(0)
    _, status = os.waitpid(child, 0)
    node_writes.file_for(url).unlink()
    assert os.waitstatus_to_exitcode(status) == 0
