"""How long one batch of posts holds the writers' lock, and on what, in one process: alone,
and while other threads of the process run Python, as a worker's other requests do.

On a fresh database of the local PostgreSQL server (dropped afterwards), seeded through
the CLI, the service's app writes ``--rounds`` batches of ``--posts`` posts each through
its batch writer (web.write_batches.write, as the leader of a batch does), for each
number of busy threads in ``--busy``. A busy thread runs pure Python for 0.5 ms, then
sleeps 0.5 ms, over and over. Reported, as medians in milliseconds: the time the lock
was held (as /metrics times it), and its parts: from the lock to the facts read
(``facts``), the batch's Python up to its rows' statement (``python``), the rows'
statement (``rows``) and the commit (``commit``).

    .venv/bin/python bench/lock_hold.py [--posts 3] [--rounds 300] [--busy 0,3]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.write_bench import ADMIN_URL  # noqa: E402
from harness.servers import prepare, scratch_database  # noqa: E402

PARTS = ("facts", "python", "rows", "commit")


@contextmanager
def timed_parts(app: Any) -> Iterator[list[dict[str, float]]]:
    """Each batch written meanwhile: the moments it took the lock, had its facts, sent its
    rows, had them written and ended (``PARTS`` apart). Wraps the functions the batch
    calls, and the app's writers' lock observer, for the block."""
    from commentsvc.storage import bulk_lock, engine, posting, prepared
    from commentsvc.storage.queries.posting import WRITE_BATCH

    batches: list[dict[str, float]] = []
    current: dict[str, float] = {}
    originals = (bulk_lock.take_postgresql, posting.read_facts, prepared.run)

    def take(*args: Any, **kwargs: Any) -> Any:
        result = originals[0](*args, **kwargs)
        current.clear()
        current["locked"] = time.perf_counter()
        return result

    def facts(*args: Any, **kwargs: Any) -> Any:
        result = originals[1](*args, **kwargs)
        current["facts"] = time.perf_counter()
        return result

    def run(conn: Any, statement: Any, params: Any) -> Any:
        if statement.name == WRITE_BATCH.name:
            current["python"] = time.perf_counter()
        result = originals[2](conn, statement, params)
        if statement.name == WRITE_BATCH.name:
            current["rows"] = time.perf_counter()
        return result

    def observe(_waited: float, held: float) -> None:
        current["commit"] = time.perf_counter()
        current["held"] = held
        batches.append(dict(current))

    bulk_lock.take_postgresql, posting.read_facts, prepared.run = take, facts, run
    kept = app.extensions.get(engine.WRITERS_LOCK_OBSERVER)
    app.extensions[engine.WRITERS_LOCK_OBSERVER] = observe
    try:
        yield batches
    finally:
        bulk_lock.take_postgresql, posting.read_facts, prepared.run = originals
        app.extensions[engine.WRITERS_LOCK_OBSERVER] = kept


def summary(batches: list[dict[str, float]]) -> dict[str, float]:
    """Median milliseconds held, and of each part, over the batches that had every part."""
    whole = [b for b in batches if all(key in b for key in ("locked", *PARTS))]
    result = {"held": round(statistics.median(b["held"] for b in whole) * 1000, 3)}
    for before, part in itertools.pairwise(("locked", *PARTS)):
        result[part] = round(statistics.median(b[part] - b[before] for b in whole) * 1000, 3)
    return result


@contextmanager
def busy_threads(count: int, work_s: float = 0.0005, rest_s: float = 0.0005
                 ) -> Iterator[None]:
    """``count`` threads each running Python for ``work_s``, then sleeping ``rest_s``."""
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            until = time.perf_counter() + work_s
            while time.perf_counter() < until:
                sum(range(100))
            time.sleep(rest_s)

    threads = [threading.Thread(target=spin, daemon=True, name="lock-hold-busy")
               for _ in range(count)]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join()


def measure(app: Any, posts: int, rounds: int, busy: list[int],
            seed: int = 7) -> dict[str, dict[str, float]]:
    """For each number of busy threads, ``rounds`` batches of ``posts`` posts on random
    comic pages by random users of the app's database; ``summary`` of each (after 10
    batches to warm up)."""
    from commentsvc.storage import engine
    from commentsvc.web import auth, current, write_batches

    rng = random.Random(seed)
    results: dict[str, dict[str, float]] = {}
    with app.test_request_context("/api/comments/"):
        with engine.get_engine().connect() as conn:
            users = [row[0] for row in conn.execute(sa.text(
                "SELECT id FROM commentsvc_user ORDER BY id LIMIT 50"))]
            pages = [row[0] for row in conn.execute(sa.text(
                "SELECT id FROM commentsvc_comicpage ORDER BY id LIMIT 50"))]
        service = current.service()

        def batch() -> list[write_batches.Item]:
            return [write_batches.PostRequest(
                auth.Viewer(rng.choice(users)),
                {"content_type": "comics.comicpage", "object_id": rng.choice(pages),
                 "body": f"lock hold {rng.random()}", "parent": None, "is_anonymous": False},
                None, lambda comment_id: f"/api/comments/{comment_id}/")
                for _ in range(posts)]

        def write(count: int) -> None:
            for _ in range(count):
                items = batch()
                outcomes = write_batches.write(service, lambda items=items: items)
                refused = [o for o in outcomes if not isinstance(o, write_batches.Posted)]
                if refused:
                    raise SystemExit(f"a post was refused: {refused[0]!r}")

        for threads in busy:
            with busy_threads(threads), timed_parts(app) as batches:
                write(10)
                batches.clear()
                write(rounds)
                results[str(threads)] = summary(batches)
            print(f"  {threads} busy threads: {results[str(threads)]}", flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posts", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--busy", default="0,3")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    busy = [int(n) for n in args.busy.split(",")]
    admin = sa.create_engine(ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        with scratch_database("commentsvc_bench_writes", admin) as url:
            prepare(url, comments=20_000, targets=100)
            os.environ["DATABASE_URL"] = url
            os.environ["COMMENTSVC_POST_RATE_LIMIT"] = ""
            from app import create_app

            report = {"posts": args.posts, "rounds": args.rounds,
                      "busy": measure(create_app(), args.posts, args.rounds, busy)}
    finally:
        admin.dispose()
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()

