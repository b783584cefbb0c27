"""Reads and posts through the service while an import runs onto its live database.

A fresh database (SQLite in a temporary folder, or one made on the local PostgreSQL
server and dropped afterwards) is seeded through the CLI and served by gunicorn
(gunicorn.conf.py, 2 sync workers) on a free loopback port. Then `flask import` loads a
generated file of new comments onto it while ``--readers`` threads read page 1 of the
site list and one thread posts, each request on a new connection, until the import
ends (at most ``--limit`` seconds). Printed: the import's time, and for reads and posts
their statuses and latencies during the import.

    .venv/bin/python bench/import_live.py --database sqlite|postgresql
        [--comments 20000] [--import-comments 200000] [--readers 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from harness.servers import (  # noqa: E402
    BIN,
    LIST,
    ROOT,
    Gunicorn,
    prepare,
    request,
    scratch_database,
)


def import_file(path: Path, count: int, page_id: int) -> Path:
    """``count`` new comments by one new user on one comic page, ids far above the seed's."""
    with path.open("w", encoding="utf-8") as out:
        out.write(json.dumps({"type": "user", "id": 10**9, "username": "importer",
                              "avatar": None}) + "\n")
        for n in range(count):
            out.write(json.dumps({
                "type": "comment", "id": 10**9 + n, "content_type": "comics.comicpage",
                "object_id": page_id, "parent_id": None, "author_id": 10**9,
                "body": f"Imported comment {n}",
                "date_added": f"2020-01-01T00:00:{n % 60:02d}Z", "is_deleted": False,
                "is_anonymous": False, "is_read": False}) + "\n")
    return path


def latencies(answers: list) -> dict:
    times = sorted(answer.elapsed * 1000 for answer in answers)
    if not times:
        return {"count": 0}
    return {"count": len(times),
            "statuses": dict(Counter(answer.status for answer in answers)),
            "p50_ms": round(times[len(times) // 2], 1),
            "p99_ms": round(times[min(len(times) - 1, int(len(times) * 0.99))], 1),
            "max_ms": round(times[-1], 1)}


def run(database_url: str, folder: Path, args) -> dict:
    community = prepare(database_url, comments=args.comments)
    page_id = next(object_id for kind, object_id in community.targets
                   if kind == "comics.comicpage")
    path = import_file(folder / "import.ndjson", args.import_comments, page_id)
    token = next(iter(community.tokens.values()))
    reads, posts = [], []
    done = threading.Event()

    def reader() -> None:
        while not done.is_set():
            reads.append(request(base, "GET", LIST))

    def poster() -> None:
        while not done.is_set():
            posts.append(request(base, "POST", LIST, {
                "content_type": "comics.comicpage", "object_id": page_id,
                "body": f"posted during the import {uuid.uuid4().hex}"}, token))
            time.sleep(0.05)

    with Gunicorn(database_url) as server:
        base = server.base
        env = {**os.environ, "DATABASE_URL": database_url}
        started = time.monotonic()
        importer = subprocess.Popen(
            [str(BIN / "flask"), "--app", "app", "import", "--workers", "2", str(path)],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        threads = [threading.Thread(target=reader) for _ in range(args.readers)]
        threads.append(threading.Thread(target=poster))
        for thread in threads:
            thread.start()
        try:
            out, err = importer.communicate(timeout=args.limit)
        except subprocess.TimeoutExpired:
            importer.kill()
            out, err = importer.communicate()
        seconds = time.monotonic() - started
        done.set()
        for thread in threads:
            thread.join()
        after = request(base, "POST", LIST, {"content_type": "comics.comicpage",
                                             "object_id": page_id, "body": "after"}, token)
    return {"database": args.database, "seeded_comments": args.comments,
            "imported_comments": args.import_comments, "import_seconds": round(seconds, 1),
            "import_output": (out or err).strip(), "reads": latencies(reads),
            "posts": latencies(posts),
            "posts_retry_after": sorted({p.retry_after for p in posts if p.status == 503}),
            "post_after_import": after.status}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--database", choices=("sqlite", "postgresql"), required=True)
    parser.add_argument("--comments", type=int, default=20_000)
    parser.add_argument("--import-comments", type=int, default=200_000)
    parser.add_argument("--readers", type=int, default=2)
    parser.add_argument("--limit", type=float, default=180)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        if args.database == "sqlite":
            print(json.dumps(run(f"sqlite:///{folder}/live.sqlite3", Path(folder), args),
                             indent=2))
            return
        with scratch_database("commentsvc_import_live") as url:
            print(json.dumps(run(url, Path(folder), args), indent=2))


if __name__ == "__main__":
    main()
