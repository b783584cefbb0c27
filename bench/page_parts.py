"""Where a built page's time goes, part by part: page 1 of the whole site's list against
its last page, with the response cache off, and what one more comment on a page costs.

    DATABASE_URL=postgresql://... python bench/page_parts.py [--requests 1000]
        [--rounds 5] [--checkout DIR] [--json FILE]

The last page of a long list holds its oldest roots with their replies, so it holds more
comments than page 1 and is built slower; this tells which part grows with them. Each
part is timed over ``--requests`` calls, the pages and the parts taking turns for
``--rounds`` rounds; medians, in microseconds:

- ``database CPU``: the page read's prepared statement, as storage.counters runs it, on a
  connection of this script's; the CPU time of that connection's server process, read
  from ``/proc/<pid>/schedstat`` (so only with the database on this machine);
- ``round trip`` of the same executions, and ``driver CPU``: this process's CPU time over
  them (libpq and psycopg2 receiving the rows and making them Python values);
- ``build``: the JSON answer made from those rows (web.reads.json_page), CPU time;
- ``request`` and ``request CPU``: the whole request to the service's WSGI app in this
  process, its response cache off (what gunicorn's worker does, less HTTP).

Then each part's excess on the last page over page 1, divided by the comments it holds
more. ``--checkout DIR`` times another checkout's service the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.in_process import caller, microseconds, service_app  # noqa: E402 - the service later

PAGES = {"page 1": 1, "last page": 0}  # the page numbers of a page read (0: the last)
PARTS = ("database CPU", "round trip", "driver CPU", "build", "request", "request CPU")


def backend_cpu_us(pid: int) -> float | None:
    """The CPU time so far of the database's server process ``pid``, in µs, or None when
    it is not a process of this machine."""
    try:
        with open(f"/proc/{pid}/schedstat") as stat:
            return int(stat.read().split()[0]) / 1e3
    except (OSError, ValueError, IndexError):
        return None


class Statement:
    """The page reads prepared on a connection of their own, as the service prepares them
    on its kept connections."""

    def __init__(self, url: str):
        import psycopg2

        from commentsvc.storage.database_urls import libpq_url
        from commentsvc.storage.queries.listing import EXECUTE_PAGE_READ, PREPARE_PAGE_READS

        self.connection = psycopg2.connect(libpq_url(url))
        self.connection.autocommit = True
        self.cursor = self.connection.cursor()
        self.cursor.execute(PREPARE_PAGE_READS)
        self.executions = EXECUTE_PAGE_READ
        self.cursor.execute("SELECT pg_backend_pid()")
        self.pid = self.cursor.fetchone()[0]

    def rows(self, read: Any) -> list[tuple[Any, ...]]:
        """The rows of one page read (storage.counters.PageRead)."""
        self.cursor.execute(self.executions[read.kind], read.values())
        rows: list[tuple[Any, ...]] = self.cursor.fetchall()
        return rows

    def timed(self, read: Any, requests: int) -> dict[str, float | None]:
        """The database's CPU, the round trip and this process's CPU, µs an execution."""
        server, wall, cpu = backend_cpu_us(self.pid), time.perf_counter(), time.process_time()
        for _ in range(requests):
            self.rows(read)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        server_after = backend_cpu_us(self.pid)
        return {"database CPU": None if server is None or server_after is None
                else (server_after - server) / requests,
                "round trip": wall / requests * 1e6, "driver CPU": cpu / requests * 1e6}

    def close(self) -> None:
        self.connection.close()


def page_reads(app: Any) -> dict[str, Any]:
    """Page 1 and the last page of the whole site's list, as the service reads them."""
    from commentsvc.rules.comment_lists import CommentList
    from commentsvc.web.paginator import list_page_read

    settings = app.extensions["commentsvc"].settings
    return {name: list_page_read(CommentList(), number, settings.page_size, settings)
            for name, number in PAGES.items()}


