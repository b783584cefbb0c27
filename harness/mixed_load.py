"""A mixed load on a running service, and the checks that nothing was lost.

Client threads read random pages of random lists (95%) and post comments and replies as
several users (5%), while one more thread soft-deletes and marks read comments posted by
the run, each as a user allowed to. Every answer is recorded. ``verify`` then walks every
list a post landed in through the API and compares it with SQL: each comment that got a
201 is listed exactly once, in (date_added, id) order, with exact page counts; each post
that got an error left no row; each 204 delete and each mark-read is stored, and a deleted
post keeps its row and place but not its text.

The soak (bench/load_mix.py) runs it for a minute; the tests run it for seconds, also
while the database is stopped or workers restart.
"""

from __future__ import annotations

import math
import random
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field

import sqlalchemy as sa

from commentsvc.storage.database_urls import normalise_url
from harness.servers import LIST, Answer, Community, request

PAGE_SIZES = (5, 10, 25)


@dataclass
class Post:
    """A post the load made: its unique marker, where it went, and what it got."""

    marker: str
    author: int
    content_type: str
    object_id: int
    parent: int | None
    answer: Answer
    id: int | None = None


@dataclass
class Load:
    """Client threads and one deleting/marking thread against ``base`` until stopped."""

    base: str
    community: Community
    threads: int = 8
    post_share: float = 0.05
    seed: int = 1
    answers: list[Answer] = field(default_factory=list)
    posts: list[Post] = field(default_factory=list)
    deleted: set[int] = field(default_factory=set)
    marked: set[int] = field(default_factory=set)

    def __post_init__(self):
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._pages: dict[str, int] = {}
        self._run = uuid.uuid4().hex[:8]
        self._count = 0
        self._workers: list[threading.Thread] = []

    def start(self) -> Load:
        for n in range(self.threads):
            self._workers.append(threading.Thread(target=self._client, args=(n,), daemon=True))
        self._workers.append(threading.Thread(target=self._moderator, daemon=True))
        for thread in self._workers:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._workers:
            thread.join(timeout=60)

    def run_for(self, seconds: float) -> Load:
        self.start()
        time.sleep(seconds)
        self.stop()
        return self

    def _record(self, answer: Answer) -> Answer:
        with self._lock:
            self.answers.append(answer)
        return answer

    def _client(self, n: int) -> None:
        rng = random.Random(self.seed * 1000 + n)
        while not self._stop.is_set():
            if rng.random() < self.post_share:
                self._post(rng)
            else:
                self._read(rng)

    def _read(self, rng: random.Random) -> None:
        """A random page of a random list; only pages that existed already are asked for,
        and lists only grow, so anything but 200 is a failure."""
        choice = rng.random()
        if choice < 0.2:
            query = ""
        elif choice < 0.4:
            query = "content_type=" + rng.choice(["users.user", "comics.comicpage"])
        else:
            content_type, object_id = rng.choice(self.community.targets)
            query = f"content_type={content_type}&object_id={object_id}"
        query += ("&" if query else "") + f"page_size={rng.choice(PAGE_SIZES)}"
        known = self._pages.get(query, 1)
        page = rng.randint(1, known)
        answer = self._record(request(self.base, "GET", f"{LIST}?{query}&page={page}",
                                      kind="GET"))
        if answer.status == 200:
            self._pages[query] = max(known, answer.json()["p8n"]["num_pages"])

    def _post(self, rng: random.Random) -> None:
        author = rng.choice(list(self.community.tokens))
        content_type, object_id = rng.choice(self.community.targets)
        parent = None
        with self._lock:
            self._count += 1
            marker = f"load-{self._run}-{self._count}"
            if rng.random() < 0.3:  # a reply, to a post never deleted (id % 3 != 0)
                same = [p.id for p in self.posts[-200:] if p.id and p.id % 3
                        and (p.content_type, p.object_id) == (content_type, object_id)]
                parent = rng.choice(same) if same else None
        body = {"content_type": content_type, "object_id": object_id,
                "body": f"{marker} posted under load", "parent": parent}
        answer = self._record(request(self.base, "POST", LIST, body,
                                      self.community.tokens[author], kind="POST"))
        post = Post(marker, author, content_type, object_id, parent, answer)
        if answer.status == 201:
            post.id = answer.json()["id"]
        with self._lock:
            self.posts.append(post)

    def _moderator(self) -> None:
        """Soft-deletes (by the author) posts whose id is a multiple of 3; marks others read
        (by the profile's user, or staff for a comic page)."""
        rng = random.Random(self.seed)
        while not self._stop.wait(0.02):
            with self._lock:
                todo = [p for p in self.posts if p.id and p.id not in self.deleted | self.marked]
            if not todo:
                continue
            post = rng.choice(todo)
            path = f"{LIST}{post.id}/"
            if post.id % 3 == 0:
                answer = self._record(request(self.base, "DELETE", path, None,
                                              self.community.tokens[post.author], "DELETE"))
                if answer.status == 204:
                    self.deleted.add(post.id)
            else:
                owner = (post.object_id if post.content_type == "users.user"
                         else self.community.staff)
                answer = self._record(request(self.base, "PATCH", path, {"is_read": True},
                                              self.community.tokens[owner], "PATCH"))
                if answer.status == 200:
                    self.marked.add(post.id)

    def statuses(self) -> Counter:
        return Counter((a.kind, a.status or a.error.split(":")[0]) for a in self.answers)

    def failures(self) -> list[Answer]:
        """Answers other than the success each kind expects."""
        expected = {"GET": 200, "POST": 201, "DELETE": 204, "PATCH": 200}
        return [a for a in self.answers if a.status != expected[a.kind]]


