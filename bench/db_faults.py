"""The service under gunicorn while its PostgreSQL hangs or its network flakes, with the
figures RELIABILITY.md quotes ("Hung and flaky databases").

hung: readers, posters and a /healthz poller run against gunicorn (gunicorn.conf.py) on a
private cluster (tests/pg_cluster.py); every process of the cluster (postmaster and
backends) is stopped with SIGSTOP for ``--stopped`` seconds, then continued. A stopped
server keeps its connections and its kernel still acknowledges TCP, so only the service's
own deadline notices.

flaky: the same service reaches its database through a relay (tests/tcp_proxy.py) that
cuts every connection every 0.3 s without telling the server (a dropped NAT flow) and once
freezes all traffic, while four clients post. Afterwards: how soon a post succeeds again,
and whether any backend is left idle in a transaction.

    python bench/db_faults.py hung               # the figures, as JSON
    python bench/db_faults.py hung --clients 10  # more clients than a worker's threads
    python bench/db_faults.py flaky
    python bench/db_faults.py hung --args="--worker-class sync"   # compare a gunicorn set-up

The tests (tests/test_db_faults.py) run the same pieces with assertions.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent.parent),
                str(Path(__file__).resolve().parent.parent / "tests")]

from pg_cluster import PgCluster  # noqa: E402

from harness.mixed_load import Load  # noqa: E402
from harness.servers import LIST, Answer, Gunicorn, prepare, request  # noqa: E402
from tcp_proxy import TcpProxy  # noqa: E402

IDLE_IN_TRANSACTION = ("SELECT count(*) FROM pg_stat_activity "
                       "WHERE state LIKE 'idle in transaction%%' AND datname = %s")


def cluster_pids(cluster: PgCluster) -> list[int]:
    """The postmaster and every process it started (backends, background workers)."""
    postmaster = int((cluster.data_dir / "postmaster.pid").read_text().split()[0])
    children = subprocess.run(["ps", "-o", "pid=", "--ppid", str(postmaster)],
                              capture_output=True, text=True).stdout.split()
    return [postmaster, *map(int, children)]


@contextmanager
def stopped(cluster: PgCluster):
    """Every process of the cluster stopped (SIGSTOP) inside, continued after."""
    pids = cluster_pids(cluster)
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in reversed(pids):
            os.kill(pid, signal.SIGCONT)


class Poller:
    """GET ``path`` every ``interval`` seconds until stopped; every answer is kept."""

    def __init__(self, base: str, path: str = "/healthz", interval: float = 0.1):
        self.base, self.path, self.interval = base, path, interval
        self.answers: list[Answer] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Poller:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.answers.append(request(self.base, "GET", self.path, kind="HEALTHZ",
                                        timeout=10))


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(share * len(ordered)) - 1)] if ordered else 0


def statuses(answers: list[Answer]) -> dict[str, int]:
    counted = Counter(f"{a.kind} {a.status or a.error.split(':')[0]}" for a in answers)
    return dict(sorted(counted.items()))


@dataclass
class Run:
    """What a fault run saw: every answer, the healthz answers, when the fault was, the
    service's log lines and the figures reported."""

    answers: list[Answer]
    health: list[Answer]
    fault: tuple[float, float]
    log: list[str]
    figures: dict


def hung(cluster: PgCluster, database: str, stopped_seconds: float = 10, threads: int = 4,
         post_share: float = 0.2, args: tuple[str, ...] = (), env: dict | None = None) -> Run:
    """Serve ``database`` of ``cluster`` under load, stop the whole cluster with SIGSTOP
    for ``stopped_seconds``, continue it, and let the load run on 8 s."""
    community = prepare(database, comments=500)
    with Gunicorn(database, env={"COMMENTSVC_RETRY_AFTER": "3", **(env or {})},
                  args=args) as server:
        health = Poller(server.base).start()
        load = Load(server.base, community, threads=threads, post_share=post_share)
        load.start()
        time.sleep(3)
        with stopped(cluster):
            fault = (time.monotonic(), time.monotonic() + stopped_seconds)
            time.sleep(stopped_seconds)
        back = time.monotonic()
        time.sleep(8)
        load.stop()
        health.stop()
        after = request(server.base, "GET", LIST)
        server.log.seek(0)
        log = server.log.read().decode("utf-8", "replace").splitlines()
    return Run(load.answers, health.answers, fault, log,
               figures(load.answers, health.answers, fault, back, log, after))


