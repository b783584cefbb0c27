"""The SQL behind one page request, at any depth of the biggest lists.

For the whole site's list, the biggest content type's list and the biggest target's list,
and for pages 1, 10, 100, 1,000, 10,000, 50,000, 100,000 and the last (where the list has
them), this runs the very statement the service runs for a page (the one-statement page
read, prepared, as storage.counters runs it) and reports the median of several runs: the
server's execution time under EXPLAIN ANALYZE, and the round trip as the client sees it
(send, execute, fetch every row). The
baselines show what the usual ways cost on the same data: COUNT(*), ORDER BY ... OFFSET
and count(*) OVER () beside the slice.

Random pages: ``--random N`` (default 300) pages of the whole site's list drawn with a fixed
seed, each read once, as the long tail reads them: the medians of server time and of
blocks read from outside PostgreSQL's shared buffers, and the blocks the reads dirtied (a
freshly loaded table's pages are dirtied by their first reader until a vacuum has passed).
``--prewarm`` reads the database into memory first, as bench/http_bench.py does.

    DATABASE_URL=postgresql://... python bench/sql_bench.py [--json FILE]

Nothing is written to the database (but the pg_prewarm extension, with ``--prewarm``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.http_bench import prewarm  # noqa: E402
from commentsvc.rules import pagination  # noqa: E402
from commentsvc.rules.comment_lists import CommentList  # noqa: E402
from commentsvc.settings import Settings  # noqa: E402
from commentsvc.storage.counters import PageRead  # noqa: E402
from commentsvc.storage.database_urls import normalise_url  # noqa: E402
from commentsvc.storage.queries import listing  # noqa: E402

DEFAULTS = Settings.from_config({})

PAGE_SIZE = 20
PAGES = ("1", "10", "100", "1000", "10000", "50000", "100000", "last")
RUNS = 7

BIGGEST_KIND = sa.text("""
    SELECT substr(list_key, 6) FROM commentsvc_list_count
    WHERE list_key LIKE 'kind:%' ORDER BY n DESC, list_key LIMIT 1
""")
BIGGEST_TARGET = sa.text("""
    SELECT list_key FROM commentsvc_list_count
    WHERE list_key LIKE 'target:%' ORDER BY n DESC, list_key LIMIT 1
""")

# The usual ways, on the whole site's list, for comparison.
BASELINE_COUNT = "SELECT COUNT(*) FROM commentsvc_comment"
BASELINE_OFFSET = """
    SELECT c.id, c.parent_id, u.username, u.avatar, c.body, c.date_added,
           c.is_deleted, c.is_anonymous, c.is_read
    FROM commentsvc_comment AS c JOIN commentsvc_user AS u ON u.id = c.author_id
    ORDER BY c.site_pos DESC LIMIT {limit} OFFSET {offset}
"""
BASELINE_COUNT_OVER = """
    SELECT * FROM (
        SELECT c.id, c.body, c.date_added, COUNT(*) OVER () AS total
        FROM commentsvc_comment AS c ORDER BY c.site_pos DESC
    ) AS counted LIMIT {limit} OFFSET {offset}
"""


def analysed(conn: Connection, sql: str, values: Any = None, buffers: bool = False) -> dict:
    """One statement's EXPLAIN ANALYZE report (with BUFFERS: its blocks too), as JSON."""
    options = "ANALYZE, BUFFERS, FORMAT JSON" if buffers else "ANALYZE, FORMAT JSON"
    plan = conn.exec_driver_sql(f"EXPLAIN ({options}) " + sql, values).scalar_one()
    found: dict = (json.loads(plan) if isinstance(plan, str) else plan)[0]
    return found


def explain(conn: Connection, sql: str, values: Any = None) -> tuple[float, float]:
    """(planning ms, execution ms) of one statement as EXPLAIN ANALYZE reports them."""
    plan = analysed(conn, sql, values)
    return plan["Planning Time"], plan["Execution Time"]


def median_of(conn: Connection, sql: str, values: Any = None,
              runs: int = RUNS) -> tuple[float, float]:
    timings = [explain(conn, sql, values) for _ in range(runs)]
    return (statistics.median(t[0] for t in timings),
            statistics.median(t[1] for t in timings))


def page_read(comments: CommentList, page: int, display: str) -> PageRead:
    """The service's page read of ``comments`` (page 0: the last), default settings."""
    kind = "site" if comments.content_type is None else (
        "kind" if comments.object_id is None else "target")
    return PageRead(kind, comments.key, page, PAGE_SIZE, DEFAULTS.max_embedded_replies,
                    display, comments.content_type, comments.object_id)


def page_case(conn: Connection, comments: CommentList, page_name: str) -> dict | None:
    """Server and round-trip times of the one statement of a page request."""
    count = conn.exec_driver_sql("SELECT n FROM commentsvc_list_count WHERE list_key = %s",
                                 (comments.key,)).scalar_one()
    pages = pagination.num_pages(count, PAGE_SIZE)
    page = pages if page_name == "last" else int(page_name)
    if page > pages:
        return None
    read = page_read(comments, 0 if page_name == "last" else page, DEFAULTS.render_display)
    execute = listing.EXECUTE_PAGE_READ[read.kind]
    cursor = conn.connection.dbapi_connection.cursor()
    cursor.execute(execute, read.values())
    rows = cursor.fetchall()
    planning, execution = median_of(conn, execute, read.values())
    trips = []
    for _ in range(RUNS * 3):
        started = time.perf_counter()
        cursor.execute(execute, read.values())
        cursor.fetchall()
        trips.append((time.perf_counter() - started) * 1000)
    entries = [row for row in rows if row[2] is not None]
    return {
        "list": comments.key, "page": page_name, "page_number": page,
        "rows": sum(1 for row in entries if row[2] == 1),
        "replies": sum(1 for row in entries if row[2] == 2),
        "stored_renders_used": sum(1 for row in entries if row[7] is not None),
        "planning_ms": round(planning, 3), "execution_ms": round(execution, 3),
        "round_trip_ms": round(statistics.median(trips), 3),
    }


