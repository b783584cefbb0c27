"""Posts retried with an Idempotency-Key under injected faults are stored exactly once.

The service runs under gunicorn (two sync workers) on a private PostgreSQL cluster of its
own (tests/pg_cluster.py), reached through a loopback TCP proxy (tests/tcp_proxy.py).
Client threads post comments, each with a unique marker in its body and a key of its
own, and retry a post with the same key until it is answered 201: after no answer at
all (a reset connection), a 5xx or a 409. Meanwhile a fault thread injects, at random
moments:

- ``connections_cut``: every connection between the service and the database is broken
  and new ones refused, for 0 to 200 ms (a network cut, also after a COMMIT was sent and
  before its reply came back);
- ``worker_killed``: a gunicorn worker gets SIGKILL, often in the middle of a request;
- ``database_stopped``: the cluster stops (``immediate``: a crash, or ``fast``) and starts
  again.

When the faults are done, the clients finish their retries on a healthy service, and
each marker is counted in SQL: a duplicate is a marker stored more than once, a lost
post one that was tried and is not stored. Both must be 0 (exit status 1 otherwise).

    python bench/retry_faults.py --faults 1000        # prints the report; --json FILE too
    python bench/retry_faults.py --faults 200 --no-keys  # the same without keys: duplicates

Loopback only, free ports only, bounded by ``--max-seconds``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import signal
import sys
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
from pg_cluster import PgCluster  # noqa: E402

from harness.servers import Gunicorn, prepare  # noqa: E402
from tcp_proxy import TcpProxy  # noqa: E402

LIST = "/api/comments/"
MARK = "retry-fault"
KINDS = ("connections_cut", "worker_killed", "database_stopped")
DEFAULT_WEIGHTS = (0.6, 0.3, 0.1)


@dataclass
class Tally:
    """What the run did, shared by the threads (under ``lock``)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    tried: dict[str, str] = field(default_factory=dict)  # marker -> key
    ids: dict[str, set[int]] = field(default_factory=dict)  # marker -> ids answered 201
    statuses: Counter = field(default_factory=Counter)
    faults: Counter = field(default_factory=Counter)
    retries: int = 0
    replayed: int = 0
    unfinished: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)


def send(port: int, token: str, body: dict, key: str | None,
         timeout: float = 15) -> tuple[int, dict, bytes]:
    """One POST on a new connection: (status, headers, body); status 0 when no answer."""
    headers = {"Connection": "close", "Accept": "application/json",
               "Content-Type": "application/json", "Authorization": f"Token {token}"}
    if key is not None:
        headers["Idempotency-Key"] = key
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", LIST, body=json.dumps(body).encode(), headers=headers)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    except (OSError, http.client.HTTPException):
        return 0, {}, b""
    finally:
        conn.close()


def client(n: int, port: int, tokens: list[str], targets: list[tuple[str, int]],
           tally: Tally, stop: threading.Event, use_keys: bool, deadline: float) -> None:
    """Post one comment after another, each retried with its key until it is 201."""
    rng = random.Random(n)
    token = tokens[n % len(tokens)]
    while not stop.is_set():
        marker = f"{MARK} {uuid.uuid4().hex}"
        key = str(uuid.uuid4()) if use_keys else None
        content_type, object_id = rng.choice(targets)
        body = {"content_type": content_type, "object_id": object_id, "body": marker}
        with tally.lock:
            tally.tried[marker] = key or ""
        attempt = 0
        while True:
            status, headers, data = send(port, token, body, key)
            with tally.lock:
                tally.statuses[status] += 1
                if attempt:
                    tally.retries += 1
            attempt += 1
            if status == 201:
                with tally.lock:
                    tally.ids.setdefault(marker, set()).add(json.loads(data)["id"])
                    tally.replayed += headers.get("Idempotent-Replayed") == "true"
                break
            if status not in (0, 409) and status < 500:
                with tally.lock:
                    tally.unexpected.append(f"{status} {data[:200]!r}")
                break
            if time.monotonic() > deadline:
                with tally.lock:
                    tally.unfinished.append(marker)
                return
            time.sleep(0.05 + rng.random() * 0.1)






def inject(kind: str, rng: random.Random, proxy: TcpProxy, cluster: PgCluster,
           server: Gunicorn) -> bool:
    """One fault of ``kind``; False when it could not be injected now."""
    if kind == "connections_cut":
        proxy.cut()
        time.sleep(rng.random() * 0.2)
        proxy.restore()
    elif kind == "worker_killed":
        workers = server.workers()
        if len(workers) < 2:  # let the master replace the last one first
            return False
        try:
            os.kill(rng.choice(sorted(workers)), signal.SIGKILL)
        except ProcessLookupError:
            return False
    else:
        cluster.stop(rng.choice(("immediate", "fast")))
        time.sleep(rng.random() * 0.3)
        cluster.start()
    return True


def faults(count: int, weights: tuple[float, ...], proxy: TcpProxy, cluster: PgCluster,
           server: Gunicorn, tally: Tally, deadline: float, seed: int) -> None:
    """Inject ``count`` faults at random moments (0 to 150 ms apart), or until the deadline."""
    rng = random.Random(seed)
    done = 0
    while done < count and time.monotonic() < deadline:
        time.sleep(rng.random() * 0.15)
        kind = rng.choices(KINDS, weights)[0]
        if inject(kind, rng, proxy, cluster, server):
            done += 1
            with tally.lock:
                tally.faults[kind] += 1
        else:
            time.sleep(0.05)


