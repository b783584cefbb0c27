"""Writes per second through the service, the number a site's write capacity rests on.

On a fresh database of the local PostgreSQL server (dropped afterwards), seeded through
the CLI, under gunicorn (gunicorn.conf.py: 2 workers of 8 threads, no posting limit), K
clients write for ``--duration`` seconds each, for K in ``--clients`` (1, 2, 4, 8, 16).
Each client is one keep-alive HTTP connection, as a site's back end keeps them, and sends
the next write when the last is answered: seven in ten a new comment on a random target,
two in ten a reply to one of the comments written so far, one in ten a DELETE of one of
its own earlier comments. Then page 1 of the site's list is read by 8 clients, alone and
while 8 writers write, for the ratio of the two. The readers run in a process of their
own, so that they never wait for the writers' share of this one's Python (the writers'
client takes about a third of a core at 1,000 writes a second).

``--front`` serves each checkout as production does, with its own `commentsvc serve`
(nginx in front of gunicorn, and for a checkout that has one, the writers' gunicorn at a
lower CPU priority: operations.serving) instead of gunicorn alone.

Each step also reports how the site's one writers' lock was used, from the service's
/metrics (its workers' figures shared): the share of the step's time it was held, and per
writers' transaction the milliseconds it was held and waited for and the writes it took.

Afterwards every list is walked and must be exact: every position of the whole site's
list, of each kind's and of each target's runs 1..n in (date, id) order with its counter
row saying n, every target's pages (over HTTP) hold exactly its comments newest first,
every 201 is stored once and every 204 left its comment deleted.

``--ahead`` first adds to each database one comment dated a day ahead of the clock (as
an import or another node's clock may), so that every post is placed below it, one at a
time (storage.posting).

``--before DIR`` measures another checkout (an earlier commit) the same way in the same
run, served at the same time on its own database seeded alike; the write steps take turns
(each number of clients on both checkouts before the next), so that a drift of the
machine meets both alike. ``--rounds N`` runs every write step N times (the checkouts'
order swapped every other round) and reports each figure's median, the rounds kept
beside it. ``--chart PNG`` draws writes a second and p99 by clients (matplotlib).

    .venv/bin/python bench/write_bench.py [--duration 8] [--comments 100000]
        [--clients 1,2,4,8,16] [--before DIR] [--rounds 1] [--front] [--ahead] [--json FILE]
        [--chart bench/results/writes.png]
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from commentsvc.storage.database_urls import normalise_url  # noqa: E402
from harness.servers import LIST, free_port, prepare, scratch_database  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
GUNICORN = str(Path(sys.executable).parent / "gunicorn")
ADMIN_URL = normalise_url(os.environ.get(
    "BENCH_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres"))
RESULTS = Path(__file__).resolve().parent / "results" / "writes.json"
READERS = 8


class Client:
    """One keep-alive connection to the service; ``send`` never raises."""

    def __init__(self, base: str, token: str | None = None):
        host, port = base.removeprefix("http://").split(":")
        self.conn = http.client.HTTPConnection(host, int(port), timeout=30)
        self.headers = {"Accept": "application/json", "Content-Type": "application/json",
                        "User-Agent": f"write-bench/{os.getpid()}"}  # which process asked
        if token:
            self.headers["Authorization"] = f"Token {token}"

    def send(self, method: str, path: str, body: dict | None = None
             ) -> tuple[int, float, bytes]:
        """(status, seconds, body); status 0 when the connection failed."""
        started = time.monotonic()
        for attempt in (1, 2):  # a keep-alive connection the server closed: once more
            try:
                self.conn.request(method, path, body=None if body is None else json.dumps(
                    body).encode(), headers=self.headers)
                response = self.conn.getresponse()
                data = response.read()
                return response.status, time.monotonic() - started, data
            except (OSError, http.client.HTTPException):
                self.conn.close()
                if attempt == 2:
                    return 0, time.monotonic() - started, b""
        raise AssertionError("unreachable")


class Writers:
    """The write mix of every client, and what it wrote (for the checks afterwards)."""

    def __init__(self, base: str, tokens: dict[int, str], targets: list, marker: str,
                 replies: float = 0.2, deletes: float = 0.1):
        self.base, self.tokens, self.targets, self.marker = base, tokens, targets, marker
        self.replies, self.deletes = replies, deletes
        self.roots: list[tuple[str, int, int]] = []  # comments replies can answer
        self.created: list[int] = []
        self.deleted: list[int] = []
        self.lock = threading.Lock()

    def client(self, n: int, seconds: float, answers: list) -> None:
        rng = random.Random(n)
        user = list(self.tokens)[n % len(self.tokens)]
        client = Client(self.base, self.tokens[user])
        mine: list[int] = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            roll = rng.random()
            if roll < self.deletes and mine:
                comment_id = mine.pop(rng.randrange(len(mine)))
                status, elapsed, _ = client.send("DELETE", f"{LIST}{comment_id}/")
                with self.lock:
                    answers.append(("delete", status, elapsed))
                    if status == 204:
                        self.deleted.append(comment_id)
                        self.roots = [root for root in self.roots if root[2] != comment_id]
                continue
            body = {"body": f"{self.marker} {uuid.uuid4().hex}"}
            with self.lock:
                parent = (rng.choice(self.roots) if self.roots
                          and roll < self.deletes + self.replies else None)
            if parent is not None:
                body["content_type"], body["object_id"], body["parent"] = parent
            else:
                body["content_type"], body["object_id"] = rng.choice(self.targets)
            status, elapsed, data = client.send("POST", LIST, body)
            with self.lock:
                answers.append(("reply" if parent else "post", status, elapsed))
                if status == 201:
                    comment_id = json.loads(data)["id"]
                    self.created.append(comment_id)
                    mine.append(comment_id)
                    if parent is None and len(self.roots) < 1000:
                        self.roots.append((body["content_type"], body["object_id"],
                                           comment_id))

    def run(self, clients: int, seconds: float) -> list[tuple[str, int, float]]:
        answers: list[tuple[str, int, float]] = []
        threads = [threading.Thread(target=self.client, args=(n, seconds, answers))
                   for n in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return answers


def read_page1(base: str, clients: int, seconds: float) -> list[tuple[str, int, float]]:
    """``clients`` readers of page 1 of the site's list for ``seconds``."""
    answers: list[tuple[str, int, float]] = []
    lock = threading.Lock()

    def reader() -> None:
        client = Client(base)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            status, elapsed, _ = client.send("GET", LIST)
            with lock:
                answers.append(("read", status, elapsed))

    threads = [threading.Thread(target=reader) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def reads_alone_and_under_writes(base: str, writers: Writers, seconds: float) -> tuple[
        list[tuple[str, int, float]], list[tuple[str, int, float]],
        list[tuple[str, int, float]]]:
    """Page 1 read by READERS clients for ``seconds`` alone, then again while 8 of
    ``writers`` write: the answers of both reads and of the writes. The readers run in a
    process of their own, started before either read."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as apart:
        apart.submit(int).result()  # its process started, this module imported: ready
        alone = apart.submit(read_page1, base, READERS, seconds).result()
        during = apart.submit(read_page1, base, READERS, seconds)
        written = writers.run(8, seconds)
        return alone, during.result(), written


def summary(answers: list[tuple[str, int, float]], seconds: float) -> dict:
    """Successful requests a second (and per kind), p50 and p99 of all, the failures."""
    ok = [(kind, elapsed) for kind, status, elapsed in answers if status in (200, 201, 204)]
    times = sorted(elapsed * 1000 for _, _, elapsed in answers) or [0.0]
    kinds = sorted({kind for kind, _, _ in answers})
    return {
        "per_second": round(len(ok) / seconds, 1),
        "by_kind_per_second": {kind: round(sum(1 for k, _ in ok if k == kind) / seconds, 1)
                               for kind in kinds},
        "p50_ms": round(statistics.median(times), 2),
        "p99_ms": round(times[max(0, int(len(times) * 0.99) - 1)], 2),
        "errors": len(answers) - len(ok),
        "error_statuses": {str(status): sum(1 for _, s, _ in answers if s == status)
                           for status in sorted({s for _, s, _ in answers})
                           if status not in (200, 201, 204)},
    }


# The writers' lock histograms of /metrics (operations.metrics), by what they measure.
LOCK_FAMILIES = {"waited": "commentsvc_writers_lock_wait_seconds",
                 "held": "commentsvc_writers_lock_held_seconds"}


def lock_totals(metrics_text: str) -> dict[str, float] | None:
    """From /metrics: writers' transactions, and the seconds they waited for the lock and
    held it, all told; None from a service that does not time its lock."""
    sums: dict[str, float] = {}
    for family in text_string_to_metric_families(metrics_text):
        for what, name in LOCK_FAMILIES.items():
            if family.name == name:
                for sample in family.samples:
                    if sample.name == f"{name}_sum":
                        sums[what] = sample.value
                    elif sample.name == f"{name}_count":
                        sums["transactions"] = sample.value
    return sums if len(sums) == 3 else None


def lock_use(before: dict[str, float] | None, after: dict[str, float] | None,
             writes: int, seconds: float) -> dict[str, float] | None:
    """How the site's one writers' lock was used between two readings of ``lock_totals``
    while ``writes`` writes were answered in ``seconds``: the share of the time it was
    held, and per transaction the milliseconds it was held and waited for, and writes."""
    if before is None or after is None or after["transactions"] == before["transactions"]:
        return None
    transactions = after["transactions"] - before["transactions"]
    held, waited = after["held"] - before["held"], after["waited"] - before["waited"]
    return {"held_share": round(held / seconds, 3),
            "held_ms_a_transaction": round(held / transactions * 1000, 2),
            "waited_ms_a_transaction": round(waited / transactions * 1000, 2),
            "writes_a_transaction": round(writes / transactions, 2)}


def read_lock_totals(base: str) -> dict[str, float] | None:
    status, _, body = Client(base).send("GET", "/metrics")
    return lock_totals(body.decode("utf-8")) if status == 200 else None


@contextmanager
def service(root: Path, database_url: str, workers: int = 2, front: bool = False):
    """gunicorn serving the checkout ``root`` (its gunicorn.conf.py, ``workers`` workers),
    or with ``front`` that checkout's `commentsvc serve` (``workers`` for its reads), its
    workers' metrics shared (PROMETHEUS_MULTIPROC_DIR), so /metrics adds them up."""
    port = free_port()
    log = open(os.devnull, "wb")  # noqa: SIM115 - closed below
    shared_metrics = tempfile.TemporaryDirectory(prefix="write-bench-metrics-")
    runtime = tempfile.TemporaryDirectory(prefix="write-bench-serve-")
    Path(runtime.name).chmod(0o711)  # as root, nginx's workers (nobody) reach the sockets
    command = ([sys.executable, "-m", "commentsvc.operations.serving", "--host", "127.0.0.1",
                "--port", str(port), "--workers", str(workers),
                "--runtime-dir", str(Path(runtime.name) / "run")] if front else
               [GUNICORN, "--config", str(root / "gunicorn.conf.py"), "--bind",
                f"127.0.0.1:{port}", "--workers", str(workers), "--log-level", "warning",
                "wsgi:app"])
    process = subprocess.Popen(
        command, cwd=root, stdout=log, stderr=log,
        env={**os.environ, "DATABASE_URL": database_url, "COMMENTSVC_POST_RATE_LIMIT": "",
             "PYTHONPATH": str(root), "PROMETHEUS_MULTIPROC_DIR": shared_metrics.name})
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while Client(base).send("GET", LIST)[0] != 200:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the service in {root} did not start")
            time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=60)
        log.close()
        shared_metrics.cleanup()
        runtime.cleanup()