def _walk(base: str, query: str) -> tuple[list[dict], int]:
    """Every entry of a list through the API, page by page, and the num_pages it gave."""
    entries, page, num_pages = [], 1, 1
    while page <= num_pages:
        answer = request(base, "GET", f"{LIST}?{query}page_size=100&page={page}")
        if answer.status != 200:
            raise AssertionError(f"walking {query!r} page {page}: {answer.status} "
                                 f"{answer.error or answer.body[:200]!r}")
        body = answer.json()
        entries += body["results"]
        num_pages = body["p8n"]["num_pages"]
        page += 1
    return entries, num_pages


LIST_IDS = sa.text("""
    SELECT id FROM commentsvc_comment
    WHERE (CAST(:ct AS TEXT) IS NULL OR content_type = :ct)
      AND (CAST(:oid AS BIGINT) IS NULL OR object_id = :oid)
    ORDER BY date_added DESC, id DESC
""")


def stop_and_verify(load: Load, base: str, database_url: str, least: int = 100) -> dict:
    """Stop ``load`` and check that it met no failure in more than ``least`` answers,
    then ``verify``; raises AssertionError, else verify's summary."""
    load.stop()
    assert load.failures() == [], load.failures()[:5]
    assert len(load.answers) > least
    return verify(base, database_url, load)


def verify(base: str, database_url: str, load: Load) -> dict:
    """Check that nothing was lost or half-done; raises AssertionError, else a summary."""
    created = {p.id: p for p in load.posts if p.answer.status == 201}
    refused = [p for p in load.posts if p.answer.status != 201]
    checks = Counter()
    engine = sa.create_engine(normalise_url(database_url))
    try:
        with engine.connect() as conn:
            by_id = {r.id: r for r in conn.execute(sa.text(
                "SELECT id, body, is_deleted, is_read FROM commentsvc_comment"))}
            rows = {r.body.split(" ")[0]: r for r in by_id.values()
                    if r.body.startswith("load-")}
            bodies = Counter(r.body.split(" ")[0] for r in by_id.values()
                             if r.body.startswith("load-"))
            for post in created.values():
                stored = by_id.get(post.id)
                if stored is not None and stored.is_deleted:
                    # deleted by the load since (its 204 may have been lost to a fault):
                    # deletion removed its text, so it is found by id
                    assert bodies[post.marker] == 0, f"deleted post {post.marker}: its " \
                                                     f"text is stored {bodies[post.marker]} times"
                    assert stored.body == "", f"deleted post {post.marker} kept its text"
                    checks["201 posts deleted since: stored once, text removed"] += 1
                    continue
                assert bodies[post.marker] == 1, f"201 post {post.marker} stored " \
                                                 f"{bodies[post.marker]} times"
                assert rows[post.marker].id == post.id
                checks["201 posts stored once"] += 1
            for post in refused:
                assert bodies[post.marker] == 0, f"refused post {post.marker} was stored"
                checks["refused posts left no row"] += 1
            for comment_id in load.deleted:
                assert by_id[comment_id].is_deleted
                checks["204 deletes stored"] += 1
            for comment_id in load.marked:
                assert by_id[comment_id].is_read
                checks["mark-reads stored"] += 1
            lists, walked = {("", None, None)}, {}
            for post in created.values():
                lists.add((f"content_type={post.content_type}&", post.content_type, None))
                lists.add((f"content_type={post.content_type}&object_id={post.object_id}&",
                           post.content_type, post.object_id))
            for query, content_type, object_id in sorted(lists, key=str):
                expected = [r[0] for r in conn.execute(LIST_IDS,
                                                       {"ct": content_type, "oid": object_id})]
                entries, num_pages = _walk(base, query)
                listed = [e["id"] for e in entries]
                walked[(content_type, object_id)] = listed
                assert listed == expected, f"list {query!r} differs from SQL order"
                assert num_pages == max(1, math.ceil(len(expected) / 100)), query
                mine = [i for i in listed if i in created]
                assert len(mine) == len(set(mine))
                for entry in entries:
                    if entry["id"] in load.deleted:
                        assert entry["is_deleted"] and entry["body"] == ""
                checks["lists equal to SQL"] += 1
            for post in created.values():
                for key in ((None, None), (post.content_type, None),
                            (post.content_type, post.object_id)):
                    assert walked[key].count(post.id) == 1, f"{post.id} not once in {key}"
                checks["201 comments listed once in each of their 3 lists"] += 1
    finally:
        engine.dispose()
    return dict(checks)
