"""Random pages of the whole site's list with the response cache on (the long tail, which
the cache rarely helps), on up to three servers measured in turn: this checkout, this
checkout with the fast lane off, and ``--before DIR`` (an earlier commit). ``--targets``:
page 1 of a random target each time instead (many lists, each asked for now and then).

The fast lane builds such pages itself once Flask answered one page of the list (before
it did, it cost them about a percent, less than the rounds of bench/http_bench.py
spread); here the servers take turns, round after round (the order reversed every other
round), on the same load, so that a drift of the machine meets them alike.

    DATABASE_URL=postgresql://... python bench/long_tail.py [--before DIR] [--targets]
        [--rounds 6] [--duration 6] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import urllib.request
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.http_bench import (  # noqa: E402
    PATH,
    Target,
    gunicorn,
    load_wrk,
    target_lists,
    targets_of,
    turns,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="an earlier checkout, served too")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--duration", type=int, default=6, help="seconds per server and round")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--targets", action="store_true",
                        help="page 1 of a random target each time, not random site pages")
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL"):
        print("set DATABASE_URL to the database to serve", file=sys.stderr)
        return 2
    servers = {"after": (ROOT, {}), "after, fast lane off": (ROOT, {"COMMENTSVC_FAST_LANE": "off"})}
    if args.before is not None:
        servers["before"] = (args.before.resolve(), {})
    runs: dict[str, list[float]] = {name: [] for name in servers}
    lists = target_lists(targets_of(os.environ["DATABASE_URL"])) if args.targets else ()
    with ExitStack() as stack:
        targets = {}
        for name, (root, env) in servers.items():
            base = stack.enter_context(gunicorn(
                "wsgi:app", {"COMMENTSVC_RESPONSE_CACHE_MB": "64", **env}, 2, root=root))
            if lists:
                targets[name] = Target(base + PATH, paths=lists)
            else:
                with urllib.request.urlopen(base + PATH) as response:
                    pages = json.loads(response.read())["p8n"]["num_pages"]
                targets[name] = Target(base + PATH, pages=pages)
            load_wrk(targets[name], 2, 4)  # warm its workers up
        for order in turns(list(servers), args.rounds):
            for name in order:
                runs[name].append(load_wrk(targets[name], args.duration, 4)["rps"])
    report = {name: {"rps": round(statistics.median(figures), 1), "rps_by_round": figures}
              for name, figures in runs.items()}
    for name, figures in report.items():
        print(f"{name:<22} {figures['rps']:>9.1f} req/s (median; by round "
              f"{figures['rps_by_round']})")
    for name in report:
        if name != "after":
            print(f"after / {name}: {report['after']['rps'] / report[name]['rps']:.3f}")
    if args.json:
        args.json.write_text(json.dumps({"rounds": args.rounds, "duration_s": args.duration,
                                         "case": "targets" if lists else "random pages",
                                         "targets": len(lists), "servers": report},
                                        indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
