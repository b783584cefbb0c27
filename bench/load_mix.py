"""A mixed load on the service under gunicorn, then the checks that nothing was lost.

What the load reads and writes and what is checked afterwards: harness/mixed_load.py.

    python bench/load_mix.py --duration 60     # `make soak`: a fresh database, dropped after
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from commentsvc.storage.database_urls import normalise_url  # noqa: E402
from harness.mixed_load import Load, verify  # noqa: E402
from harness.servers import Gunicorn, prepare  # noqa: E402


def summary(load: Load, seconds: float, checks: dict) -> dict:
    failures = load.failures()
    return {"seconds": round(seconds, 1), "requests": len(load.answers),
            "requests_per_second": round(len(load.answers) / seconds, 1),
            "by_kind_and_status": {f"{k} {s}": n for (k, s), n in
                                   sorted(load.statuses().items(), key=str)},
            "errors": len(failures), "checks": checks}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=60)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--comments", type=int, default=5000)
    parser.add_argument("--admin-url", default=os.environ.get(
        "SOAK_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres"))
    parser.add_argument("--json", help="also write the summary to this file")
    args = parser.parse_args()

    name = f"commentsvc_soak_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(normalise_url(args.admin_url), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    url = admin.url.set(database=name).render_as_string(hide_password=False)
    try:
        community = prepare(url, comments=args.comments)
        with Gunicorn(url, workers=args.workers) as server:
            started = time.monotonic()
            load = Load(server.base, community, threads=args.threads).run_for(args.duration)
            seconds = time.monotonic() - started
            checks = verify(server.base, url, load)
        result = summary(load, seconds, checks)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n", encoding="utf-8")
    for answer in load.failures()[:10]:
        print("failure:", answer.kind, answer.status, answer.error, answer.body[:200],
              file=sys.stderr)
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