@dataclass
class Checkout:
    """One checkout being measured: its served address, its database and its writers."""

    label: str
    database_url: str
    base: str
    writers: Writers


def write_step(checkout: Checkout, clients: int, seconds: float) -> dict:
    """``clients`` writers for ``seconds`` against one checkout: ``summary`` and how the
    writers' lock was used meanwhile."""
    held_before = read_lock_totals(checkout.base)
    answers = checkout.writers.run(clients, seconds)
    step = summary(answers, seconds)
    step["writers_lock"] = lock_use(held_before, read_lock_totals(checkout.base),
                                    len(answers), seconds)
    return step


def median_step(rounds: list[dict]) -> dict:
    """One step's figures over its rounds: the median of each rate, time and lock figure
    (the round whose writes a second is the median is not picked whole: each figure is
    its own median), the failures of every round added up."""
    def median(values: list[float]) -> float:
        return round(statistics.median(values), 3)

    kinds = sorted({kind for step in rounds for kind in step["by_kind_per_second"]})
    statuses = sorted({status for step in rounds for status in step["error_statuses"]})
    locks = [step["writers_lock"] for step in rounds if step.get("writers_lock")]
    return {
        "per_second": median([step["per_second"] for step in rounds]),
        "by_kind_per_second": {kind: median([step["by_kind_per_second"].get(kind, 0.0)
                                             for step in rounds]) for kind in kinds},
        "p50_ms": median([step["p50_ms"] for step in rounds]),
        "p99_ms": median([step["p99_ms"] for step in rounds]),
        "errors": sum(step["errors"] for step in rounds),
        "error_statuses": {status: sum(step["error_statuses"].get(status, 0)
                                       for step in rounds) for status in statuses},
        "writers_lock": ({name: median([lock[name] for lock in locks]) for name in locks[0]}
                         if len(locks) == len(rounds) else None),
        "rounds": len(rounds),
    }


