"""Two service nodes on a real PostgreSQL primary and its streaming replica, with a shared
Redis: reads go to the replica, a writer reads their own writes on any node, a lagging,
cut-off or stopped replica is skipped and used again once it is back, and a write
replaces the shared cached page.

The primary and the replica are private clusters (pg_cluster.py: initdb, then
``pg_basebackup -R``) on free loopback ports; each node is a gunicorn (harness/servers.py)
with DATABASE_URL on the primary and DATABASE_REPLICA_URLS on the replica. Which server
served a read is seen from outside in two ways: with the replica's replay paused, a
comment just written is on the primary only; and both servers log every statement with
the application name of the node that sent it (each node's URLs name it), so a test can
tell which server a node's read went to.

Node B tolerates any lag, so while replay is paused it reads the replica for certain; node
A skips a replica more than a second behind, so a paused replica soon counts as lagging
there. Apart from that the two nodes are configured alike.

Redis is shared with whatever else runs on this machine (another checkout's tests, say):
the module's pages carry a Host of its own, so their tags are its own, it asks Redis only
for the keys of tags it was sent, and it deletes those keys at the end.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from typing import TypeVar

import pytest
import redis
import sqlalchemy as sa
from pg_cluster import PgCluster, skip_reason

from commentsvc.storage.replicas import measure_lag
from commentsvc.storage.shared_page_cache import KEY_PREFIX
from conftest import REDIS_TEST_URL, require_redis
from harness.servers import Gunicorn, prepare, request
from harness.waiting import within

pytestmark = [pytest.mark.replicas,
              pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")]

T = TypeVar("T")
CHECK = 0.2  # seconds between each node's checks of the replica
HOST = f"comments-{uuid.uuid4().hex[:8]}.example"  # what a balancer passes to every node
PAGE = "/api/comments/?content_type=comics.comicpage&object_id={}&page_size=50"
REDIS_URL = REDIS_TEST_URL.rsplit("/", 1)[0] + "/13"
SEEN_TAGS: set[str] = set()  # every ETag the nodes sent: the page keys this module made
# Every statement in the servers' logs, after the application name of its sender.
LOGGED = {"wal_level": "replica", "log_statement": "'all'", "log_line_prefix": "'<%a> '"}
STATEMENT = re.compile(r"^<(\w*)> LOG:  statement: (.*?)(?=^<\w*> |\Z)", re.S | re.M)
# A read of a list (its counter row or its page, plain or as the reader's prepared
# statements) or of one comment.
READ = re.compile(r"FROM commentsvc_list_count WHERE list_key|EXECUTE commentsvc_list_state"
                  r"|EXECUTE commentsvc_(site|kind|target)_page|WHERE c\.id = ")


class Node:
    """One service process and the name its database connections carry."""

    def __init__(self, name: str, server: Gunicorn):
        self.name, self.server = name, server
        self.base = server.base


class Site:
    """The clusters, the nodes and the people who post."""

    def __init__(self, primary: PgCluster, replica: PgCluster, database: str, community,
                 node_a: Node, node_b: Node):
        self.primary, self.replica, self.database = primary, replica, database
        self.servers = {"primary": primary, "replica": replica}
        self.a, self.b = node_a, node_b
        self.page = community.targets[-1][1]  # a comic page
        self.ann, self.bob, self.cyd = list(community.tokens.values())[1:4]  # cyd never posts

    def pause(self) -> None:
        self.replica.query("SELECT pg_wal_replay_pause()")

    def resume(self) -> None:
        self.replica.query("SELECT pg_wal_replay_resume()")

    def caught_up(self) -> None:
        """Wait until the replica has replayed everything the primary has written."""
        self.replica.wait_for_replay(self.primary.current_lsn())

    def post(self, node: Node, token: str, body: str) -> int:
        answer = request(node.base, "POST", "/api/comments/", {
            "content_type": "comics.comicpage", "object_id": self.page, "body": body},
            token=token)
        assert answer.status == 201, answer
        return answer.json()["id"]

    def listed(self, node: Node, token: str | None = None) -> list[int]:
        status, _headers, body = get(node, PAGE.format(self.page), token)
        assert status == 200, body
        return [entry["id"] for entry in json.loads(body)["results"]]

    def served_by(self, node: Node, reading: Callable[[], T]) -> tuple[T, set[str]]:
        """What ``reading()`` returns, and which servers logged a read by ``node`` meanwhile
        (it must not write through ``node``: a writer reads too)."""
        offsets = {name: server.log_offset() for name, server in self.servers.items()}
        result = reading()
        return result, {name for name, server in self.servers.items()
                        if any(app == node.name and READ.search(sql) for app, sql
                               in STATEMENT.findall(server.log_since(offsets[name])))}

    def reads_come_from(self, node: Node, where: str, seconds: float = 30) -> None:
        """Wait until an anonymous read through ``node`` is served by ``where`` (a node
        takes a replica up again, or leaves it, at its next check)."""
        deadline = time.monotonic() + seconds
        while self.served_by(node, lambda: self.listed(node))[1] != {where}:
            assert time.monotonic() < deadline, f"{node.name} never read from the {where}"
            time.sleep(CHECK)


def get(node: Node, path: str, token: str | None = None) -> tuple[int, dict, bytes]:
    headers = {"Host": HOST, "Accept": "application/json", "Connection": "close"}
    if token:
        headers["Authorization"] = f"Token {token}"
    try:
        with urllib.request.urlopen(urllib.request.Request(node.base + path, headers=headers),
                                    timeout=30) as response:
            answer = response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        answer = error.code, dict(error.headers), error.read()
    if "ETag" in answer[1]:
        SEEN_TAGS.add(answer[1]["ETag"])
    return answer


@pytest.fixture(scope="module")
def site():
    require_redis(REDIS_URL, empty=False)
    with PgCluster(settings=LOGGED) as primary:
        database_url = primary.create_database(f"replicated_{uuid.uuid4().hex[:6]}")
        database = database_url.rsplit("/", 1)[1]
        community = prepare(database_url, comments=400, targets=10)
        with PgCluster(standby_of=primary) as replica:
            # Until a replica has replayed a transaction it cannot tell its lag once WAL is
            # waiting (it counts as endlessly behind): let it replay one before the tests.
            primary.query("CREATE TABLE replayed_once (id int)", database=database)
            replica.wait_for_replay(primary.current_lsn())

            def node(name: str, max_lag: int) -> Gunicorn:
                named = f"?application_name={name}"
                return Gunicorn(primary.url(database) + named, workers=1, env={
                    "DATABASE_REPLICA_URLS": replica.url(database) + named,
                    "COMMENTSVC_RESPONSE_CACHE_URL": REDIS_URL,
                    "COMMENTSVC_REPLICA_MAX_LAG_SECONDS": str(max_lag),
                    "COMMENTSVC_REPLICA_CHECK_SECONDS": str(CHECK),
                    "COMMENTSVC_READ_YOUR_WRITES_SECONDS": "120",
                    "COMMENTSVC_DB_CONNECT_TIMEOUT": "2"})

            with node("node_a", max_lag=1) as node_a, node("node_b", max_lag=3600) as node_b:
                made = Site(primary, replica, database, community, Node("node_a", node_a),
                            Node("node_b", node_b))
                made.caught_up()
                made.reads_come_from(made.a, "replica")
                made.reads_come_from(made.b, "replica")
                yield made
    if SEEN_TAGS:
        redis.Redis.from_url(REDIS_URL).delete(*(KEY_PREFIX + tag for tag in SEEN_TAGS))


def test_reads_go_to_the_replica_and_a_writer_reads_their_own_writes(site):
    site.caught_up()
    site.pause()
    try:
        mine = site.post(site.a, site.ann, "posted through node A")
        detail = f"/api/comments/{mine}/"
        # Anonymous readers read the replica, which has not replayed it yet...
        listed, where = site.served_by(site.b, lambda: site.listed(site.b))
        assert mine not in listed and where == {"replica"}
        assert site.served_by(site.b, lambda: get(site.b, detail)[0]) == (404, {"replica"})
        # ...while its author, on the other node too, reads the primary (Redis told B).
        listed, where = site.served_by(site.b, lambda: site.listed(site.b, site.ann))
        assert listed[0] == mine and where == {"primary"}
        assert site.served_by(site.b, lambda: get(site.b, detail, site.ann)[0]) == (
            200, {"primary"})
        assert site.listed(site.a, site.ann)[0] == mine
        # Another signed-in user did not write: the replica serves them.
        listed, where = site.served_by(site.b, lambda: site.listed(site.b, site.cyd))
        assert mine not in listed and where == {"replica"}
    finally:
        site.resume()
    site.caught_up()
    listed, where = site.served_by(site.b, lambda: site.listed(site.b))
    assert listed[0] == mine and where == {"replica"}
    assert site.listed(site.a)[0] == mine


def test_a_lagging_replica_is_skipped_until_it_catches_up(site):
    site.caught_up()
    site.reads_come_from(site.a, "replica")
    site.pause()
    try:
        deadline = time.monotonic() + 30
        while True:  # writes go on, and node A's reads leave the replica once it lags 1 s
            latest = site.post(site.b, site.bob, "written while replay is paused")
            listed, where = site.served_by(site.a, lambda: site.listed(site.a))
            assert where in ({"replica"}, {"primary"})
            if where == {"primary"}:
                break
            assert latest not in listed  # the paused replica's page
            assert time.monotonic() < deadline, "node A never left the lagging replica"
            time.sleep(CHECK)
        assert listed[0] == latest  # the primary's page shows the newest comment
        # Node B tolerates the lag, so it still reads the replica, without the comment.
        listed, where = site.served_by(site.b, lambda: site.listed(site.b))
        assert latest not in listed and where == {"replica"}
    finally:
        site.resume()
    site.caught_up()
    site.reads_come_from(site.a, "replica")
    assert site.listed(site.a)[0] == latest


def test_a_replica_cut_off_from_its_primary_counts_as_behind(site):
    """Without its WAL receiver a replica has replayed all it received, yet cannot know
    what it misses: it counts as behind by the age of its last replayed transaction."""
    engine = sa.create_engine(site.replica.url(site.database))
    conninfo = site.replica.query("SHOW primary_conninfo")[0]
    try:
        site.caught_up()
        assert within(30, lambda: measure_lag(engine) == 0)
        site.replica.query("ALTER SYSTEM SET primary_conninfo = ''")
        site.replica.query("SELECT pg_reload_conf()")
        assert within(30, lambda: not site.replica.query(
            "SELECT EXISTS (SELECT FROM pg_stat_wal_receiver)")[0])
        assert measure_lag(engine) > 0
        site.reads_come_from(site.a, "primary")  # soon over node A's one second
    finally:
        site.replica.query("ALTER SYSTEM SET primary_conninfo = %s", (conninfo,))
        site.replica.query("SELECT pg_reload_conf()")
        engine.dispose()
    site.caught_up()
    site.reads_come_from(site.a, "replica")


def test_a_stopped_replica_is_skipped_and_used_again_when_back(site):
    site.caught_up()
    site.reads_come_from(site.a, "replica")
    site.reads_come_from(site.b, "replica")
    newest = site.listed(site.a)[0]
    paths = [PAGE.format(site.page), f"/api/comments/{newest}/", "/api/comments/?page=2"]
    expected = {path: get(site.a, path)[::2] for path in paths}  # (status, body)
    signed_in = site.listed(site.a, site.cyd)
    site.replica.stop("immediate")
    try:
        # Both nodes still hold connections to the replica: every read that finds it gone
        # runs again on the primary, and no answer is an error or differs.
        for _ in range(3):
            for node in (site.a, site.b):
                for path in paths:
                    assert get(node, path)[::2] == expected[path]
                assert site.listed(node, site.cyd) == signed_in
        written = site.post(site.a, site.bob, "while the replica is down")
        assert site.listed(site.b)[0] == written  # anonymous, so from the primary
        assert get(site.b, f"/api/comments/{written}/")[0] == 200
    finally:
        site.replica.start()
    site.caught_up()
    site.reads_come_from(site.a, "replica")
    site.reads_come_from(site.b, "replica")
    assert site.listed(site.b)[0] == written


def test_a_write_replaces_the_shared_cached_page(site):
    site.caught_up()
    store = redis.Redis.from_url(REDIS_URL)
    path = PAGE.format(site.page).replace("page_size=50", "page_size=7")  # not read before
    status, headers, body = get(site.a, path)
    stored = KEY_PREFIX + headers["ETag"]
    assert status == 200 and store.get(stored) == body
    # Both nodes answer the URL from Redis: marked there, the stored page is what they send.
    store.set(stored, b'{"results": [], "p8n": null, "marked": true}')
    for node in (site.a, site.b):
        status, again, marked = get(node, path)
        assert (status, again["ETag"], json.loads(marked)["marked"]) == (
            200, headers["ETag"], True)
    # A write through node B: node A's next answer on the same URL is the new page.
    new = site.post(site.b, site.bob, "this replaces the cached page")
    site.caught_up()  # anonymous readers read the replica: wait until it has the write
    for node in (site.a, site.b):
        status, fresh_headers, fresh = get(node, path)
        assert status == 200 and fresh_headers["ETag"] != headers["ETag"]
        assert "marked" not in json.loads(fresh)
        assert json.loads(fresh)["results"][0]["id"] == new
        assert store.get(KEY_PREFIX + fresh_headers["ETag"]) == fresh
    # The old page was never deleted, only never asked for again.
    assert json.loads(store.get(stored))["marked"] is True