def race(port: int, token: str, target: tuple[str, int], rounds: int,
         senders: int = 8) -> dict:
    """``rounds`` times, ``senders`` threads send one post with one key at the same moment
    (before any fault): how they were answered, and the slowest answer."""
    statuses: Counter = Counter()
    replayed = 0
    ids: list[set[int]] = []
    slowest = 0.0
    lock = threading.Lock()
    for _ in range(rounds):
        key, marker = str(uuid.uuid4()), f"{MARK} race {uuid.uuid4().hex}"
        body = {"content_type": target[0], "object_id": target[1], "body": marker}
        barrier = threading.Barrier(senders)
        seen: set[int] = set()

        def one(barrier: threading.Barrier, body: dict, key: str, seen: set[int]) -> None:
            nonlocal replayed, slowest
            barrier.wait()
            started = time.monotonic()
            status, headers, data = send(port, token, body, key)
            with lock:
                slowest = max(slowest, time.monotonic() - started)
                statuses[status] += 1
                replayed += headers.get("Idempotent-Replayed") == "true"
                if status == 201:
                    seen.add(json.loads(data)["id"])

        threads = [threading.Thread(target=one, args=(barrier, body, key, seen))
                   for _ in range(senders)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        ids.append(seen)
    return {"rounds": rounds, "senders_per_round": senders,
            "answers_by_status": {str(s): n for s, n in sorted(statuses.items())},
            "replayed": replayed, "one_id_per_round": all(len(s) == 1 for s in ids),
            "slowest_ms": round(slowest * 1000, 1)}


def count_markers(database_url: str) -> Counter:
    engine = sa.create_engine(database_url)
    try:
        with engine.connect() as conn:
            return Counter(body for (body,) in conn.execute(sa.text(
                "SELECT body FROM commentsvc_comment WHERE body LIKE :mark"),
                {"mark": f"{MARK} %"}))
    finally:
        engine.dispose()


def run(faults_wanted: int = 1000, clients: int = 6, weights=DEFAULT_WEIGHTS,
        max_seconds: float = 900, use_keys: bool = True, seed: int = 1,
        race_rounds: int = 50) -> dict:
    """The whole experiment; the report as a dict."""
    started = time.monotonic()
    with PgCluster() as cluster:
        direct = cluster.create_database(f"retry_{uuid.uuid4().hex[:8]}")
        community = prepare(direct, comments=200, targets=10, posters=clients)
        proxy = TcpProxy("127.0.0.1", cluster.port)
        proxy.restore()
        via_proxy = direct.replace(f":{cluster.port}/", f":{proxy.port}/")
        env = {"COMMENTSVC_DB_CONNECT_TIMEOUT": "2", "COMMENTSVC_RETRY_AFTER": "1"}
        tally = Tally()
        stop = threading.Event()
        with Gunicorn(via_proxy, env=env) as server:
            raced = race(server.port, next(iter(community.tokens.values())),
                         community.targets[0], race_rounds)
            fault_deadline = started + max_seconds * 0.8
            threads = [threading.Thread(
                target=client, args=(n, server.port, list(community.tokens.values()),
                                     community.targets, tally, stop, use_keys,
                                     started + max_seconds), daemon=True)
                for n in range(clients)]
            for thread in threads:
                thread.start()
            faults(faults_wanted, weights, proxy, cluster, server, tally, fault_deadline,
                   seed)
            stop.set()  # each client finishes the post in hand, retrying on a healthy service
            for thread in threads:
                thread.join(timeout=max(1.0, started + max_seconds + 30 - time.monotonic()))
        proxy.cut()
        stored = count_markers(direct)
    tried = tally.tried
    race_duplicates = sum(n - 1 for marker, n in stored.items()
                          if n > 1 and marker.startswith(f"{MARK} race "))
    duplicates = sum(n - 1 for marker, n in stored.items() if n > 1)
    lost = sum(1 for marker in tried if stored[marker] == 0
               and marker not in tally.unfinished)
    answered_ids_agree = all(len(ids) == 1 for ids in tally.ids.values())
    return {
        "idempotency_keys": use_keys,
        "seconds": round(time.monotonic() - started, 1),
        "posts_tried": len(tried),
        "posts_answered_201": len(tally.ids),
        "faults_injected": sum(tally.faults.values()),
        "faults_by_kind": {kind: tally.faults[kind] for kind in KINDS},
        "retries": tally.retries,
        "replayed_answers": tally.replayed,
        "answers_by_status": {("no answer" if s == 0 else str(s)): n
                              for s, n in sorted(tally.statuses.items())},
        "duplicates": duplicates,
        "lost": lost,
        "unfinished": len(tally.unfinished),
        "unexpected_answers": tally.unexpected[:10],
        "one_id_per_post": answered_ids_agree,
        "same_key_at_once": {**raced, "duplicates": race_duplicates},
    }


def passed(report: dict) -> bool:
    return (report["duplicates"] == 0 and report["lost"] == 0 and not report["unfinished"]
            and not report["unexpected_answers"] and report["one_id_per_post"]
            and report["same_key_at_once"]["one_id_per_round"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--faults", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=6)
    parser.add_argument("--max-seconds", type=float, default=900,
                        help="Hard bound on the run (faults stop at 80%% of it).")
    parser.add_argument("--weights", default=",".join(map(str, DEFAULT_WEIGHTS)),
                        help="Shares of connections_cut, worker_killed, database_stopped.")
    parser.add_argument("--no-keys", action="store_true",
                        help="Retry without Idempotency-Key (shows the duplicates it prevents).")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", help="Also write the report to this file.")
    args = parser.parse_args()
    weights = tuple(float(w) for w in args.weights.split(","))
    report = run(args.faults, args.clients, weights, args.max_seconds, not args.no_keys,
                 args.seed)
    for name, value in report.items():
        print(f"{name.replace('_', ' ')}: {value}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0 if passed(report) or args.no_keys else 1


if __name__ == "__main__":
    sys.exit(main())
