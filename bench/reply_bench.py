"""A root comment with 10,000 replies: its page with every reply embedded, and capped.

Replies are listed on their own too, so a cap on the replies embedded under each root
hides nothing; it bounds the size and the cost of the page that holds such a root. This
loads a small demo site plus one such thread into the given (scratch) database, then
times page 1 in-process with the cap off (the default) and at 20, response cache off.

    DATABASE_URL=postgresql://.../scratch python bench/reply_bench.py [--json FILE]

It drops and recreates the service's tables in that database: never point it at data.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app import create_app  # noqa: E402
from commentsvc.interchange import ndjson
from commentsvc.operations import demo
from commentsvc.storage import engine  # noqa: E402

REPLIES = 10_000
RUNS = 30


def thread_lines(replies: int) -> list[str]:
    """One user, one comic page, one root and ``replies`` replies to it, as NDJSON."""
    lines = [
        {"type": "user", "id": 900_000_001, "username": "prolific", "avatar": None},
        {"type": "comicpage", "id": 900_000_001, "title": "The page everyone answered"},
    ]
    common = {"type": "comment", "content_type": "comics.comicpage",
              "object_id": 900_000_001, "author_id": 900_000_001, "is_deleted": False,
              "is_anonymous": False, "is_read": False}
    lines.append({**common, "id": 900_000_001, "parent_id": None, "body": "Start here.",
                  "date_added": "2026-06-01T00:00:00Z"})
    for k in range(1, replies + 1):
        minute, second = divmod(k, 60)
        hour, minute = divmod(minute, 60)
        lines.append({**common, "id": 900_000_001 + k, "parent_id": 900_000_001,
                      "body": f"Reply number {k}.",
                      "date_added": f"2026-06-01T{hour:02d}:{minute:02d}:{second:02d}Z"})
    return [json.dumps(line) for line in lines]


def timed_page(app, runs: int) -> dict:
    client = app.test_client()
    # Newest first, the replies fill the first pages; the root and its thread are last.
    url = "/api/comments/?content_type=comics.comicpage&object_id=900000001&page=last"
    body = client.get(url).get_data()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200
    return {"body_bytes": len(body),
            "embedded_replies": sum(len(c.get("replies") or [])
                                    for c in json.loads(body)["results"]),
            "median_ms": round(statistics.median(times), 2),
            "p90_ms": round(sorted(times)[int(runs * 0.9) - 1], 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replies", type=int, default=REPLIES)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL")
    if not url:
        print("set DATABASE_URL to a scratch database", file=sys.stderr)
        return 2
    setup = create_app({"COMMENTSVC_DATABASE_URL": url})
    with setup.app_context(), engine.get_engine().begin() as conn:
        engine.drop_schema(conn)
        engine.create_schema(conn)
        demo.seed(conn, comments=2000, targets=10, seed=1, progress=False)
        ndjson.load(conn, thread_lines(args.replies))
    results = {}
    for cap in (0, 20):
        app = create_app({"COMMENTSVC_DATABASE_URL": url, "COMMENTSVC_MAX_EMBEDDED_REPLIES": cap,
                          "COMMENTSVC_RESPONSE_CACHE_MB": 0})
        results[f"cap {cap or 'off (default)'}"] = timed_page(app, RUNS)
    report = {"replies": args.replies, "runs": RUNS, "cases": results}
    for name, case in results.items():
        print(f"{name:<16} {case['embedded_replies']:>6} replies embedded, "
              f"{case['body_bytes']:>9} bytes, median {case['median_ms']:>8.2f} ms, "
              f"p90 {case['p90_ms']:>8.2f} ms")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