def random_pages(conn: Connection, count: int, pages: int, seed: int = 7) -> dict:
    """Server time, blocks read and blocks dirtied of ``pages`` random pages of the whole
    site's list, each read once (EXPLAIN ANALYZE with BUFFERS of the service's statement)."""
    rng = random.Random(seed)
    last = pagination.num_pages(count, PAGE_SIZE)
    execute = listing.EXECUTE_PAGE_READ["site"]
    times, reads, dirtied = [], [], 0
    for _ in range(pages):
        read = page_read(CommentList(), rng.randint(1, last), DEFAULTS.render_display)
        plan = analysed(conn, execute, read.values(), buffers=True)
        times.append(plan["Execution Time"])
        reads.append(plan["Plan"]["Shared Read Blocks"])
        dirtied += plan["Plan"]["Shared Dirtied Blocks"]
    return {"pages": pages, "execution_ms_median": round(statistics.median(times), 3),
            "execution_ms_p90": round(sorted(times)[int(len(times) * 0.9)], 3),
            "blocks_read_median": statistics.median(reads), "blocks_dirtied": dirtied}


def baselines(conn: Connection, count: int, slow_runs: int) -> list[dict]:
    """The usual ways on the whole site's list (slow ones run fewer times)."""
    results = []
    planning, execution = median_of(conn, BASELINE_COUNT, runs=slow_runs)
    results.append({"way": "COUNT(*) of the whole list", "page": "-",
                    "execution_ms": round(execution, 2)})
    pages = pagination.num_pages(count, PAGE_SIZE)
    for name in PAGES:
        page = pages if name == "last" else int(name)
        if page > pages:
            continue
        offset = (page - 1) * PAGE_SIZE
        sql = BASELINE_OFFSET.format(limit=PAGE_SIZE, offset=offset)
        planning, execution = median_of(conn, sql, runs=slow_runs)
        results.append({"way": "ORDER BY ... LIMIT/OFFSET", "page": name,
                        "execution_ms": round(execution, 2)})
    for name in ("1", "last"):
        page = pages if name == "last" else int(name)
        sql = BASELINE_COUNT_OVER.format(limit=PAGE_SIZE, offset=(page - 1) * PAGE_SIZE)
        planning, execution = median_of(conn, sql, runs=1)
        results.append({"way": "count(*) OVER () beside the slice", "page": name,
                        "execution_ms": round(execution, 2)})
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--no-baselines", action="store_true",
                        help="skip COUNT(*), OFFSET and count(*) OVER () (slow on big data)")
    parser.add_argument("--baseline-runs", type=int, default=3)
    parser.add_argument("--random", type=int, default=300,
                        help="random pages of the whole site's list, each read once")
    parser.add_argument("--random-seed", type=int, default=7,
                        help="which random pages (a page read twice is no longer fresh)")
    parser.add_argument("--prewarm", action="store_true",
                        help="read the database's tables and indexes into memory first")
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgresql"):
        print("set DATABASE_URL to a PostgreSQL database", file=sys.stderr)
        return 2
    if args.prewarm:
        prewarm(url)
    engine = sa.create_engine(normalise_url(url), isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.exec_driver_sql(listing.PREPARE_PAGE_READS)
        kind = conn.execute(BIGGEST_KIND).scalar_one()
        _, target_type, target_id = conn.execute(BIGGEST_TARGET).scalar_one().rsplit(":", 2)
        lists = [CommentList(), CommentList(kind), CommentList(target_type, int(target_id))]
        sizes = {c.key: conn.execute(listing.LIST_STATE, {"list_key": c.key}).one().n
                 for c in lists}
        cases = [case for comments in lists for name in PAGES
                 if (case := page_case(conn, comments, name)) is not None]
        scattered = (random_pages(conn, sizes["site"], args.random, args.random_seed)
                     if args.random else None)
        extra = [] if args.no_baselines else baselines(conn, sizes["site"], args.baseline_runs)
    report = {"sizes": sizes, "page_size": PAGE_SIZE, "runs": RUNS, "cases": cases,
              "random_pages": scattered, "baselines": extra}
    print(f"{'list':<32} {'page':>6} {'rows':>4} {'replies':>7} {'stored':>6} "
          f"{'plan ms':>8} {'exec ms':>8} {'trip ms':>8}")
    for case in cases:
        print(f"{case['list']:<32} {case['page']:>6} {case['rows']:>4} {case['replies']:>7} "
              f"{case['stored_renders_used']:>6} {case['planning_ms']:>8.3f} "
              f"{case['execution_ms']:>8.3f} {case['round_trip_ms']:>8.3f}")
    if scattered:
        print(f"{scattered['pages']} random pages of the site's list, each read once: server "
              f"time {scattered['execution_ms_median']:.3f} ms median, "
              f"{scattered['execution_ms_p90']:.3f} ms p90; blocks read from outside the "
              f"shared buffers {scattered['blocks_read_median']} median; blocks dirtied "
              f"{scattered['blocks_dirtied']}")
    for line in extra:
        print(f"baseline: {line['way']:<36} page {line['page']:>6}: "
              f"{line['execution_ms']:>10.2f} ms")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
