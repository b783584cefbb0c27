"""Two service nodes on a real PostgreSQL primary and its streaming replica, with a shared
Redis: reads go to the replica, a writer reads their own writes on any node, a lagging or
stopped replica is skipped and used again once it is back, and a write replaces the
shared cached page.

The primary and the replica are private clusters (pg_cluster.py: initdb, then
``pg_basebackup -R``) on free loopback ports; each node is a gunicorn (bench/load_mix.py)
with DATABASE_URL on the primary and DATABASE_REPLICA_URLS on the replica. Whether a read
was served by the replica is seen from outside: with the replica's replay paused, a
comment just written is on the primary only.
"""

from __future__ import annotations

import json
import time
import urllib.request
import uuid

import psycopg2
import pytest
import redis
from pg_cluster import PgCluster, skip_reason

from bench.load_mix import Gunicorn, prepare, request
from commentsvc.shared_cache import KEY_PREFIX
from conftest import REDIS_TEST_URL, require_redis

pytestmark = pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")

MAX_LAG = 4
CHECK = 1
HOST = "comments.example"  # what a balancer would pass on to every node
PAGE = "/api/comments/?content_type=comics.comicpage&object_id={}&page_size=50"
REDIS_URL = REDIS_TEST_URL.rsplit("/", 1)[0] + "/13"


class Site:
    """The clusters, the nodes and the people who post."""

    def __init__(self, primary: PgCluster, replica: PgCluster, database: str, community,
                 node_a: Gunicorn, node_b: Gunicorn):
        self.primary, self.replica, self.database = primary, replica, database
        self.community, self.a, self.b = community, node_a, node_b
        self.page = community.targets[-1][1]  # a comic page
        ann, bob = list(community.tokens.values())[1:3]
        self.ann, self.bob = ann, bob

    def replica_sql(self, query: str):
        with psycopg2.connect(self.replica.url(self.database)) as conn:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(query)
                return cur.fetchone()

    def pause(self) -> None:
        self.replica_sql("SELECT pg_wal_replay_pause()")

    def resume(self) -> None:
        self.replica_sql("SELECT pg_wal_replay_resume()")

    def caught_up(self) -> None:
        """Wait until the replica has replayed everything the primary has written."""
        with psycopg2.connect(self.primary.url(self.database)) as conn, conn.cursor() as cur:
            cur.execute("SELECT pg_current_wal_lsn()::text")
            [lsn] = cur.fetchone()
        deadline = time.monotonic() + 30
        while not self.replica_sql(f"SELECT pg_last_wal_replay_lsn() >= '{lsn}'::pg_lsn")[0]:
            assert time.monotonic() < deadline, "the replica did not catch up"
            time.sleep(0.05)

    def post(self, node: Gunicorn, token: str, body: str) -> int:
        answer = request(node.base, "POST", "/api/comments/", {
            "content_type": "comics.comicpage", "object_id": self.page, "body": body},
            token=token)
        assert answer.status == 201, answer
        return answer.json()["id"]

    def listed(self, node: Gunicorn, token: str | None = None) -> list[int]:
        status, _headers, body = get(node, PAGE.format(self.page), token)
        assert status == 200, body
        return [entry["id"] for entry in json.loads(body)["results"]]

    def reads_come_from_the_replica(self, node: Gunicorn) -> bool:
        """Write while replay is paused: an anonymous read that misses it read the replica."""
        self.post(self.a, self.bob, "while caught up")
        self.caught_up()
        time.sleep(CHECK + 0.5)  # a check has seen the replica caught up
        self.pause()
        try:
            marker = self.post(self.a, self.bob, "primary only, for now")
            return marker not in self.listed(node)
        finally:
            self.resume()
            self.caught_up()


