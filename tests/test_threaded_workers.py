"""Threaded workers under bursts of first requests: the real gunicorn with gunicorn.conf.py
(gthread, 8 threads a worker) on a fresh database, right after it starts.

Sixteen client threads send every kind of request at the same instant (a barrier), so
each worker meets its first list page, filter, page size, comment, post, PATCH, DELETE,
OPTIONS, HEAD, browsable page, health and readiness probe, metrics scrape and OpenAPI
document from several threads at once, before anything was built lazily. Run on SQLite
with PROMETHEUS_MULTIPROC_DIR set and on PostgreSQL without it. Nothing may be a 500 or
go unanswered, no worker may log an error, and every write must be stored exactly once
(two posts sent at once with one Idempotency-Key included). test_thread_safety.py forces
each race found one by one.

    .venv/bin/python -m pytest tests/test_threaded_workers.py -s   # prints the figures
"""

from __future__ import annotations

import http.client
import json
import os
import threading
import uuid
from collections import Counter
from dataclasses import dataclass

import pytest
import sqlalchemy as sa

from commentsvc.storage.database_urls import normalise_url
from conftest import own_database
from harness.servers import Gunicorn, prepare

CLIENTS = 16
BURSTS = 10
LIST = "/api/comments/"


@dataclass
class Sent:
    """One request of a burst and its answer (status 0: none)."""

    name: str
    method: str
    path: str
    status: int = 0
    body: bytes = b""
    error: str = ""


def send(base_port: int, sent: Sent, body: dict | None = None, token: str | None = None,
         headers: dict[str, str] | None = None) -> Sent:
    """One request on a new connection; never raises."""
    sending = {"Connection": "close", **(headers or {})}
    payload = None
    if body is not None:
        payload = json.dumps(body).encode()
        sending["Content-Type"] = "application/json"
    if token:
        sending["Authorization"] = f"Token {token}"
    conn = http.client.HTTPConnection("127.0.0.1", base_port, timeout=30)
    try:
        conn.request(sent.method, sent.path, body=payload, headers=sending)
        response = conn.getresponse()
        sent.status, sent.body = response.status, response.read()
    except (OSError, http.client.HTTPException) as exc:
        sent.error = f"{type(exc).__name__}: {exc}"
    finally:
        conn.close()
    return sent


@pytest.fixture(params=["sqlite", "postgresql"])
def fresh(request, tmp_path):
    """(database URL, PROMETHEUS_MULTIPROC_DIR or None): SQLite with shared metrics files,
    PostgreSQL (a database made for this test on the server) without."""
    if request.param == "sqlite":
        metrics_dir = tmp_path / "metrics"
        metrics_dir.mkdir()
        yield f"sqlite:///{tmp_path / 'fresh.sqlite3'}", str(metrics_dir)
        return
    with own_database("commentsvc_threads") as url:
        yield url, None


def comment_ids(database_url: str) -> tuple[list[int], list[int]]:
    """Ids of comic-page comments (staff marks and deletes them) and of the others."""
    engine = sa.create_engine(normalise_url(database_url))
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text(
                "SELECT id, content_type FROM commentsvc_comment WHERE parent_id IS NULL "
                "AND NOT is_deleted ORDER BY id")).all()
    finally:
        engine.dispose()
    return ([r.id for r in rows if r.content_type == "comics.comicpage"],
            [r.id for r in rows if r.content_type != "comics.comicpage"])