def finish(checkout: Checkout, write_rounds: dict[int, list[dict]],
           seconds: float) -> dict:
    """A checkout's report: each step's median over its rounds (and the rounds), page 1
    read alone and under 8 writers, then its checks."""
    base, writers = checkout.base, checkout.writers
    results: dict = {"writes": {clients: median_step(rounds)
                                for clients, rounds in write_rounds.items()}}
    if any(len(rounds) > 1 for rounds in write_rounds.values()):
        results["write_rounds"] = write_rounds
    alone_answers, during_answers, written = reads_alone_and_under_writes(
        base, writers, seconds)
    alone = summary(alone_answers, seconds)
    reads_during = summary(during_answers, seconds)
    under_load = summary(written, seconds)
    results["reads_page1"] = {
        "alone": alone, "during_8_writers": reads_during, "writes_meanwhile": under_load,
        "ratio": round(reads_during["per_second"] / alone["per_second"], 3)}
    print(f"  {checkout.label}: page 1 reads alone {alone['per_second']}/s, during writes "
          f"{reads_during['per_second']}/s (ratio {results['reads_page1']['ratio']})",
          flush=True)
    results["checks"] = check(checkout.database_url, base, writers)
    print(f"  {checkout.label}: checks: {results['checks']}", flush=True)
    return results