def get(node: Gunicorn, path: str, token: str | None = None) -> tuple[int, dict, bytes]:
    headers = {"Host": HOST, "Accept": "application/json", "Connection": "close"}
    if token:
        headers["Authorization"] = f"Token {token}"
    try:
        with urllib.request.urlopen(urllib.request.Request(node.base + path, headers=headers),
                                    timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


@pytest.fixture(scope="module")
def site():
    require_redis(REDIS_URL)
    with PgCluster() as primary:
        database_url = primary.create_database(f"replicated_{uuid.uuid4().hex[:6]}")
        community = prepare(database_url, comments=400, targets=10)
        with PgCluster(standby_of=primary) as replica:
            database = database_url.rsplit("/", 1)[1]
            env = {"DATABASE_REPLICA_URLS": replica.url(database),
                   "COMMENTSVC_RESPONSE_CACHE_URL": REDIS_URL,
                   "COMMENTSVC_REPLICA_MAX_LAG_SECONDS": str(MAX_LAG),
                   "COMMENTSVC_REPLICA_CHECK_SECONDS": str(CHECK),
                   "COMMENTSVC_READ_YOUR_WRITES_SECONDS": "60",
                   "COMMENTSVC_DB_CONNECT_TIMEOUT": "2"}
            with Gunicorn(database_url, workers=1, env=env) as node_a, \
                    Gunicorn(database_url, workers=1, env=env) as node_b:
                made = Site(primary, replica, database, community, node_a, node_b)
                made.caught_up()
                time.sleep(CHECK + 0.5)  # each node's first check has found the replica
                yield made
    redis.Redis.from_url(REDIS_URL).flushdb()


def test_reads_go_to_the_replica_and_a_writer_reads_their_own_writes(site):
    site.caught_up()
    site.pause()
    try:
        mine = site.post(site.a, site.ann, "posted through node A")
        # Anonymous readers read the replica, which has not replayed it yet...
        assert mine not in site.listed(site.b)
        assert get(site.b, f"/api/comments/{mine}/")[0] == 404
        # ...while its author, on the other node too, reads the primary.
        assert site.listed(site.b, site.ann)[0] == mine
        assert get(site.b, f"/api/comments/{mine}/", site.ann)[0] == 200
        assert site.listed(site.a, site.ann)[0] == mine
    finally:
        site.resume()
    site.caught_up()
    assert site.listed(site.b)[0] == mine
    assert site.listed(site.a)[0] == mine


def test_a_lagging_replica_is_skipped_until_it_catches_up(site):
    site.caught_up()
    site.pause()
    try:
        late = site.post(site.a, site.bob, "the replica will fall behind this one")
        deadline = time.monotonic() + MAX_LAG + 3 * CHECK + 10
        for node in (site.b, site.a):  # each node's own check finds the lag over the limit
            while late not in site.listed(node):
                assert time.monotonic() < deadline, "reads never left the lagging replica"
                time.sleep(0.2)
        # Still paused, so these reads came from the primary.
        assert not site.replica_sql("SELECT pg_last_wal_replay_lsn() >= "
                                    "pg_last_wal_receive_lsn()")[0]
    finally:
        site.resume()
    site.caught_up()
    assert site.reads_come_from_the_replica(site.b)


def test_a_stopped_replica_is_skipped_and_used_again_when_back(site):
    site.caught_up()
    site.replica.stop("immediate")
    try:
        statuses = [get(node, PAGE.format(site.page))[0] for node in (site.a, site.b) * 10]
        assert statuses == [200] * 20
        written = site.post(site.a, site.bob, "while the replica is down")
        assert site.listed(site.b)[0] == written  # anonymous, so from the primary
        assert get(site.b, f"/api/comments/{written}/")[0] == 200
    finally:
        site.replica.start()
    site.caught_up()
    time.sleep(CHECK + 0.5)
    assert site.reads_come_from_the_replica(site.b)
    assert site.reads_come_from_the_replica(site.a)


def test_a_write_replaces_the_shared_cached_page(site):
    site.caught_up()
    store = redis.Redis.from_url(REDIS_URL)
    path = PAGE.format(site.page)
    keys_before = set(store.keys(KEY_PREFIX + "*"))
    status, headers, body = get(site.a, path)
    [stored] = set(store.keys(KEY_PREFIX + "*")) - keys_before
    assert stored == (KEY_PREFIX + headers["ETag"]).encode()
    # Node B answers the same URL with node A's stored page (marked here to prove it).
    store.set(stored, b'{"results": [], "p8n": null, "marked": true}')
    assert json.loads(get(site.b, path)[2])["marked"] is True
    store.set(stored, body)
    new = site.post(site.b, site.bob, "this replaces the cached page")
    site.caught_up()
    status, fresh_headers, fresh = get(site.a, path)
    assert status == 200 and fresh_headers["ETag"] != headers["ETag"]
    assert json.loads(fresh)["results"][0]["id"] == new
    assert json.loads(get(site.b, path)[2])["results"][0]["id"] == new
