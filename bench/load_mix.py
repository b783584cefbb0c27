"""A mixed load on the service under gunicorn, and the checks that nothing was lost.

Client threads read random pages of random lists (95%) and post comments and replies as
several users (5%), while one more thread soft-deletes and marks read comments posted by
the run, each as a user allowed to. Every answer is recorded. Afterwards every list a
post landed in is walked through the API and compared with SQL: each comment that got a
201 is listed exactly once, in (date_added, id) order, with exact page counts; each post
that got an error left no row; each 204 delete and each mark-read is stored, and a deleted
post keeps its row and place but not its text.

    python bench/load_mix.py --duration 60     # `make soak`: a fresh database, dropped after

The tests import the pieces (``Gunicorn``, ``prepare``, ``Load``, ``verify``) for their
short runs and for the fault tests, which stop the database or restart workers meanwhile.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from commentsvc.storage.database_urls import normalise_url  # noqa: E402

BIN = Path(sys.executable).parent
LIST = "/api/comments/"
PAGE_SIZES = (5, 10, 25)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Gunicorn:
    """The service under gunicorn (gunicorn.conf.py) on a free loopback port; ``args`` are
    more command-line options (they override the file's). Started once its workers run
    and ``ready`` answers 200; with ``ready=None`` once they run and the port accepts
    connections, so the caller's requests are the workers' first."""

    def __init__(self, database_url: str, workers: int = 2, env: dict | None = None,
                 args: tuple[str, ...] = (), ready: str | None = LIST):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        environ = {**os.environ, "DATABASE_URL": database_url,
                   "COMMENTSVC_POST_RATE_LIMIT": "", **(env or {})}
        self.log = tempfile.TemporaryFile()  # the workers' warnings (a 503 logs one)
        self.process = subprocess.Popen(
            [str(BIN / "gunicorn"), "--config", str(ROOT / "gunicorn.conf.py"),
             "--bind", f"127.0.0.1:{self.port}", "--workers", str(workers),
             "--log-level", "warning", *args, "wsgi:app"],
            cwd=ROOT, env=environ, stderr=self.log)
        deadline = time.monotonic() + 30
        while len(self.workers()) < workers or not self._ready(ready):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("gunicorn did not start")
            time.sleep(0.2)

    def _ready(self, path: str | None) -> bool:
        if path is not None:
            return request(self.base, "GET", path).status == 200
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        except OSError:
            return False
        return True

    @property
    def pid(self) -> int:
        return self.process.pid

    def workers(self) -> set[int]:
        """Pids of the master's worker processes now."""
        found = subprocess.run(["ps", "-o", "pid=", "--ppid", str(self.pid)],
                               capture_output=True, text=True).stdout.split()
        return {int(pid) for pid in found}

    def signal(self, signum: int) -> None:
        os.kill(self.pid, signum)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()

    def __enter__(self) -> Gunicorn:
        return self

    def __exit__(self, exc_type, *_exc) -> None:
        if exc_type is not None:  # what the server said, beside the failure
            self.log.seek(0)
            sys.stderr.write(self.log.read().decode("utf-8", "replace")[-20000:])
        self.stop()


@dataclass
class Answer:
    """One request and how it ended: a status, or an error (status 0)."""

    kind: str
    started: float
    elapsed: float
    status: int = 0
    error: str = ""
    content_type: str = ""
    retry_after: str | None = None
    body: bytes = b""

    def json(self):
        return json.loads(self.body)


def request(base: str, method: str, path: str, body: dict | None = None,
            token: str | None = None, kind: str = "", timeout: float = 30) -> Answer:
    """One request on a new connection (Connection: close), never raising."""
    url = urllib.parse.urlsplit(base)
    headers = {"Connection": "close", "Accept": "application/json"}
    payload = None
    if body is not None:
        payload = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    if token:
        headers["Authorization"] = f"Token {token}"
    started = time.monotonic()
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)
    try:
        conn.request(method, path, body=payload, headers=headers)
        response = conn.getresponse()
        data = response.read()
        return Answer(kind or method, started, time.monotonic() - started, response.status,
                      content_type=response.getheader("Content-Type", ""),
                      retry_after=response.getheader("Retry-After"), body=data)
    except (OSError, http.client.HTTPException) as exc:
        return Answer(kind or method, started, time.monotonic() - started,
                      error=f"{type(exc).__name__}: {exc}")
    finally:
        conn.close()


@dataclass
class Community:
    """Who posts: user id -> token; the staff user; the targets posts go to."""

    tokens: dict[int, str]
    staff: int
    targets: list[tuple[str, int]]


def prepare(database_url: str, comments: int = 2000, targets: int = 30,
            posters: int = 4) -> Community:
    """Seed a database through the CLI and sign in ``posters`` users (the first is staff)."""
    env = {**os.environ, "DATABASE_URL": database_url}

    def flask(*args: str) -> str:
        return subprocess.run([str(BIN / "flask"), "--app", "app", *args], cwd=ROOT, env=env,
                              check=True, capture_output=True, text=True).stdout.strip()

    flask("init-db")
    flask("seed", "--comments", str(comments), "--targets", str(targets), "--seed", "7")
    engine = sa.create_engine(normalise_url(database_url))
    try:
        with engine.connect() as conn:
            users = [row[0] for row in conn.execute(sa.text(
                "SELECT id FROM commentsvc_user ORDER BY id LIMIT :n"), {"n": posters})]
            pages = [row[0] for row in conn.execute(sa.text(
                "SELECT id FROM commentsvc_comicpage ORDER BY id LIMIT 5"))]
    finally:
        engine.dispose()
    tokens = {user: flask("create-token", str(user)) for user in users}
    flask("staff", str(users[0]))
    chosen = [("users.user", user) for user in users] + [("comics.comicpage", p) for p in pages]
    return Community(tokens, users[0], chosen)


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


def summary(load: Load, seconds: float, checks: dict) -> dict:
    failures = load.failures()
    return {"seconds": round(seconds, 1), "requests": len(load.answers),
            "requests_per_second": round(len(load.answers) / seconds, 1),
            "by_kind_and_status": {f"{k} {s}": n for (k, s), n in
                                   sorted(load.statuses().items(), key=str)},
            "errors": len(failures), "checks": checks}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=60)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--comments", type=int, default=5000)
    parser.add_argument("--admin-url", default=os.environ.get(
        "SOAK_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres"))
    parser.add_argument("--json", help="also write the summary to this file")
    args = parser.parse_args()

    name = f"commentsvc_soak_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(normalise_url(args.admin_url), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    url = admin.url.set(database=name).render_as_string(hide_password=False)
    try:
        community = prepare(url, comments=args.comments)
        with Gunicorn(url, workers=args.workers) as server:
            started = time.monotonic()
            load = Load(server.base, community, threads=args.threads).run_for(args.duration)
            seconds = time.monotonic() - started
            checks = verify(server.base, url, load)
        result = summary(load, seconds, checks)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n", encoding="utf-8")
    for answer in load.failures()[:10]:
        print("failure:", answer.kind, answer.status, answer.error, answer.body[:200],
              file=sys.stderr)
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