def builder(app: Any, rows: list[tuple[Any, ...]]) -> Callable[[], bytes]:
    """The JSON answer of a page made from its rows, as the service makes it (a page of
    a hundred, anywhere in the list: the numbers only change its links)."""
    from commentsvc.web.reads import json_page

    settings = app.extensions["commentsvc"].settings
    return lambda: json_page(settings, "http://127.0.0.1:8000/api/comments/", "", 50, 100,
                             rows, None)


def comments_on(body: bytes) -> int:
    """The comments a list answer holds: its entries and their replies."""
    results = json.loads(body)["results"]
    return len(results) + sum(len(entry["replies"] or []) for entry in results)


def per_comment(parts: dict[str, dict[str, float | None]], comments: dict[str, int]
                ) -> dict[str, float | None]:
    """Each part's excess on the last page over page 1, over the comments it holds more
    (None where the last page holds no more, or the part was not timed)."""
    extra = comments["last page"] - comments["page 1"]
    first, last = parts["page 1"], parts["last page"]
    return {part: None if extra <= 0 or first.get(part) is None or last.get(part) is None
            else (last[part] - first[part]) / extra  # type: ignore[operator]
            for part in PARTS}


def medians(rounds: list[dict[str, float | None]]) -> dict[str, float | None]:
    """Each part's median over the rounds (None when it was not timed)."""
    return {part: None if any(r.get(part) is None for r in rounds)
            else statistics.median(r[part] for r in rounds)  # type: ignore[misc]
            for part in PARTS}


def run(app: Any, url: str, requests: int, rounds: int) -> dict[str, Any]:
    """Every part of both pages, taking turns for ``rounds`` rounds: their medians, the
    comments each page holds, and what one more costs."""
    reads = page_reads(app)
    statement = Statement(url)
    try:
        rows = {name: statement.rows(read) for name, read in reads.items()}
        builds = {name: builder(app, rows[name]) for name in reads}
        requesters = {name: caller(app, query="page=last" if PAGES[name] == 0 else "")
                      for name in reads}
        comments = {name: comments_on(call()) for name, call in requesters.items()}
        timings: dict[str, list[dict[str, float | None]]] = {name: [] for name in reads}
        for _ in range(rounds):
            for name, read in reads.items():
                statement.timed(read, max(1, requests // 10))  # warm-up
                timed = statement.timed(read, requests)
                timed["build"] = microseconds(builds[name], requests)[1]
                timed["request"], timed["request CPU"] = microseconds(requesters[name],
                                                                      requests)
                timings[name].append(timed)
    finally:
        statement.close()
    parts = {name: medians(timed) for name, timed in timings.items()}
    return {"comments": comments, "parts": parts, "rounds": timings,
            "per comment": per_comment(parts, comments)}


def report(found: dict[str, Any]) -> str:
    """The parts as a table: page 1, the last page, and one more comment."""
    def shown(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f}"

    comments = found["comments"]
    lines = [f"{'part (µs)':<14} {'page 1 (' + str(comments['page 1']) + ')':>14} "
             f"{'last (' + str(comments['last page']) + ')':>12} {'a comment more':>15}"]
    for part in PARTS:
        lines.append(f"{part:<14} {shown(found['parts']['page 1'][part]):>14} "
                     f"{shown(found['parts']['last page'][part]):>12} "
                     f"{shown(found['per comment'][part]):>15}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--checkout", type=Path,
                        help="time this checkout's service instead of this one's")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    if args.checkout:  # before anything imports the service
        sys.path.insert(0, str(args.checkout.resolve()))
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgresql"):
        print("set DATABASE_URL to the PostgreSQL database to read", file=sys.stderr)
        return 2
    app = service_app(0)
    stderr, sys.stderr = sys.stderr, open(os.devnull, "w")  # noqa: SIM115 - the request log
    try:
        found = run(app, url, args.requests, args.rounds)
    finally:
        sys.stderr.close()
        sys.stderr = stderr
    print(report(found))
    if args.json:
        Path(args.json).write_text(json.dumps(found, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