def measure(checkouts: list[Checkout], clients: list[int], seconds: float,
            rounds: int) -> dict[str, dict]:
    """Every figure of each checkout. The write steps take turns: each number of clients
    is run on every checkout before the next (in turn, the first checkout first in odd
    rounds and last in even ones), so a drift of the machine meets them alike; then each
    checkout's reads and checks."""
    steps: dict[str, dict[int, list[dict]]] = {
        checkout.label: {n: [] for n in clients} for checkout in checkouts}
    for number in range(rounds):
        for n in clients:
            for checkout in (checkouts if number % 2 == 0 else checkouts[::-1]):
                step = write_step(checkout, n, seconds)
                steps[checkout.label][n].append(step)
                print(f"  {checkout.label}, round {number + 1}, {n:>2} clients: {step}",
                      flush=True)
    return {checkout.label: finish(checkout, steps[checkout.label], seconds)
            for checkout in checkouts}


def check(database_url: str, base: str, writers: Writers) -> dict:
    """Every list exact, every 201 stored once, every 204 deleted (see the docstring)."""
    engine = sa.create_engine(normalise_url(database_url))
    try:
        with engine.connect() as conn:
            bad_positions = conn.execute(sa.text("""
                SELECT count(*) FROM (
                    SELECT site_pos, kind_pos, target_pos,
                           ROW_NUMBER() OVER (ORDER BY date_added, id) AS s,
                           ROW_NUMBER() OVER (PARTITION BY content_type
                                              ORDER BY date_added, id) AS k,
                           ROW_NUMBER() OVER (PARTITION BY content_type, object_id
                                              ORDER BY date_added, id) AS t
                    FROM commentsvc_comment) AS numbered
                WHERE site_pos <> s OR kind_pos <> k OR target_pos <> t
            """)).scalar_one()
            bad_counts = conn.execute(sa.text("""
                SELECT count(*) FROM (
                    SELECT 'site' AS list_key, count(*) AS n FROM commentsvc_comment
                    UNION ALL SELECT 'kind:' || content_type, count(*)
                    FROM commentsvc_comment GROUP BY content_type
                    UNION ALL SELECT 'target:' || content_type || ':' || object_id, count(*)
                    FROM commentsvc_comment GROUP BY content_type, object_id) AS counted
                FULL JOIN commentsvc_list_count AS c USING (list_key)
                WHERE counted.n IS DISTINCT FROM c.n
            """)).scalar_one()
            stored = conn.execute(sa.text(
                "SELECT count(*), count(DISTINCT body) FROM commentsvc_comment "
                "WHERE body LIKE :m"), {"m": writers.marker + " %"}).one()
            not_deleted = conn.execute(sa.text(
                "SELECT count(*) FROM commentsvc_comment WHERE id IN :ids "
                "AND NOT is_deleted").bindparams(sa.bindparam("ids", expanding=True)),
                {"ids": writers.deleted or [0]}).scalar_one()
            deleted_kept = len(writers.deleted)
            targets = conn.execute(sa.text(
                "SELECT content_type, object_id, array_agg(id ORDER BY date_added DESC, "
                "id DESC) FROM commentsvc_comment GROUP BY content_type, object_id")).all()
    finally:
        engine.dispose()
    pages_wrong = sum(1 for content_type, object_id, ids in targets
                      if walk(base, content_type, object_id) != list(ids))
    created = len(writers.created)
    # deleted comments keep their row (body ""), so they no longer carry the marker
    stored_once = stored[0] + deleted_kept == created and stored[1] == stored[0]
    return {"positions_wrong": bad_positions, "counts_wrong": bad_counts,
            "targets_walked": len(targets), "target_lists_wrong": pages_wrong,
            "posts_201": created, "deletes_204": deleted_kept,
            "stored_once": stored_once, "deleted_not_deleted": not_deleted,
            "exact": bad_positions == 0 and bad_counts == 0 and pages_wrong == 0
            and stored_once and not_deleted == 0}