def figures(answers: list[Answer], health: list[Answer], fault: tuple[float, float],
            back: float, log: list[str], after: Answer) -> dict:
    """What RELIABILITY.md reports of a fault run."""
    start, end = fault
    during = [a for a in answers if a.started < end and a.started + a.elapsed > start]
    settled = [a for a in answers if a.started > back + 3]
    return {
        "requests": len(answers),
        "answers": statuses(answers),
        "during_fault": {"requests": len(during), "answers": statuses(during),
                         "p99_seconds": round(percentile([a.elapsed for a in during], .99), 3),
                         "max_seconds": round(max((a.elapsed for a in during), default=0), 3)},
        "healthz": {"requests": len(health), "answers": statuses(health),
                    "max_seconds": round(max((a.elapsed for a in health), default=0), 3),
                    "slowest_started_after_fault_began_seconds": round(max(
                        health, key=lambda a: a.elapsed).started - start, 3) if health else None},
        "after_3s_back": statuses(settled),
        "first_ok_after_back_seconds": round(min(
            (a.started + a.elapsed - back for a in answers
             if a.started > back and a.status in (200, 201, 204)), default=-1), 3),
        "read_after_run": after.status,
        "log_lines": len(log),
        "log_lines_not_json": sum(1 for line in log if not line.startswith("{")),
        "log_warnings": [line for line in log if '"WARNING"' in line and '"logger"' in line],
    }


def flaky(cluster: PgCluster, database: str, cut_every: float = 0.3,
          frozen_seconds: float = 6, posters: int = 4, args: tuple[str, ...] = (),
          env: dict | None = None) -> Run:
    """Serve ``database`` of ``cluster`` through a relay; while clients post, cut every
    connection silently each ``cut_every`` s for 2 s, freeze all traffic for
    ``frozen_seconds``, cut 2 s more; then post, one at a time, until a post succeeds."""
    name = database.rsplit("/", 1)[1]
    community = prepare(database, comments=200)
    proxy = TcpProxy("127.0.0.1", cluster.port)
    proxy.restore()
    relayed = database.replace(f":{cluster.port}/", f":{proxy.port}/")
    try:
        with Gunicorn(relayed, env={"COMMENTSVC_RETRY_AFTER": "3", **(env or {})},
                      args=args) as server:
            load = Load(server.base, community, threads=posters, post_share=1.0)
            load.start()
            time.sleep(1)
            faults_start = time.monotonic()
            proxy.cut_every(cut_every, silently=True)
            time.sleep(2)
            proxy.freeze()
            time.sleep(frozen_seconds)
            proxy.thaw()
            time.sleep(2)
            proxy.stop_cutting()
            faults_end = time.monotonic()
            load.stop()
            # One post at a time until one succeeds: how long writes stay blocked.
            token = next(iter(community.tokens.values()))
            content_type, object_id = community.targets[0]
            first_ok = None
            tries = Counter()
            while time.monotonic() - faults_end < 60:
                answer = request(server.base, "POST", LIST, {
                    "content_type": content_type, "object_id": object_id,
                    "body": "after the faults"}, token, kind="POST")
                tries[answer.status] += 1
                if answer.status == 201:
                    first_ok = time.monotonic() - faults_end
                    break
                time.sleep(0.2)
            time.sleep(1)
            idle = cluster.query(IDLE_IN_TRANSACTION, (name,))[0]
            server.log.seek(0)
            log = server.log.read().decode("utf-8", "replace").splitlines()
    finally:
        proxy.cut()
    return Run(load.answers, [], (faults_start, faults_end), log, {
        "posts_during_faults": statuses(load.answers),
        "first_post_ok_after_faults_seconds": round(first_ok, 3) if first_ok else None,
        "posts_until_then": dict(tries), "idle_in_transaction_after": idle,
        "log_lines": len(log),
        "log_lines_not_json": sum(1 for line in log if not line.startswith("{")),
        "log_warnings": [line for line in log if '"WARNING"' in line and '"logger"' in line]})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", choices=("hung", "flaky"))
    parser.add_argument("--stopped", type=float, default=10,
                        help="seconds the cluster stays stopped (hung)")
    parser.add_argument("--args", default="", help="more gunicorn options")
    parser.add_argument("--clients", type=int, default=4,
                        help="load client threads besides the /healthz poller (hung)")
    options = parser.parse_args()
    args = tuple(shlex.split(options.args))
    with PgCluster() as cluster:
        database = cluster.create_database(options.scenario)
        run = (hung(cluster, database, options.stopped, threads=options.clients, args=args)
               if options.scenario == "hung" else flaky(cluster, database, args=args))
    print(json.dumps(run.figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
