"""The whole benchmark in one command: load, SQL, HTTP and the 10,000-reply thread.

    python bench/run.py --comments 1000000      # `make bench`: about six minutes
    python bench/run.py --comments 10000000     # `make bench-full`: the 10-million run

On the PostgreSQL server of BENCH_ADMIN_URL (default: the local one, database postgres)
it creates two databases of its own, commentsvc_bench and commentsvc_bench_import (and
commentsvc_bench_replies for the reply test), dropping any left by an earlier run:
  1. seed: ``flask seed`` of N comments (the biggest target gets --hot-share of them);
  2. export the seeded data to NDJSON, then import that file into the second database;
  3. sql_bench.py, http_bench.py and reply_bench.py against the data; http_bench reads the
     database into memory first (``--prewarm``) and draws its charts into bench/results/
     (http-<N>-rps.png, http-<N>-depth.png).
Wall time and peak memory of each load step come from the child process itself. Every
figure lands in bench/results/<N>.json, and a Markdown summary is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from commentsvc.storage.database_urls import normalise_url  # noqa: E402

BIN = Path(sys.executable).parent
ADMIN_URL = normalise_url(os.environ.get("BENCH_ADMIN_URL",
                                         "postgresql://postgres@127.0.0.1:5432/postgres"))
DATABASES = ("commentsvc_bench", "commentsvc_bench_import", "commentsvc_bench_replies")


def database_url(name: str) -> str:
    return sa.engine.make_url(ADMIN_URL).set(database=name).render_as_string(
        hide_password=False)


def recreate(name: str) -> str:
    admin = sa.create_engine(ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}"')
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    admin.dispose()
    return database_url(name)


def timed(command: list[str], url: str) -> dict:
    """Run a command with DATABASE_URL set; its wall time and the peak RSS of children."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    subprocess.run(command, cwd=ROOT, env={**os.environ, "DATABASE_URL": url}, check=True)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {"seconds": round(seconds, 1),
            "peak_rss_mb": round(peak / 1024, 1) if peak > before else "<= earlier step"}


def machine() -> dict:
    cpu = next((line.split(":", 1)[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    memory_kb = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text()
                     .splitlines() if line.startswith("MemTotal"))
    admin = sa.create_engine(ADMIN_URL)
    with admin.connect() as conn:
        server = conn.exec_driver_sql("SHOW server_version").scalar_one()
    admin.dispose()
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gb": round(memory_kb / 2**20, 1),
            "python": platform.python_version(), "postgresql": server,
            "os": platform.platform()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--comments", type=int, default=1_000_000)
    parser.add_argument("--targets", type=int)
    parser.add_argument("--hot-share", type=float, default=0.12)
    parser.add_argument("--duration", type=int, default=10,
                        help="seconds per HTTP case and round")
    parser.add_argument("--rounds", type=int, default=3, help="HTTP rounds, cases taking turns")
    parser.add_argument("--skip-import", action="store_true")
    args = parser.parse_args()
    targets = args.targets or max(10, args.comments // 2000)
    flask = [str(BIN / "flask"), "--app", "app"]
    python = str(BIN / "python")
    results_dir = ROOT / "bench" / "results"
    results_dir.mkdir(exist_ok=True)
    report: dict = {"comments": args.comments, "targets": targets,
                    "hot_share": args.hot_share, "machine": machine()}

    url = recreate(DATABASES[0])
    subprocess.run(flask + ["init-db"], cwd=ROOT, env={**os.environ, "DATABASE_URL": url},
                   check=True)
    report["seed"] = timed(flask + ["seed", "--comments", str(args.comments),
                                    "--targets", str(targets), "--hot-share",
                                    str(args.hot_share), "--seed", "7"], url)
    if not args.skip_import:
        with tempfile.TemporaryDirectory() as scratch:
            dump = str(Path(scratch, "export.ndjson"))
            report["export"] = timed(flask + ["export", dump], url)
            report["export"]["bytes"] = Path(dump).stat().st_size
            import_url = recreate(DATABASES[1])
            report["import"] = timed(flask + ["import", dump], import_url)

    with tempfile.TemporaryDirectory() as scratch:
        parts = {"sql": ["bench/sql_bench.py"],
                 "http": ["bench/http_bench.py", "--prewarm", "--duration", str(args.duration),
                          "--rounds", str(args.rounds), "--charts", str(results_dir),
                          "--charts-label", str(args.comments)]}
        for name, script in parts.items():
            out = str(Path(scratch, f"{name}.json"))
            subprocess.run([python, *script, "--json", out], cwd=ROOT,
                           env={**os.environ, "DATABASE_URL": url}, check=True)
            report[name] = json.loads(Path(out).read_text())
        out = str(Path(scratch, "replies.json"))
        subprocess.run([python, "bench/reply_bench.py", "--json", out], cwd=ROOT,
                       env={**os.environ, "DATABASE_URL": recreate(DATABASES[2])}, check=True)
        report["replies"] = json.loads(Path(out).read_text())

    path = results_dir / f"{args.comments}.json"
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"\nFigures written to {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