def date_one_ahead(database_url: str, target: tuple[str, int], author_id: int) -> None:
    """Add one comment on ``target`` dated a day ahead of the clock, at its place in its
    lists (this checkout's store.add_comment)."""
    from datetime import UTC, datetime, timedelta

    from commentsvc.standalone import create_app
    from commentsvc.storage import engine, store

    app = create_app({"COMMENTSVC_DATABASE_URL": database_url})
    with app.app_context():
        with engine.writing(engine.get_engine()) as conn:
            store.add_comment(conn, store.NewComment(
                target[0], target[1], author_id, "dated ahead of the clock",
                date_added=datetime.now(UTC).replace(tzinfo=None) + timedelta(days=1)))
        engine.get_engine().dispose()


def walk(base: str, content_type: str, object_id: int) -> list[int]:
    """The ids of one target's list, page by page over HTTP, as served."""
    client, ids, url = Client(base), [], f"{LIST}?content_type={content_type}&object_id={object_id}"
    while url:
        status, _, data = client.send("GET", url)
        if status != 200:
            return []
        page = json.loads(data)
        ids.extend(entry["id"] for entry in page["results"])
        following = page["p8n"]["next_url"]
        url = "/" + following.split("://", 1)[1].split("/", 1)[1] if following else ""
    return ids


