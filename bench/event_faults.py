"""Webhooks under faults, at length: RELIABILITY.md's figures (harness.event_faults).

Comments are posted all along while the deliverer is killed mid-send (SIGKILL), the
receiver is stopped for a minute and the database (a PostgreSQL cluster of the run's own)
is stopped; then the run waits for every event to arrive. Exit status 1 if any event made
was lost, forged or refused its signature.

    python bench/event_faults.py                                   # PostgreSQL, 60 s down
    python bench/event_faults.py --receiver-down 60 --database-down 20 --json FILE
    python bench/event_faults.py --sqlite                          # no database stop

Loopback only, free ports only.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from pg_cluster import PgCluster  # noqa: E402

from harness import event_faults  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--receiver-down", type=float, default=60.0)
    parser.add_argument("--database-down", type=float, default=20.0)
    parser.add_argument("--pace", type=float, default=0.02,
                        help="Seconds between two posts of the posting thread.")
    parser.add_argument("--sqlite", action="store_true", help="SQLite: no database stop.")
    parser.add_argument("--json", type=Path, help="Also write the figures here.")
    args = parser.parse_args()
    logging.getLogger("commentsvc.request").disabled = True  # a line per post: too many
    options = dict(kills=args.kills, receiver_down=args.receiver_down, pace=args.pace,
                   drain_limit=600.0, log=lambda text: print(f"  {text}", flush=True))
    if args.sqlite:
        with tempfile.TemporaryDirectory() as folder:
            figures = event_faults.run(f"sqlite:///{folder}/events.sqlite3", **options)
    else:
        with PgCluster() as cluster:
            url = cluster.create_database(f"events_{uuid.uuid4().hex[:8]}")
            figures = event_faults.run(url, cluster=cluster,
                                       database_down=args.database_down, **options)
    report = figures.as_dict()
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 1 if figures.lost or figures.unknown or figures.rejected else 0


if __name__ == "__main__":
    sys.exit(main())
