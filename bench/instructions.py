"""Instructions one request costs inside the process, counted by valgrind's callgrind: a
count that stays the same from run to run whatever else the machine is doing, where
times on a shared machine move by a tenth or more.

    DATABASE_URL=postgresql://... python bench/instructions.py [--requests 300]
        [--before DIR] [--json FILE]

Each case (the service's page 1 with its response cache on, and off, as
bench/in_process.py calls it) runs in a process of its own under callgrind twice: after
its warm-up once with no request, once with ``--requests`` more. The difference over
``--requests`` is the instructions a request costs this process (the database's own work
is another process's and is not counted). ``--before DIR`` counts another checkout of the
service the same way, in the same run. Needs valgrind.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = {"page 1, cache on": 64, "page 1, cache off": 0}
WARM_UP = 30
# One case's requests, run in the checkout given as the working directory.
_RUN = """
import os, sys
sys.path.insert(0, os.getcwd())
from bench.in_process import caller, service_app
call = caller(service_app(int(sys.argv[1])))
sys.stderr = open(os.devnull, "w")
for _ in range(int(sys.argv[2])):
    call()
"""


def count(root: Path, cache_mb: int, requests: int) -> int:
    """Instructions a process of checkout ``root`` executes for ``requests`` requests,
    start-up included."""
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
         sys.executable, "-c", _RUN, str(cache_mb), str(requests)],
        cwd=root, env={**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(root)},
        capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", out.stderr)
    if found is None:
        raise RuntimeError(f"callgrind printed no count:\n{out.stderr[-2000:]}")
    return int(found.group(1))


def per_request(root: Path, requests: int) -> dict[str, float]:
    """Each case's instructions a request, for checkout ``root`` (two runs at a time)."""
    runs = {(case, n): (CASES[case], WARM_UP + n) for case in CASES for n in (0, requests)}
    with ThreadPoolExecutor(max_workers=2) as pool:
        counts = dict(zip(runs, pool.map(lambda args: count(root, *args), runs.values()),
                          strict=True))
    return {case: (counts[case, requests] - counts[case, 0]) / requests for case in CASES}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--before", type=Path, help="another checkout, counted first")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL"):
        print("set DATABASE_URL to the database to serve", file=sys.stderr)
        return 2
    if shutil.which("valgrind") is None:
        print("valgrind is needed (Debian: apt-get install valgrind)", file=sys.stderr)
        return 2
    checkouts = {"after": ROOT} if args.before is None else {
        "before": args.before.resolve(), "after": ROOT}
    report = {label: per_request(root, args.requests) for label, root in checkouts.items()}
    for label, cases in report.items():
        for case, instructions in cases.items():
            print(f"{label:<7} {case:<20} {instructions / 1e6:7.3f} million instructions "
                  "a request")
    if "before" in report:
        for case in CASES:
            print(f"after / before, {case}: "
                  f"{report['after'][case] / report['before'][case]:.3f}")
    if args.json:
        args.json.write_text(json.dumps({"requests": args.requests, **report}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