def test_bursts_of_first_requests_to_every_endpoint(fresh):
    database_url, metrics_dir = fresh
    community = prepare(database_url, comments=300, targets=10, posters=2)
    staff, poster = community.staff, next(u for u in community.tokens if u != community.staff)
    pages, others = comment_ids(database_url)
    to_delete, to_mark = pages[:BURSTS], pages[BURSTS:2 * BURSTS]
    content_type, object_id = community.targets[-1]
    run = uuid.uuid4().hex[:8]
    env = {"COMMENTSVC_POST_RATE_LIMIT": "1000/minute",  # the limiter's memory storage too
           "COMMENTSVC_IDEMPOTENCY_PURGE_SECONDS": "0.1"}  # and a purge after keyed writes
    if metrics_dir is not None:
        env["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
    saved = os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
    try:
        server = Gunicorn(database_url, workers=2, env=env, ready=None)
    finally:
        if saved is not None:
            os.environ["PROMETHEUS_MULTIPROC_DIR"] = saved
    port = server.port
    tokens = community.tokens

    def burst_of(n: int) -> list:
        """What the 16 clients send in burst ``n``: (Sent, body, token, headers)."""
        post = {"content_type": content_type, "object_id": object_id}
        key = f"{run}-{n}"
        return [
            (Sent("list", "GET", LIST), None, None, None),
            (Sent("list filtered", "GET", f"{LIST}?content_type={content_type}"
                  f"&object_id={object_id}&page_size=5"), None, None, None),
            (Sent("list page 2", "GET", f"{LIST}?content_type=users.user&page=2"
                  f"&page_size={3 + n % 3}"), None, None, None),
            (Sent("list signed in", "GET", f"{LIST}?page_size=7"), None, tokens[poster], None),
            (Sent("one comment", "GET", f"{LIST}{others[n]}/"), None, None, None),
            (Sent("post", "POST", LIST), {**post, "body": f"t-{run}-{n}-a plain post"},
             tokens[poster], None),
            # The same key twice at once: one is stored, the other replays it (or waits).
            (Sent("post keyed", "POST", LIST), {**post, "body": f"t-{run}-{n}-k keyed"},
             tokens[poster], {"Idempotency-Key": key}),
            (Sent("post keyed", "POST", LIST), {**post, "body": f"t-{run}-{n}-k keyed"},
             tokens[poster], {"Idempotency-Key": key}),
            (Sent("patch", "PATCH", f"{LIST}{to_mark[n]}/"), {"is_read": True}, tokens[staff],
             {"Idempotency-Key": f"{key}-p"}),
            (Sent("delete", "DELETE", f"{LIST}{to_delete[n]}/"), None, tokens[staff], None),
            (Sent("options", "OPTIONS", LIST if n % 2 else f"{LIST}{others[n]}/"), None,
             tokens[poster] if n % 2 else None, None),
            (Sent("head", "HEAD", f"{LIST}?content_type=comics.comicpage"), None, None, None),
            (Sent("browsable", "GET", f"{LIST}?format=api" if n % 2 else
                  f"{LIST}{others[n]}/?format=api"), None, tokens[poster] if n % 3 else None,
             None),
            (Sent("probe", "GET", "/healthz" if n % 2 else "/readyz"), None, None, None),
            (Sent("metrics", "GET", "/metrics"), None, None, None),
            (Sent("schema", "GET", "/api/schema/"), None, None, None),
        ]

    answered: list[Sent] = []
    lock = threading.Lock()
    barrier = threading.Barrier(CLIENTS)

    def client(index: int) -> None:
        for n in range(BURSTS):
            sent, body, token, headers = burst_of(n)[index]
            barrier.wait(timeout=60)
            send(port, sent, body, token, headers)
            with lock:
                answered.append(sent)

    with server:
        threads = [threading.Thread(target=client, args=(i,), daemon=True)
                   for i in range(CLIENTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        server.log.seek(0)
        log = server.log.read().decode("utf-8", "replace").splitlines()

    figures = Counter(f"{s.method} {s.status or s.error.split(':')[0]}" for s in answered)
    print(f"\n{database_url.split(':')[0]}, PROMETHEUS_MULTIPROC_DIR "
          f"{'set' if metrics_dir else 'unset'}: {len(answered)} requests, "
          f"{dict(sorted(figures.items()))}")
    assert len(answered) == CLIENTS * BURSTS
    assert not [s for s in answered if s.status == 0], "a request got no answer"
    errors = [line for line in log if '"level":"ERROR"' in line or "Traceback" in line]
    assert not errors, errors[:3]  # first: a 500's traceback says more than its answer
    failed = [(s.name, s.path, s.status, s.body[:300]) for s in answered
              if s.status >= 500]
    assert not failed, failed
    expected = {"list": 200, "list filtered": 200, "list page 2": 200, "list signed in": 200,
                "one comment": 200, "post": 201, "patch": 200, "delete": 204,
                "options": 200, "head": 200, "browsable": 200, "probe": 200, "metrics": 200,
                "schema": 200}
    for sent in answered:
        if sent.name == "post keyed":
            assert sent.status in (201, 409), (sent.status, sent.body)
        else:
            assert sent.status == expected[sent.name], (sent.name, sent.status, sent.body)

    # Every write stored once: each plain post and each key's post exactly once, every
    # delete and mark-read done.
    engine = sa.create_engine(normalise_url(database_url))
    try:
        with engine.connect() as conn:
            bodies = Counter(row.body.split(" ")[0] for row in conn.execute(sa.text(
                "SELECT body FROM commentsvc_comment WHERE body LIKE :run"),
                {"run": f"t-{run}-%"}))
            deleted = conn.execute(sa.text(
                "SELECT count(*) FROM commentsvc_comment WHERE is_deleted AND id IN "
                f"({', '.join(map(str, to_delete))})")).scalar_one()
            marked = conn.execute(sa.text(
                "SELECT count(*) FROM commentsvc_comment WHERE is_read AND id IN "
                f"({', '.join(map(str, to_mark))})")).scalar_one()
    finally:
        engine.dispose()
    assert bodies == Counter({f"t-{run}-{n}-{kind}": 1 for n in range(BURSTS)
                              for kind in "ak"})
    assert deleted == BURSTS and marked == BURSTS


def test_each_thread_of_a_worker_has_a_pooled_connection_kept_open():
    """A thread holds at most one pooled connection at a time, so a pool keeping one per
    thread of gunicorn.conf.py's workers never opens (and closes) an overflow connection,
    a new server process each time, under load."""
    import runpy
    from pathlib import Path

    from commentsvc.storage import engine

    config = runpy.run_path(str(Path(__file__).resolve().parent.parent / "gunicorn.conf.py"))
    assert engine.POOL_SIZE >= config["threads"]
    assert engine.engine_options("postgresql://h/d", 3)["pool_size"] == engine.POOL_SIZE
