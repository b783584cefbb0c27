"""Requests per second and latency over HTTP, under gunicorn on loopback.

In one run, each under the same gunicorn settings and load, the cases taking turns for
``--rounds`` rounds, every other round in the reverse order (medians reported, each
round's figures kept):
  * a bare Flask view returning page 1's body as a fixed string (bench/bare_app.py), alone
    and with the one statement each of the service's paths runs (the ceilings: a cached
    page's counter read, a built page's one-statement read);
  * the service with its response cache on (the default) and off (every request reads
    the database and builds the page), on the whole site's list: page 1, the last page,
    and a random page (wrk picks one of every page for each request, so the cache rarely
    helps); page 1 revalidated (If-None-Match with its tag, as a CDN or a browser sends
    it: a 304); and on many targets: page 1 and the last page of a random target each
    time.
Then, once, latency by page depth (cache off): pages 1, 10, 100, ... and the last.
The ratios the performance goals name are computed per round from neighbouring runs:
each case over the bare view, and the last page over page 1 wherever both are measured.

    DATABASE_URL=postgresql://... python bench/http_bench.py [--duration 10]
        [--json FILE] [--charts DIR]

``--before DIR`` serves another checkout (an earlier commit) too, and measures its page 1,
page 1 revalidated and random pages the same way in the same run, as "before: ...".
``--charts DIR`` draws req/s by case and latency by page depth as PNGs (bench/charts.py).
``--prewarm`` reads the database's tables and indexes into the machine's memory first
(PostgreSQL's pg_prewarm, the extension created if missing), as a server that has run a
while holds them: on a database larger than what the machine has cached, the first rounds
of random pages otherwise measure the disk, and each round finds more in memory.

The load comes from wrk when it is installed, else from a small Python client; both run on
loopback for a bounded time. Nothing is written to the database (but the extension).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlsplit

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from commentsvc.storage.database_urls import normalise_url  # noqa: E402

GUNICORN = str(Path(sys.executable).with_name("gunicorn"))
PATH = "/api/comments/"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def gunicorn(app: str, env: dict[str, str], workers: int, worker_class: str = "sync",
             threads: int = 1, root: Path = ROOT):
    """A gunicorn serving ``app`` of the checkout ``root`` on a free loopback port; yields
    its base URL."""
    port = free_port()
    process = subprocess.Popen(
        [GUNICORN, "--bind", f"127.0.0.1:{port}", "--workers", str(workers),
         "--worker-class", worker_class, "--threads", str(threads),
         "--log-level", "warning", app],
        cwd=root, env={**os.environ, **env, "PYTHONPATH": str(root)})
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(base + PATH, timeout=2).read()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"gunicorn {app} did not start") from None
                time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=30)


_WRK_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def _wrk_ms(text: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", text).groups()
    return float(number) * _WRK_UNITS[unit]


@dataclass(frozen=True)
class Target:
    """What a case requests: one URL, or each time one of ``paths`` on the URL's server (or
    one of its ``page=1..pages``) picked at random; with ``headers`` on every request."""

    url: str
    paths: tuple[str, ...] = ()
    pages: int = 0
    headers: tuple[tuple[str, str], ...] = ()

    def pick(self, rng: random.Random) -> str:
        if self.paths:
            parts = urlsplit(self.url)
            return f"{parts.scheme}://{parts.netloc}{rng.choice(self.paths)}"
        if self.pages:
            return f"{self.url}?page={rng.randint(1, self.pages)}"
        return self.url

    def lua(self) -> str | None:
        """A wrk script making the same random choice for each request, or None."""
        if self.paths:
            listed = ",".join(json.dumps(path) for path in self.paths)
            return (f"local paths = {{{listed}}}\n"
                    "request = function() return wrk.format(nil, paths[math.random(#paths)]) end\n")
        if self.pages:
            path = urlsplit(self.url).path
            return (f"request = function() return wrk.format(nil, \"{path}?page=\" .. "
                    f"math.random(1, {self.pages})) end\n")
        return None


def load_wrk(target: Target, duration: int, connections: int) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        script = target.lua()
        extra = []
        if script is not None:
            path = Path(scratch, "random.lua")
            path.write_text("math.randomseed(os.time())\n" + script, encoding="utf-8")
            extra = ["--script", str(path)]
        for name, value in target.headers:
            extra += ["--header", f"{name}: {value}"]
        output = subprocess.run(
            ["wrk", "--threads", "1", "--connections", str(connections),
             "--duration", f"{duration}s", "--latency", *extra, target.url],
            check=True, capture_output=True, text=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))
    percentiles = dict(re.findall(r"^\s+(50|99)%\s+(\S+)$", output, re.MULTILINE))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    timeouts = re.search(r"Socket errors: .*timeout (\d+)", output)
    return {"rps": round(rps, 1),
            # no percentiles when no request completed in time
            "p50_ms": round(_wrk_ms(percentiles["50"]), 3) if "50" in percentiles else None,
            "p99_ms": round(_wrk_ms(percentiles["99"]), 3) if "99" in percentiles else None,
            "errors": (int(errors.group(1)) if errors else 0) + (
                int(timeouts.group(1)) if timeouts else 0), "tool": "wrk"}


def load_python(target: Target, duration: int, connections: int) -> dict:
    """The fallback: ``connections`` threads requesting back to back."""
    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()
    stop = time.monotonic() + duration

    def client(seed: int) -> None:
        nonlocal errors
        rng = random.Random(seed)
        mine, failed = [], 0
        while time.monotonic() < stop:
            started = time.perf_counter()
            try:
                asked = urllib.request.Request(target.pick(rng), headers=dict(target.headers))
                with urllib.request.urlopen(asked, timeout=10) as response:
                    response.read()
            except urllib.error.HTTPError as exc:
                if exc.code != 304:  # a revalidation's answer (urllib raises it)
                    failed += 1
                    continue
            except OSError:
                failed += 1
                continue
            mine.append((time.perf_counter() - started) * 1000)
        with lock:
            latencies.extend(mine)
            errors += failed

    threads = [threading.Thread(target=client, args=(n,)) for n in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    latencies.sort()
    return {"rps": round(len(latencies) / duration, 1),
            "p50_ms": round(statistics.median(latencies), 3),
            "p99_ms": round(latencies[max(0, int(len(latencies) * 0.99) - 1)], 3),
            "errors": errors, "tool": "python"}


def measure(target: Target, args, duration: int | None = None) -> dict:
    load = load_wrk if shutil.which("wrk") and not args.python_client else load_python
    seconds = duration or args.duration
    load(target, min(2, seconds), args.connections)  # warm every worker up
    return {"url": target.url, **load(target, seconds, args.connections)}


def median_case(runs: list[dict]) -> dict:
    """One case over all rounds: the round of median throughput, with every round's req/s."""
    ordered = sorted(runs, key=lambda run: run["rps"])
    return {**ordered[len(ordered) // 2], "rps_by_round": [run["rps"] for run in runs]}


BARE = "bare Flask view, same body"
CEILINGS = {"counter": "bare view + the counter read (ceiling, cache on)",
            "page": "bare view + the page read (ceiling, cache off)"}


def targets_of(database_url: str) -> list[tuple[str, int]]:
    """(content_type, object_id) of every target with comments."""
    engine = sa.create_engine(normalise_url(database_url))
    with engine.connect() as conn:
        keys = conn.execute(sa.text(
            "SELECT list_key FROM commentsvc_list_count WHERE list_key LIKE 'target:%'"
            " ORDER BY list_key")).scalars().all()
    engine.dispose()
    return [(key.split(":")[1], int(key.split(":")[2])) for key in keys]


def target_lists(targets: list[tuple[str, int]]) -> tuple[str, ...]:
    """The path of page 1 of each target's list."""
    return tuple(f"{PATH}?content_type={quote(kind)}&object_id={oid}" for kind, oid in targets)


# Every table, index and TOAST table of the database but the system catalogs, each read
# into the operating system's cache ('read': PostgreSQL's shared buffers are left as the
# load fills them); the blocks read of each.
PREWARM = """
    SELECT c.oid::regclass::text AS relation, pg_prewarm(c.oid, 'read') AS blocks
    FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
    WHERE c.relkind IN ('r', 'i', 't') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
    ORDER BY relation
"""


def prewarm(database_url: str) -> dict[str, int]:
    """Read the database's relations into the machine's memory (``--prewarm``): the blocks
    read of each relation."""
    engine = sa.create_engine(normalise_url(database_url))
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("CREATE EXTENSION IF NOT EXISTS pg_prewarm"))
        with engine.connect() as conn:
            return {relation: blocks for relation, blocks in conn.execute(sa.text(PREWARM))}
    finally:
        engine.dispose()


def turns(names: list[str], rounds: int) -> list[list[str]]:
    """The order of each round: as given, then reversed, and so on."""
    return [names if n % 2 == 0 else names[::-1] for n in range(rounds)]


def depths(num_pages: int) -> list[str]:
    """Page 1, 10, 100, ... below the last page, and the last."""
    shown, page = [], 1
    while page < num_pages:
        shown.append(str(page))
        page *= 10
    return [*shown, "last"]


def service_cases(base: str, label: str, num_pages: int,
                  targets: list[tuple[str, int]]) -> dict[str, Target]:
    """The service's cases on one server (cache ``label``): among them page 1 revalidated
    with the tag it has (a CDN's or a browser's If-None-Match, answered 304)."""
    url = base + PATH
    lists = target_lists(targets)
    with urllib.request.urlopen(url) as response:
        tag = response.headers["ETag"]
    return {
        f"page 1, {label}": Target(url),
        f"page 1 revalidated (304), {label}": Target(url, headers=(("If-None-Match", tag),)),
        f"last page ({num_pages}), {label}": Target(f"{url}?page={num_pages}"),
        f"random pages, {label}": Target(url, pages=num_pages),
        f"many targets: page 1, {label}": Target(url, paths=lists),
        f"many targets: last page, {label}": Target(
            url, paths=tuple(f"{path}&page=last" for path in lists)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=int, default=10, help="seconds per case and round")
    parser.add_argument("--rounds", type=int, default=3,
                        help="times every case is measured, the cases taking turns")
    parser.add_argument("--depth-duration", type=int,
                        help="seconds per page depth (default: half of --duration, at least 2)")
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers")
    parser.add_argument("--worker-class", default="sync",
                        help="gunicorn worker class (gunicorn.conf.py serves with gthread)")
    parser.add_argument("--threads", type=int, default=1, help="threads per gthread worker")
    parser.add_argument("--python-client", action="store_true", help="do not use wrk")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--before", type=Path,
                        help="another checkout of the service (an earlier commit) whose page 1 "
                             "and random pages are measured in the same run, as 'before: ...'")
    parser.add_argument("--charts", help="draw the charts (PNG) into this folder")
    parser.add_argument("--charts-label", default="",
                        help="what the charts' titles and file names say of the data")
    parser.add_argument("--prewarm", action="store_true",
                        help="read the database's tables and indexes into memory first")
    args = parser.parse_args()
    database_url = os.environ.get("DATABASE_URL")
    if not database_url:
        print("set DATABASE_URL to the database to serve", file=sys.stderr)
        return 2
    prewarmed = None
    if args.prewarm:
        started = time.perf_counter()
        prewarmed = {"blocks": sum(prewarm(database_url).values()),
                     "seconds": round(time.perf_counter() - started, 1)}
        print(f"prewarmed {prewarmed['blocks']:,} blocks in {prewarmed['seconds']} s")

    runs: dict[str, list[dict]] = {}
    ratio_runs: dict[str, list[float]] = {}
    by_depth: dict[str, dict] = {}
    targets = targets_of(database_url)
    with tempfile.TemporaryDirectory() as scratch, ExitStack() as servers:
        cases: dict[str, Target] = {}
        for label, cache_mb in (("cache on", "64"), ("cache off", "0")):
            base = servers.enter_context(
                gunicorn("wsgi:app", {"COMMENTSVC_RESPONSE_CACHE_MB": cache_mb}, args.workers,
                         args.worker_class, args.threads))
            with urllib.request.urlopen(base + PATH) as response:
                body = response.read()
            num_pages = json.loads(body)["p8n"]["num_pages"]
            if label == "cache on":
                body_file = Path(scratch, "page1.json")
                body_file.write_bytes(body)
                body_bytes = len(body)
            else:
                depth_base = base
            cases.update(service_cases(base, label, num_pages, targets))
        if args.before is not None:
            for label, cache_mb in (("cache on", "64"), ("cache off", "0")):
                base = servers.enter_context(gunicorn(
                    "wsgi:app", {"COMMENTSVC_RESPONSE_CACHE_MB": cache_mb}, args.workers,
                    args.worker_class, args.threads, root=args.before.resolve()))
                earlier = service_cases(base, label, num_pages, targets)
                cases.update({f"before: {name}": earlier[name] for name in (
                    f"page 1, {label}", f"page 1 revalidated (304), {label}",
                    f"random pages, {label}")})
        bare_env = {"BENCH_BODY_FILE": str(body_file)}
        for name, env in ((BARE, {}), *((CEILINGS[k], {"BENCH_DB_READ": k}) for k in CEILINGS)):
            base = servers.enter_context(gunicorn("bench.bare_app:app", {**bare_env, **env},
                                                  args.workers, args.worker_class,
                                                  args.threads))
            cases[name] = Target(base + PATH)
        yardsticks = (BARE, *CEILINGS.values())  # listed first
        cases = {name: cases[name] for name in yardsticks} | {
            name: target for name, target in cases.items() if name not in yardsticks}

        # The servers idle while another is measured; taking turns spreads any drift of
        # the machine over every case, and each round's ratios come from neighbouring runs.
        # Every other round runs the cases in the reverse order, so that no case always
        # follows the same one (a page built after pages sent from the cache, say).
        for order in turns(list(cases), args.rounds):
            rps = {}
            for name in order:
                runs.setdefault(name, []).append(measure(cases[name], args))
                rps[name] = runs[name][-1]["rps"]
            for name, value in round_ratios(rps).items():
                ratio_runs.setdefault(name, []).append(value)
        depth_seconds = args.depth_duration or max(2, args.duration // 2)
        for page in depths(num_pages):
            by_depth[page] = measure(Target(f"{depth_base}{PATH}?page={page}"), args,
                                     depth_seconds)

    cases_report = {name: median_case(case_runs) for name, case_runs in runs.items()}
    ratios = {name: round(statistics.median(values), 3) for name, values in ratio_runs.items()}
    report = {"workers": args.workers, "worker_class": args.worker_class,
              "threads": args.threads, "connections": args.connections,
              "duration_s": args.duration, "rounds": args.rounds, "prewarmed": prewarmed,
              "body_bytes": body_bytes,
              "targets": len(targets), "num_pages": num_pages, "cases": cases_report,
              "ratios": ratios, "ratios_by_round": ratio_runs,
              "depth": {"duration_s": depth_seconds, "pages": by_depth}}
    print_report(report)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if args.charts:
        from bench import charts
        for path in charts.draw(report, Path(args.charts), label=args.charts_label):
            print(f"chart: {path}")
    return 0


def print_report(report: dict) -> None:
    print(f"{'case (median of rounds)':<52} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'errors':>6}  req/s by round")
    for name, case in report["cases"].items():
        print(f"{name:<52} {case['rps']:>9.1f} {_ms(case['p50_ms'])} {_ms(case['p99_ms'])} "
              f"{case['errors']:>6}  {case['rps_by_round']}")
    for name, value in report["ratios"].items():
        print(f"ratio {name}: {value} (median; by round {report['ratios_by_round'][name]})")
    print(f"latency by page depth, cache off ({report['depth']['duration_s']} s each):")
    for page, case in report["depth"]["pages"].items():
        print(f"  page {page:>8}: {case['rps']:>9.1f} req/s, p50 {_ms(case['p50_ms'])} ms, "
              f"p99 {_ms(case['p99_ms'])} ms")


def _ms(value: float | None) -> str:
    return f"{value:>8.3f}" if value is not None else f"{'-':>8}"


def round_ratios(rps: dict[str, float]) -> dict[str, float]:
    """The ratios the goals name, from one round's requests per second: every service
    case and ceiling over the bare view, and each last page over its page 1."""
    bare = rps[BARE]
    ratios = {f"{name} / bare view": round(value / bare, 3)
              for name, value in rps.items() if name != BARE}
    for label in ("cache on", "cache off"):
        page1 = rps[f"page 1, {label}"]
        last = next(v for k, v in rps.items() if k.startswith("last page") and label in k)
        ratios[f"last page / page 1, {label}"] = round(last / page1, 3)
        ratios[f"many targets: last page / page 1, {label}"] = round(
            rps[f"many targets: last page, {label}"] / rps[f"many targets: page 1, {label}"], 3)
    return ratios


if __name__ == "__main__":
    sys.exit(main())
