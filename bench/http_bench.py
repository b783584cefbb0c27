"""Requests per second and latency over HTTP, under gunicorn on loopback.

In one run, each under the same gunicorn settings and load:
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
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GUNICORN = str(Path(sys.executable).with_name("gunicorn"))
PATH = "/api/comments/"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def gunicorn(app: str, env: dict[str, str], workers: int):
    """A gunicorn serving ``app`` on a free loopback port; yields its base URL."""
    port = free_port()
    process = subprocess.Popen(
        [GUNICORN, "--bind", f"127.0.0.1:{port}", "--workers", str(workers),
         "--worker-class", "sync", "--log-level", "warning", app],
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=int, default=10, help="seconds per case")
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2, help="gunicorn sync workers")
    parser.add_argument("--python-client", action="store_true", help="do not use wrk")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL"):
        print("set DATABASE_URL to the database to serve", file=sys.stderr)
        return 2

    cases: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for label, cache_mb in (("cache on", "64"), ("cache off", "0")):
            env = {"COMMENTSVC_RESPONSE_CACHE_MB": cache_mb}
            with gunicorn("wsgi:app", env, args.workers) as base:
                with urllib.request.urlopen(base + PATH) as response:
                    body = response.read()
                first = json.loads(body)
                last_page = first["p8n"]["num_pages"]
                if label == "cache on":
                    body_file = Path(scratch, "page1.json")
                    body_file.write_bytes(body)
                    body_bytes = len(body)
                cases[f"service page 1, {label}"] = measure(base + PATH, args)
                cases[f"service last page ({last_page}), {label}"] = measure(
                    f"{base}{PATH}?page={last_page}", args)
        with gunicorn("bench.bare_app:app", {"BENCH_BODY_FILE": str(body_file)},
                      args.workers) as base:
            cases["bare Flask view, same body"] = measure(base + PATH, args)

    rps = {name: case["rps"] for name, case in cases.items()}
    bare = rps["bare Flask view, same body"]
    ratios = {}
    for label in ("cache on", "cache off"):
        page1 = rps[f"service page 1, {label}"]
        last = next(v for k, v in rps.items() if k.startswith("service last") and label in k)
        ratios[f"last page / page 1, {label}"] = round(last / page1, 3)
        ratios[f"page 1 / bare view, {label}"] = round(page1 / bare, 3)
    report = {"workers": args.workers, "connections": args.connections,
              "duration_s": args.duration, "body_bytes": body_bytes, "cases": cases,
              "ratios": ratios}
    print(f"{'case':<42} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'errors':>6}")
    for name, case in cases.items():
        print(f"{name:<42} {case['rps']:>9.1f} {case['p50_ms']:>8.3f} {case['p99_ms']:>8.3f} "
              f"{case['errors']:>6}")
    for name, value in ratios.items():
        print(f"ratio {name}: {value}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
