"""Posts per second through the service, the number a site's write capacity rests on.

Every write takes the one writers' lock (positions depend on every earlier comment), so
posts queue however many workers there are. On a fresh database of the local PostgreSQL
server (dropped afterwards), seeded through the CLI, under gunicorn (gunicorn.conf.py, 2
sync workers, no posting limit): K client threads post for ``--duration`` seconds each
(K = 1, 2, 4, 8; JSON bodies, random targets, one in four a reply), then 8 threads read
page 1 for as long, in the same run, for the ratio. Every request is a new connection
(as harness/servers.py makes them). Afterwards every 201 is checked stored exactly once.

    .venv/bin/python bench/write_bench.py [--duration 8] [--comments 100000]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from commentsvc.storage.database_urls import normalise_url  # noqa: E402
from harness.servers import LIST, Gunicorn, prepare, request  # noqa: E402

ADMIN_URL = normalise_url("postgresql://postgres@127.0.0.1:5432/postgres")
RESULTS = Path(__file__).resolve().parent / "results" / "writes.json"


def run_clients(threads: int, seconds: float, one_request) -> list[tuple[int, float]]:
    """(status, seconds) of every request ``threads`` clients made in ``seconds``."""
    answers: list[tuple[int, float]] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def client(n: int) -> None:
        rng = random.Random(n)
        while time.monotonic() < deadline:
            answer = one_request(rng)
            with lock:
                answers.append((answer.status, answer.elapsed))

    workers = [threading.Thread(target=client, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return answers


def summary(answers: list[tuple[int, float]], ok: int, seconds: float) -> dict:
    times = sorted(elapsed * 1000 for _, elapsed in answers)
    return {
        "per_second": round(sum(1 for status, _ in answers if status == ok) / seconds, 1),
        "p50_ms": round(statistics.median(times), 2),
        "p99_ms": round(times[int(len(times) * 0.99) - 1], 2),
        "errors": sum(1 for status, _ in answers if status != ok),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=8)
    parser.add_argument("--comments", type=int, default=100_000)
    args = parser.parse_args()
    name = f"commentsvc_bench_writes_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    url = admin.url.set(database=name).render_as_string(hide_password=False)
    marker = uuid.uuid4().hex[:10]
    results: dict = {"comments": args.comments, "duration_s": args.duration, "posts": {}}
    try:
        community = prepare(url, comments=args.comments, targets=100, posters=8)
        tokens = list(community.tokens.values())
        with Gunicorn(url) as server:
            roots: list[tuple[str, int, int]] = []  # posts replies can answer

            def post(rng: random.Random):
                body = {"body": f"{marker} {uuid.uuid4().hex}"}
                if roots and rng.random() < 0.25:
                    body["content_type"], body["object_id"], body["parent"] = rng.choice(roots)
                else:
                    body["content_type"], body["object_id"] = rng.choice(community.targets)
                answer = request(server.base, "POST", LIST, body, token=rng.choice(tokens))
                if answer.status == 201 and "parent" not in body and len(roots) < 1000:
                    roots.append((body["content_type"], body["object_id"], answer.json()["id"]))
                return answer

            created = 0
            for threads in (1, 2, 4, 8):
                answers = run_clients(threads, args.duration, post)
                created += sum(1 for status, _ in answers if status == 201)
                results["posts"][threads] = summary(answers, 201, args.duration)
                print(f"posts, {threads} clients: {results['posts'][threads]}", flush=True)
            reads = run_clients(8, args.duration,
                                lambda _rng: request(server.base, "GET", LIST))
            results["reads_page1_8_clients"] = summary(reads, 200, args.duration)
            print(f"page 1 reads, 8 clients: {results['reads_page1_8_clients']}", flush=True)
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            stored = conn.execute(sa.text(
                "SELECT count(*), count(DISTINCT body) FROM commentsvc_comment "
                "WHERE body LIKE :m"), {"m": marker + " %"}).one()
            results["database_bytes"] = conn.execute(sa.text(
                "SELECT pg_database_size(current_database())")).scalar_one()
        engine.dispose()
        results["posts_201"] = created
        results["stored_once"] = stored[0] == created and stored[1] == created
        print(f"201 answers {created}, stored {stored[0]} ({stored[1]} distinct)")
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    if not results["stored_once"]:
        sys.exit("some 201 posts are not stored exactly once")


if __name__ == "__main__":
    main()
