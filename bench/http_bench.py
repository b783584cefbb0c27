"""Requests per second and latency over HTTP, under gunicorn on loopback.

In one run, each under the same gunicorn settings and load, the cases taking turns for
``--rounds`` rounds (medians reported, each round's figures kept):
  * a bare Flask view returning page 1's body as a fixed string (bench/bare_app.py);
  * the service, page 1 and the last page of the whole site's list, with its response
    cache on (the default) and off (every request reads the database and builds the page).
The ratios the performance goals name are computed from these figures: last page over
page 1, and the service's page 1 over the bare view.

    DATABASE_URL=postgresql://... python bench/http_bench.py [--duration 10] [--json FILE]

The load comes from wrk when it is installed, else from a small Python client; both run on
loopback for a bounded time. Nothing is written to the database.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from contextlib import ExitStack, contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GUNICORN = str(Path(sys.executable).with_name("gunicorn"))
PATH = "/api/comments/"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def gunicorn(app: str, env: dict[str, str], workers: int, worker_class: str = "sync",
             threads: int = 1):
    """A gunicorn serving ``app`` on a free loopback port; yields its base URL."""
    port = free_port()
    process = subprocess.Popen(
        [GUNICORN, "--bind", f"127.0.0.1:{port}", "--workers", str(workers),
         "--worker-class", worker_class, "--threads", str(threads),
         "--log-level", "warning", app],
        cwd=ROOT, env={**os.environ, **env})
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


def load_wrk(url: str, duration: int, connections: int) -> dict:
    output = subprocess.run(
        ["wrk", "--threads", "1", "--connections", str(connections),
         "--duration", f"{duration}s", "--latency", url],
        check=True, capture_output=True, text=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))
    percentiles = dict(re.findall(r"^\s+(50|99)%\s+(\S+)$", output, re.MULTILINE))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    return {"rps": round(rps, 1), "p50_ms": round(_wrk_ms(percentiles["50"]), 3),
            "p99_ms": round(_wrk_ms(percentiles["99"]), 3),
            "errors": int(errors.group(1)) if errors else 0, "tool": "wrk"}


def load_python(url: str, duration: int, connections: int) -> dict:
    """The fallback: ``connections`` threads requesting ``url`` back to back."""
    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()
    stop = time.monotonic() + duration

    def client() -> None:
        nonlocal errors
        mine, failed = [], 0
        while time.monotonic() < stop:
            started = time.perf_counter()
            try:
                with urllib.request.urlopen(url, timeout=10) as response:
                    response.read()
            except OSError:
                failed += 1
                continue
            mine.append((time.perf_counter() - started) * 1000)
        with lock:
            latencies.extend(mine)
            errors += failed

    threads = [threading.Thread(target=client) for _ in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    latencies.sort()
    return {"rps": round(len(latencies) / duration, 1),
            "p50_ms": round(statistics.median(latencies), 3),
            "p99_ms": round(latencies[int(len(latencies) * 0.99) - 1], 3),
            "errors": errors, "tool": "python"}


def measure(url: str, args) -> dict:
    load = load_wrk if shutil.which("wrk") and not args.python_client else load_python
    load(url, min(2, args.duration), args.connections)  # warm every worker up
    return {"url": url, **load(url, args.duration, args.connections)}


def median_case(runs: list[dict]) -> dict:
    """One case over all rounds: the round of median throughput, with every round's req/s."""
    ordered = sorted(runs, key=lambda run: run["rps"])
    return {**ordered[len(ordered) // 2], "rps_by_round": [run["rps"] for run in runs]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=int, default=10, help="seconds per case and round")
    parser.add_argument("--rounds", type=int, default=3,
                        help="times every case is measured, the cases taking turns")
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers")
    parser.add_argument("--worker-class", default="sync",
                        help="gunicorn worker class (gunicorn.conf.py serves with gthread)")
    parser.add_argument("--threads", type=int, default=1, help="threads per gthread worker")
    parser.add_argument("--python-client", action="store_true", help="do not use wrk")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL"):
        print("set DATABASE_URL to the database to serve", file=sys.stderr)
        return 2

    runs: dict[str, list[dict]] = {}
    ratio_runs: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as scratch, ExitStack() as servers:
        urls: dict[str, str] = {}
        for label, cache_mb in (("cache on", "64"), ("cache off", "0")):
            base = servers.enter_context(
                gunicorn("wsgi:app", {"COMMENTSVC_RESPONSE_CACHE_MB": cache_mb}, args.workers,
                         args.worker_class, args.threads))
            with urllib.request.urlopen(base + PATH) as response:
                body = response.read()
            last_page = json.loads(body)["p8n"]["num_pages"]
            if label == "cache on":
                body_file = Path(scratch, "page1.json")
                body_file.write_bytes(body)
                body_bytes = len(body)
            urls[f"service page 1, {label}"] = base + PATH
            urls[f"service last page ({last_page}), {label}"] = f"{base}{PATH}?page={last_page}"
        base = servers.enter_context(
            gunicorn("bench.bare_app:app", {"BENCH_BODY_FILE": str(body_file)}, args.workers,
                         args.worker_class, args.threads))
        urls["bare Flask view, same body"] = base + PATH

        # The servers idle while another is measured; taking turns spreads any drift of
        # the machine over every case, and each round's ratios come from neighbouring runs.
        for _ in range(args.rounds):
            rps = {}
            for name, url in urls.items():
                runs.setdefault(name, []).append(measure(url, args))
                rps[name] = runs[name][-1]["rps"]
            for name, value in round_ratios(rps).items():
                ratio_runs.setdefault(name, []).append(value)

    cases = {name: median_case(case_runs) for name, case_runs in runs.items()}
    ratios = {name: round(statistics.median(values), 3) for name, values in ratio_runs.items()}
    report = {"workers": args.workers, "worker_class": args.worker_class,
              "threads": args.threads, "connections": args.connections,
              "duration_s": args.duration, "rounds": args.rounds, "body_bytes": body_bytes,
              "cases": cases, "ratios": ratios, "ratios_by_round": ratio_runs}
    print(f"{'case (median of rounds)':<42} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'errors':>6}  req/s by round")
    for name, case in cases.items():
        print(f"{name:<42} {case['rps']:>9.1f} {case['p50_ms']:>8.3f} {case['p99_ms']:>8.3f} "
              f"{case['errors']:>6}  {case['rps_by_round']}")
    for name, value in ratios.items():
        print(f"ratio {name}: {value} (median; by round {ratio_runs[name]})")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


def round_ratios(rps: dict[str, float]) -> dict[str, float]:
    """The ratios the goals name, from one round's requests per second."""
    bare = rps["bare Flask view, same body"]
    ratios = {}
    for label in ("cache on", "cache off"):
        page1 = rps[f"service page 1, {label}"]
        last = next(v for k, v in rps.items() if k.startswith("service last") and label in k)
        ratios[f"last page / page 1, {label}"] = round(last / page1, 3)
        ratios[f"page 1 / bare view, {label}"] = round(page1 / bare, 3)
    return ratios


if __name__ == "__main__":
    sys.exit(main())
