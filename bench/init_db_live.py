"""Posts through the service while `flask init-db` runs on its live database (PostgreSQL).

A database made on the local PostgreSQL server (dropped afterwards) is seeded through the
CLI and served by gunicorn (gunicorn.conf.py, 2 workers) on a free loopback port. Then
``--clients`` threads post new comments, each request on a new connection, and after
``--lead`` seconds `flask init-db` runs; the posts go on for ``--tail`` seconds after it
has ended. With ``--old-index`` the database is first given the replies index of the
versions before it held replies only, so that init-db replaces it. Printed: init-db's time
and output, and the statuses and latencies of the posts sent while it ran and of all.

    .venv/bin/python bench/init_db_live.py [--comments 200000] [--clients 4] [--old-index]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.import_live import latencies  # noqa: E402
from harness.servers import (  # noqa: E402
    BIN,
    LIST,
    ROOT,
    Gunicorn,
    prepare,
    request,
    scratch_database,
)

# The replies index as the versions before DECISIONS.md 11 made it: every comment.
OLD_INDEX = ("DROP INDEX commentsvc_comment_reply_threads",
             "CREATE INDEX commentsvc_comment_replies "
             "ON commentsvc_comment (parent_id, date_added, id)")


def run(database_url: str, args: argparse.Namespace) -> dict:
    community = prepare(database_url, comments=args.comments, targets=args.targets)
    if args.old_index:
        engine = sa.create_engine(database_url)
        with engine.begin() as conn:
            for statement in OLD_INDEX:
                conn.exec_driver_sql(statement)
        engine.dispose()
    page_id = next(object_id for kind, object_id in community.targets
                   if kind == "comics.comicpage")
    tokens = list(community.tokens.values())
    posts = []
    done = threading.Event()

    def poster(token: str) -> None:
        while not done.is_set():
            posts.append(request(base, "POST", LIST, {
                "content_type": "comics.comicpage", "object_id": page_id,
                "body": f"posted during init-db {uuid.uuid4().hex}"}, token))

    with Gunicorn(database_url) as server:
        base = server.base
        threads = [threading.Thread(target=poster, args=(tokens[n % len(tokens)],))
                   for n in range(args.clients)]
        for thread in threads:
            thread.start()
        time.sleep(args.lead)
        started = time.monotonic()
        init_db = subprocess.run(
            [str(BIN / "flask"), "--app", "app", "init-db"], cwd=ROOT,
            env={**os.environ, "DATABASE_URL": database_url}, capture_output=True, text=True,
            timeout=args.limit)
        ended = time.monotonic()
        time.sleep(args.tail)
        done.set()
        for thread in threads:
            thread.join()
    meanwhile = [p for p in posts if p.started < ended and p.started + p.elapsed > started]
    return {"seeded_comments": args.comments, "clients": args.clients,
            "old_index": args.old_index, "init_db_seconds": round(ended - started, 2),
            "init_db_exit": init_db.returncode,
            "init_db_output": (init_db.stdout + init_db.stderr).strip(),
            "posts_during_init_db": latencies(meanwhile), "posts": latencies(posts)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--comments", type=int, default=200_000)
    parser.add_argument("--targets", type=int, default=500)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--lead", type=float, default=2, help="seconds of posts before")
    parser.add_argument("--tail", type=float, default=2, help="seconds of posts after")
    parser.add_argument("--limit", type=float, default=600, help="most seconds for init-db")
    parser.add_argument("--old-index", action="store_true",
                        help="give the database the older replies index to replace first")
    args = parser.parse_args()
    with scratch_database("commentsvc_init_db_live") as url:
        print(json.dumps(run(url, args), indent=2))


if __name__ == "__main__":
    main()