def chart_title(report: dict) -> str:
    """The chart's title: how the service was served, on how many comments, how long."""
    served = ("through the front (commentsvc serve)" if report.get("front")
              else "under gunicorn alone")
    return (f"Writes through HTTP {served}, {report['comments']:,} comments seeded, "
            f"{report['duration_s']:g} s per step")


def chart(report: dict, path: Path) -> None:
    """Writes a second and p99 by clients, each checkout a line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (rate, p99) = plt.subplots(1, 2, figsize=(11, 4))
    for label, results in report["runs"].items():
        clients = [int(k) for k in results["writes"]]
        rate.plot(clients, [v["per_second"] for v in results["writes"].values()], "o-",
                  label=label)
        p99.plot(clients, [v["p99_ms"] for v in results["writes"].values()], "o-",
                 label=label)
    rate.axhline(1000, color="grey", linestyle=":", linewidth=1, label="goal: 1,000")
    p99.axhline(25, color="grey", linestyle=":", linewidth=1, label="goal: 25 ms")
    for axes, title in ((rate, "writes a second (posts, replies, deletes)"),
                        (p99, "p99 latency (ms)")):
        axes.set_xscale("log", base=2)
        axes.set_xticks(clients, [str(c) for c in clients])
        axes.set_xlabel("clients")
        axes.set_title(title)
        axes.grid(alpha=0.3)
        axes.legend()
    figure.suptitle(chart_title(report))
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=8)
    parser.add_argument("--comments", type=int, default=100_000)
    parser.add_argument("--clients", default="1,2,4,8,16")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers")
    parser.add_argument("--replies", type=float, default=0.2, help="share of replies")
    parser.add_argument("--deletes", type=float, default=0.1, help="share of deletes")
    parser.add_argument("--before", type=Path, help="another checkout, measured in turn")
    parser.add_argument("--rounds", type=int, default=1,
                        help="run every step this many times; medians are reported")
    parser.add_argument("--chart", type=Path, help="draw the figures into this PNG")
    parser.add_argument("--front", action="store_true",
                        help="serve each checkout with its `commentsvc serve` (nginx in front)")
    parser.add_argument("--ahead", action="store_true",
                        help="first add a comment dated a day ahead of the clock")
    parser.add_argument("--json", type=Path, default=RESULTS)
    args = parser.parse_args()
    args.clients = [int(c) for c in args.clients.split(",")]
    report: dict = {"comments": args.comments, "duration_s": args.duration,
                    "rounds": args.rounds, "front": args.front, "ahead": args.ahead, "runs": {}}
    admin = sa.create_engine(ADMIN_URL, isolation_level="AUTOCOMMIT")
    roots = [("before", args.before.resolve())] if args.before else []
    roots.append(("after" if args.before else "this checkout", ROOT))
    try:
        with ExitStack() as stack:
            checkouts = []
            for label, root in roots:
                print(f"{label}: {root}", flush=True)
                url = stack.enter_context(scratch_database("commentsvc_bench_writes", admin))
                community = prepare(url, comments=args.comments, targets=100, posters=8)
                if args.ahead:
                    date_one_ahead(url, community.targets[0], next(iter(community.tokens)))
                base = stack.enter_context(service(root, url, args.workers, args.front))
                checkouts.append(Checkout(label, url, base, Writers(
                    base, dict(community.tokens), community.targets, uuid.uuid4().hex[:10],
                    args.replies, args.deletes)))
            report["runs"] = measure(checkouts, args.clients, args.duration, args.rounds)
    finally:
        admin.dispose()
    args.json.parent.mkdir(exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    if args.chart:
        chart(report, args.chart)
    if not all(run["checks"]["exact"] for run in report["runs"].values()):
        sys.exit("a list is not exact, or a write was not stored as answered")


if __name__ == "__main__":
    main()
