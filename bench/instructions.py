"""Instructions one request costs inside the process, counted by valgrind's callgrind: a
count that stays the same from run to run whatever else the machine is doing, where
times on a shared machine move by a tenth or more.

    DATABASE_URL=postgresql://... python bench/instructions.py [--requests 300]
        [--token KEY] [--before DIR] [--json FILE] [--only TEXT]

Each case (the service's page 1 with its response cache on, and off, random pages of the
whole site's list with the cache on (the same pages each run), its last page with the
cache off (on a big list, the page that holds the most replies), and given
``--token`` read signed in with the cache on, and a new comment posted by that key's
user, as bench/in_process.py calls them) runs in a
process of its own under callgrind twice: after its warm-up once with no request, once
with ``--requests`` more. The difference over ``--requests`` is the instructions a request
costs this process (the database's own work is another process's and is not counted).
``--before DIR`` counts another checkout of the service the same way, in the same run.
Needs valgrind.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Each case's mode: the service's response cache in MB, or "bare" (the bare Flask view with
# page 1's body, bench/bare_app.py) with the one statement it runs, if any.
CASES = {"page 1, cache on": "64", "page 1, cache off": "0", "random pages, cache on": "random",
         "last page, cache off": "last"}
SIGNED_IN = "page 1, signed in"
POSTED = "post, signed in"
YARDSTICKS = {"bare Flask view": "bare", "bare view + counter read": "bare:counter",
              "bare view + page read": "bare:page"}
WARM_UP = 30
# One case's requests: the service of the checkout given as the working directory, called
# by this checkout's bench/in_process.py (argv: mode, requests, key, that file); a bare
# case serves the body of the service's page 1 from this checkout's bench/bare_app.py.
_RUN = """
import importlib.util, os, sys
spec = importlib.util.spec_from_file_location("in_process", sys.argv[4])
in_process = importlib.util.module_from_spec(spec)
spec.loader.exec_module(in_process)
sys.path.insert(0, os.getcwd())  # the checkout's service, not the one beside that file
mode = sys.argv[1]
if mode == "post":
    call = in_process.poster(in_process.service_app(64), sys.argv[3])
elif mode == "random":
    call = in_process.random_pager(in_process.service_app(64))
elif mode == "last":
    call = in_process.caller(in_process.service_app(0), query="page=last")
elif mode.startswith("bare"):
    body = in_process.caller(in_process.service_app(64))()
    call = in_process.caller(in_process.bare_app(body, mode.partition(":")[2] or None))
else:
    call = in_process.caller(in_process.service_app(int(mode)), sys.argv[3] or None)
sys.stderr = open(os.devnull, "w")
for _ in range(int(sys.argv[2])):
    call()
"""


def count(root: Path, mode: str, requests: int, token: str = "") -> int:
    """Instructions a process of checkout ``root`` executes for ``requests`` requests of
    the case ``mode`` (signed in by ``token`` if given), start-up included."""
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
         sys.executable, "-c", _RUN, mode, str(requests), token,
         str(ROOT / "bench" / "in_process.py")],
        cwd=root, env={**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(root)},
        capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", out.stderr)
    if found is None:
        raise RuntimeError(f"callgrind printed no count:\n{out.stderr[-2000:]}")
    return int(found.group(1))


def cases(token: str, yardsticks: bool = False) -> dict[str, tuple[str, str]]:
    """Each case's (mode, sign-in key or "")."""
    measured = {case: (mode, "") for case, mode in CASES.items()}
    if token:
        measured[SIGNED_IN] = (CASES["page 1, cache on"], token)
        measured[POSTED] = ("post", token)
    if yardsticks:
        measured |= {case: (mode, "") for case, mode in YARDSTICKS.items()}
    return measured


def per_request(root: Path, requests: int, token: str = "", yardsticks: bool = False,
                counter: Callable[..., int] = count, only: str = "") -> dict[str, float]:
    """Each case's instructions a request, for checkout ``root`` (two runs at a time);
    only the cases whose name holds ``only``."""
    measured = {case: run for case, run in cases(token, yardsticks).items() if only in case}
    runs = {(case, n): (root, mode, WARM_UP + n, key)
            for case, (mode, key) in measured.items() for n in (0, requests)}
    with ThreadPoolExecutor(max_workers=2) as pool:
        counts = dict(zip(runs, pool.map(lambda args: counter(*args), runs.values()),
                          strict=True))
    return {case: (counts[case, requests] - counts[case, 0]) / requests for case in measured}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--token", default="", help="a sign-in key (flask create-token): "
                                                    "page 1 is also read signed in")
    parser.add_argument("--bare", action="store_true",
                        help="also count the yardsticks: the bare view, alone and with the "
                             "counter read or the page read (this checkout only)")
    parser.add_argument("--before", type=Path, help="another checkout, counted first")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--only", default="",
                        help="count only the cases whose name holds this text (post)")
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL"):
        print("set DATABASE_URL to the database to serve", file=sys.stderr)
        return 2
    if shutil.which("valgrind") is None:
        print("valgrind is needed (Debian: apt-get install valgrind)", file=sys.stderr)
        return 2
    checkouts = {"after": ROOT} if args.before is None else {
        "before": args.before.resolve(), "after": ROOT}
    report = {label: per_request(root, args.requests, args.token,
                                 args.bare and label == "after", only=args.only)
              for label, root in checkouts.items()}
    for label, cases in report.items():
        for case, instructions in cases.items():
            print(f"{label:<7} {case:<20} {instructions / 1e6:7.3f} million instructions "
                  "a request")
    if args.bare and not args.only:
        for case in (*CASES, SIGNED_IN) if args.token else CASES:
            print(f"after, {case} / bare Flask view: "
                  f"{report['after'][case] / report['after']['bare Flask view']:.2f}")
    if "before" in report:
        for case in report["before"]:
            print(f"after / before, {case}: "
                  f"{report['after'][case] / report['before'][case]:.3f}")
    if args.json:
        args.json.write_text(json.dumps({"requests": args.requests, **report}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
