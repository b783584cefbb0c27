"""The benchmarks' own logic: the HTTP bench's random requests, ratios and charts, the
in-process and instruction counts, the write bench's reading of the writers' lock, and the
lock-hold bench's parts of a batch."""

from __future__ import annotations

import http.server
import json
import os
import random
import subprocess
import threading
import time
import urllib.error
from pathlib import Path

import pytest
import sqlalchemy as sa
from flask import Flask, request

from bench import (
    charts,
    http_bench,
    in_process,
    instructions,
    lock_hold,
    long_tail,
    page_parts,
    sql_bench,
    write_bench,
)
from commentsvc.storage import engine
from commentsvc.web import auth
from conftest import Community, checkpoint, make_app

PNG = b"\x89PNG\r\n\x1a\n"


def test_random_pages_and_targets_are_picked_alike_by_wrk_and_the_python_client():
    pages = http_bench.Target("http://127.0.0.1:8000/api/comments/", pages=50)
    lists = http_bench.Target("http://127.0.0.1:8000/api/comments/",
                              paths=("/api/comments/?content_type=a&object_id=1",
                                     "/api/comments/?content_type=b&object_id=2"))
    rng = random.Random(3)
    picked = {pages.pick(rng) for _ in range(500)}
    assert picked == {f"http://127.0.0.1:8000/api/comments/?page={n}" for n in range(1, 51)}
    assert {lists.pick(rng) for _ in range(50)} == {
        "http://127.0.0.1:8000" + path for path in lists.paths}
    assert 'math.random(1, 50)' in pages.lua() and '"/api/comments/?page="' in pages.lua()
    assert '"/api/comments/?content_type=b&object_id=2"' in lists.lua()
    assert http_bench.Target("http://x/api/comments/").lua() is None


def test_a_revalidation_is_sent_with_its_tag_by_wrk_and_the_python_client(monkeypatch):
    revalidated = http_bench.Target("http://x/api/comments/",
                                    headers=(("If-None-Match", '"abc"'),))
    commands: list[list[str]] = []

    def run(command, **_kwargs):
        commands.append(command)
        return subprocess.CompletedProcess(command, 0, stdout="Requests/sec: 10.0\n")

    monkeypatch.setattr(http_bench.subprocess, "run", run)
    assert http_bench.load_wrk(revalidated, 1, 1)["rps"] == 10.0
    assert commands[0][-3:] == ["--header", 'If-None-Match: "abc"', "http://x/api/comments/"]
    sent: list[dict] = []

    def urlopen(request, timeout):
        sent.append(dict(request.header_items()))
        raise urllib.error.HTTPError(request.full_url, 304, "Not Modified", None, None)

    monkeypatch.setattr(http_bench.urllib.request, "urlopen", urlopen)
    measured = http_bench.load_python(revalidated, 0.05, 1)
    assert measured["errors"] == 0 and measured["rps"] > 0
    assert sent[0] == {"If-none-match": '"abc"'}


def test_the_long_tail_servers_take_turns_in_both_orders():
    assert long_tail.turns(["a", "b", "c"], 3) == [["a", "b", "c"], ["c", "b", "a"],
                                                   ["a", "b", "c"]]
    assert long_tail.turns(["a"], 0) == []


def test_prewarm_reads_every_table_and_index_of_the_service(pg_app):
    Community(pg_app)
    url = pg_app.config["COMMENTSVC_DATABASE_URL"]
    blocks = http_bench.prewarm(url)
    assert {"commentsvc_comment", "commentsvc_comment_site_pos", "commentsvc_user",
            "commentsvc_user_pkey", "commentsvc_list_count"} <= set(blocks)
    assert blocks["commentsvc_comment"] > 0 and blocks["commentsvc_comment_site_pos"] > 0
    assert not any(name.startswith("pg_catalog.") for name in blocks)
    assert http_bench.prewarm(url) == blocks  # the extension is there: read again alike


def test_the_sql_bench_reads_random_pages_once_each_and_counts_their_blocks(pg_app):
    Community(pg_app)
    checkpoint(pg_app)
    with pg_app.app_context(), engine.get_engine().connect() as conn:
        conn.exec_driver_sql(sql_bench.listing.PREPARE_PAGE_READS)
        count = conn.exec_driver_sql(
            "SELECT n FROM commentsvc_list_count WHERE list_key = 'site'").scalar_one()
        found = sql_bench.random_pages(conn, count, 6)
        conn.rollback()
    assert found["pages"] == 6
    assert 0 < found["execution_ms_median"] <= found["execution_ms_p90"]
    assert found["blocks_read_median"] >= 0 and found["blocks_dirtied"] >= 0


def test_depths_are_powers_of_ten_below_the_last_page():
    assert http_bench.depths(12_345) == ["1", "10", "100", "1000", "10000", "last"]
    assert http_bench.depths(1) == ["last"]


def rps(**overrides: float) -> dict[str, float]:
    figures = {http_bench.BARE: 1000.0}
    for label in ("cache on", "cache off"):
        figures |= {f"page 1, {label}": 500.0, f"last page (9), {label}": 450.0,
                    f"random pages, {label}": 400.0, f"many targets: page 1, {label}": 400.0,
                    f"many targets: last page, {label}": 380.0}
    return figures | overrides


def test_each_round_gives_every_case_over_the_bare_view_and_last_over_first():
    ratios = http_bench.round_ratios(rps())
    assert ratios["page 1, cache on / bare view"] == 0.5
    assert ratios["random pages, cache off / bare view"] == 0.4
    assert ratios["last page / page 1, cache off"] == 0.9
    assert ratios["many targets: last page / page 1, cache on"] == 0.95


def report() -> dict:
    cases = {name: {"rps": value, "p50_ms": 1.0, "p99_ms": 2.0}
             for name, value in rps().items()}
    return {"workers": 2, "worker_class": "sync", "connections": 4, "duration_s": 8,
            "rounds": 3, "num_pages": 5000, "cases": cases,
            "depth": {"duration_s": 4, "pages": {
                page: {"rps": 900.0, "p50_ms": 1.0 + k / 10, "p99_ms": 3.0 + k / 10}
                for k, page in enumerate(["1", "10", "100", "1000", "last"])}}}


def test_both_charts_are_drawn_from_a_report(tmp_path: Path):
    drawn = charts.draw(report(), tmp_path / "charts", label="1000")
    assert [path.name for path in drawn] == ["http-1000-rps.png", "http-1000-depth.png"]
    for path in drawn:
        assert path.read_bytes().startswith(PNG) and path.stat().st_size > 10_000


def test_the_in_process_bench_serves_the_environments_database(tmp_path: Path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'bench.sqlite3'}"
    monkeypatch.setenv("DATABASE_URL", url)
    app = in_process.service_app(0)
    assert app.config["SQLALCHEMY_DATABASE_URI"] == url
    assert app.config["COMMENTSVC_RESPONSE_CACHE_MB"] == 0
    assert app.config["COMMENTSVC_POST_RATE_LIMIT"] == ""  # the post case posts hundreds


def test_the_in_process_bench_deletes_comments_its_user_posted_first(tmp_path: Path,
                                                                       monkeypatch):
    url = f"sqlite:///{tmp_path / 'bench.sqlite3'}"
    monkeypatch.setenv("DATABASE_URL", url)
    app = make_app(url)  # the schema
    people = Community(app)
    service = in_process.service_app(64)
    call = in_process.deleter(service, people.tokens["ann"], 3)
    with app.app_context(), engine.get_engine().connect() as conn:
        posted = conn.execute(sa.text(
            "SELECT id FROM commentsvc_comment WHERE body LIKE 'in-process post %' "
            "AND NOT is_deleted ORDER BY id")).scalars().all()
    assert len(posted) == 3
    assert [call(), call()] == [b"", b""]  # 204s
    with app.app_context(), engine.get_engine().connect() as conn:
        deleted = conn.execute(sa.text(
            "SELECT id FROM commentsvc_comment WHERE is_deleted AND id IN :ids").bindparams(
            sa.bindparam("ids", expanding=True)), {"ids": posted}).scalars().all()
        engine.get_engine().dispose()
    assert deleted == posted[1:]  # newest first


def test_the_page_parts_bench_times_every_part_of_page_1_and_the_last(pg_app, monkeypatch):
    Community(pg_app)  # the site's list, newest first: 103, 102 | 101 (a reply), 100 (its root)
    url = pg_app.config["COMMENTSVC_DATABASE_URL"]
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("COMMENTSVC_PAGE_SIZE", "2")
    service = in_process.service_app(0)
    try:
        found = page_parts.run(service, url, 3, 2)
    finally:
        with service.app_context():
            engine.get_engine().dispose()
    assert found["comments"] == {"page 1": 2, "last page": 3}  # 100 embeds 101
    for page in page_parts.PAGES:
        assert len(found["rounds"][page]) == 2
        assert all(found["parts"][page][part] > 0 for part in page_parts.PARTS)
    assert set(found["per comment"]) == set(page_parts.PARTS)


def test_a_comment_more_costs_the_last_pages_excess_over_the_comments_it_holds_more():
    parts = {"page 1": dict.fromkeys(page_parts.PARTS, 100.0),
             "last page": {**dict.fromkeys(page_parts.PARTS, 148.0), "database CPU": None}}
    each = page_parts.per_comment(parts, {"page 1": 10, "last page": 26})
    assert each == {**dict.fromkeys(page_parts.PARTS, 3.0), "database CPU": None}
    same = page_parts.per_comment(parts, {"page 1": 10, "last page": 10})
    assert set(same.values()) == {None}  # no more comments: nothing to divide by
    rounds = [{**dict.fromkeys(page_parts.PARTS, value), "driver CPU": None if value == 3 else 1}
              for value in (1.0, 5.0, 3.0)]
    assert page_parts.medians(rounds) == {**dict.fromkeys(page_parts.PARTS, 3.0),
                                          "driver CPU": None}
    assert page_parts.backend_cpu_us(2**31) is None  # no such process on this machine


def test_the_in_process_caller_asks_for_the_page_it_is_given():
    asked = []
    probe = Flask(__name__)
    probe.add_url_rule("/api/comments/", "page",
                       lambda: asked.append(request.query_string) or "page")
    assert in_process.caller(probe)() == b"page"
    assert in_process.caller(probe, query="page=last")() == b"page"
    assert asked == [b"", b"page=last"]


def test_the_in_process_bench_times_only_200s():
    app = Flask(__name__)
    status = {"code": 200}
    app.add_url_rule("/api/comments/", "page", lambda: ("page", status["code"]))
    call = in_process.caller(app)
    assert call() == b"page"
    status["code"] = 503
    with pytest.raises(SystemExit, match="503"):
        call()


def test_instructions_a_request_are_the_difference_of_two_counts_over_the_requests():
    runs = []
    cost = {"64": 2_000, "0": 3_000, "random": 2_800, "last": 3_400, "bare": 500,
            "bare:counter": 800, "bare:page": 1_200, "post": 4_000}

    def counter(root, mode, requests, token):
        runs.append((mode, requests, token))
        return 1_000_000 + requests * (cost[mode] + (500 if token else 0))

    figures = instructions.per_request(Path("."), 100, "key", counter=counter)
    assert figures == {"page 1, cache on": 2_000, "page 1, cache off": 3_000,
                       "random pages, cache on": 2_800, "last page, cache off": 3_400,
                       "page 1, signed in": 2_500, "post, signed in": 4_500}
    warm = instructions.WARM_UP
    assert sorted(runs) == sorted([("64", warm, ""), ("64", warm + 100, ""), ("0", warm, ""),
                                   ("0", warm + 100, ""), ("random", warm, ""),
                                   ("random", warm + 100, ""), ("last", warm, ""),
                                   ("last", warm + 100, ""), ("64", warm, "key"),
                                   ("64", warm + 100, "key"), ("post", warm, "key"),
                                   ("post", warm + 100, "key")])
    assert instructions.per_request(Path("."), 100, yardsticks=True, counter=counter) == {
        "page 1, cache on": 2_000, "page 1, cache off": 3_000,
        "random pages, cache on": 2_800, "last page, cache off": 3_400,
        "bare Flask view": 500, "bare view + counter read": 800, "bare view + page read": 1_200}
    runs.clear()
    assert instructions.per_request(Path("."), 100, "key", counter=counter, only="post") == {
        "post, signed in": 4_500}
    assert sorted(runs) == [("post", warm, "key"), ("post", warm + 100, "key")]


def test_the_in_process_poster_posts_a_new_comment_each_call(app, community):
    call = in_process.poster(app, community.tokens["ann"])
    first, second = json.loads(call()), json.loads(call())
    assert second["id"] > first["id"] and first["author"] == "ann"
    assert (first["body"], second["body"]) == ("in-process post 0", "in-process post 1")
    revoke = community.tokens.pop("ann")
    with app.app_context(), engine.writing(engine.get_engine()) as conn:
        auth.revoke_token(conn, revoke)
    with pytest.raises(SystemExit, match="401"):
        call()


def test_the_in_process_random_pages_are_the_same_pages_each_run(app, sample, monkeypatch):
    asked: list[str] = []
    real = in_process.answered

    def noting(wsgi_app, request, expected):
        asked.append(request["QUERY_STRING"])
        return real(wsgi_app, request, expected)

    monkeypatch.setattr(in_process, "answered", noting)
    runs = []
    for _ in range(2):
        call = in_process.random_pager(app, seed=3)
        asked.clear()
        bodies = [json.loads(call()) for _ in range(5)]
        runs.append(list(asked))
        pages = int(bodies[0]["p8n"]["num_pages"])
        assert all(body["results"] for body in bodies)
    assert runs[0] == runs[1]
    assert {int(query.removeprefix("page=")) for query in runs[0]} <= set(range(1, pages + 1))
    assert len(set(runs[0])) > 1


def test_the_in_process_bare_view_serves_the_body_it_is_given():
    call = in_process.caller(in_process.bare_app(b'{"results": []}'))
    assert call() == b'{"results": []}'


def test_the_write_bench_reads_the_writers_lock_from_the_services_metrics(client, community):
    before = write_bench.lock_totals(client.get("/metrics").get_data(as_text=True))
    assert client.post("/api/comments/", headers=community.auth("ann"), json={
        "content_type": "comics.comicpage", "object_id": 10, "body": "hi"}).status_code == 201
    after = write_bench.lock_totals(client.get("/metrics").get_data(as_text=True))
    assert before is not None and after is not None
    assert after["transactions"] == before["transactions"] + 1
    assert after["held"] > before["held"] and after["waited"] > before["waited"]
    assert write_bench.lock_totals("# HELP other_total x\n# TYPE other_total counter\n"
                                   "other_total 1.0\n") is None  # a service without them


def test_the_writers_lock_use_is_shares_and_means_over_the_transactions():
    before = {"transactions": 10.0, "held": 1.0, "waited": 0.5}
    after = {"transactions": 110.0, "held": 3.0, "waited": 1.5}
    assert write_bench.lock_use(before, after, writes=250, seconds=4) == {
        "held_share": 0.5, "held_ms_a_transaction": 20.0, "waited_ms_a_transaction": 10.0,
        "writes_a_transaction": 2.5}
    assert write_bench.lock_use(None, after, 250, 4) is None
    assert write_bench.lock_use(after, after, 0, 4) is None


def test_the_lock_hold_bench_times_each_part_of_real_batches(pg_app, monkeypatch):
    Community(pg_app)
    timed: list[dict[str, float]] = []
    summary = lock_hold.summary

    def kept(batches):
        timed.extend(batches)
        return summary(batches)

    monkeypatch.setattr(lock_hold, "summary", kept)
    results = lock_hold.measure(pg_app, posts=2, rounds=4, busy=[0, 1])
    assert set(results) == {"0", "1"}
    for figures in results.values():
        assert set(figures) == {"held", *lock_hold.PARTS}
        assert all(value > 0 for value in figures.values())
    assert len(timed) == 8
    for batch in timed:  # each part follows the one before, from the lock to the end of
        moments = [batch[part] for part in ("locked", *lock_hold.PARTS)]  # the hold
        assert moments == sorted(moments)
        assert batch["commit"] - batch["locked"] >= batch["held"] > 0


def test_the_lock_hold_bench_takes_medians_of_each_part_in_milliseconds():
    batches = [{"locked": 0.0, "facts": 0.001, "python": 0.0015, "rows": 0.0025,
                "commit": 0.003, "held": 0.0031},
               {"locked": 1.0, "facts": 1.003, "python": 1.0035, "rows": 1.0045,
                "commit": 1.006, "held": 0.0061},
               {"locked": 2.0, "held": 0.5}]  # a batch without posts: not counted
    assert lock_hold.summary(batches) == {"held": 4.6, "facts": 2.0, "python": 0.5,
                                          "rows": 1.0, "commit": 1.0}


def test_busy_threads_run_while_the_block_runs_and_stop_after():
    import threading

    def busy() -> int:
        return sum(thread.name == "lock-hold-busy" for thread in threading.enumerate())

    with lock_hold.busy_threads(2):
        assert busy() == 2
    assert busy() == 0


def test_the_write_bench_chart_says_how_the_service_was_served():
    report = {"comments": 100_000, "duration_s": 8.0}
    assert write_bench.chart_title({**report, "front": True}) == (
        "Writes through HTTP through the front (commentsvc serve), 100,000 comments "
        "seeded, 8 s per step")
    assert "under gunicorn alone" in write_bench.chart_title({**report, "front": False})


def test_the_write_bench_reports_each_figure_as_its_median_over_the_rounds():
    def step(rate, p99, errors, statuses, lock):
        return {"per_second": rate, "by_kind_per_second": {"post": rate * 0.7},
                "p50_ms": p99 / 2, "p99_ms": p99, "errors": errors,
                "error_statuses": statuses, "writers_lock": lock}

    lock = {"held_share": 0.9, "held_ms_a_transaction": 3.0,
            "waited_ms_a_transaction": 2.0, "writes_a_transaction": 3.5}
    rounds = [step(900.0, 20.0, 0, {}, lock),
              step(700.0, 30.0, 2, {"400": 2}, {**lock, "held_share": 0.7}),
              step(1000.0, 10.0, 1, {"503": 1}, {**lock, "held_share": 0.8})]
    assert write_bench.median_step(rounds) == {
        "per_second": 900.0, "by_kind_per_second": {"post": 630.0}, "p50_ms": 10.0,
        "p99_ms": 20.0, "errors": 3, "error_statuses": {"400": 2, "503": 1},
        "writers_lock": {**lock, "held_share": 0.8}, "rounds": 3}
    # a round whose lock figures are missing: no lock figures rather than a part's
    assert write_bench.median_step([*rounds[:2], step(1.0, 1.0, 0, {}, None)])[
        "writers_lock"] is None


def test_the_write_bench_runs_each_step_on_every_checkout_in_turn(monkeypatch):
    calls: list[tuple[str, int]] = []

    def write_step(checkout, clients, seconds):
        calls.append((checkout.label, clients))
        return {"per_second": float(len(calls))}

    monkeypatch.setattr(write_bench, "write_step", write_step)
    monkeypatch.setattr(write_bench, "finish",
                        lambda checkout, steps, seconds: {"steps": steps})
    checkouts = [write_bench.Checkout(label, "db", "http://x", None)
                 for label in ("before", "after")]
    report = write_bench.measure(checkouts, [1, 8], 8, rounds=2)
    assert calls == [("before", 1), ("after", 1), ("before", 8), ("after", 8),
                     ("after", 1), ("before", 1), ("after", 8), ("before", 8)]
    assert report["before"]["steps"] == {1: [{"per_second": 1.0}, {"per_second": 6.0}],
                                         8: [{"per_second": 3.0}, {"per_second": 8.0}]}


class _Recording(http.server.BaseHTTPRequestHandler):
    """Answers every GET with an empty JSON object, keeping the connection open, and
    records who asked (the write bench's User-Agent names its process)."""

    protocol_version = "HTTP/1.1"
    asked: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        type(self).asked.append(self.headers.get("User-Agent", ""))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *_args) -> None:
        pass


def test_the_write_bench_reads_page1_from_a_process_of_its_own_beside_the_writers():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recording)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"

    class Writers:
        calls: list[tuple[int, float]] = []

        def run(self, clients: int, seconds: float) -> list:
            self.calls.append((clients, seconds))
            seen = len(_Recording.asked)
            time.sleep(seconds)
            assert len(_Recording.asked) > seen  # the readers read meanwhile
            return [("post", 201, 0.001)]

    writers = Writers()
    try:
        alone, during, written = write_bench.reads_alone_and_under_writes(base, writers, 0.5)
    finally:
        server.shutdown()
        server.server_close()
    assert alone and during and {status for _kind, status, _s in alone + during} == {200}
    assert written == [("post", 201, 0.001)] and writers.calls == [(8, 0.5)]
    assert len(_Recording.asked) == len(alone) + len(during)
    processes = {agent.removeprefix("write-bench/") for agent in _Recording.asked}
    assert len(processes) == 1 and processes != {str(os.getpid())}


def test_the_write_bench_can_date_a_comment_ahead_of_the_clock(app, community):
    """--ahead: one comment on the target, a day ahead, on top of its three lists, every
    position still exact; posts then go below it."""
    from helpers import assert_positions_exact

    url = app.config["COMMENTSVC_DATABASE_URL"]
    write_bench.date_one_ahead(url, ("comics.comicpage", 10), 1)
    client = app.test_client()
    for query in ("", "?content_type=comics.comicpage&object_id=10"):
        assert client.get("/api/comments/" + query).get_json()["results"][0]["body"] == \
            "dated ahead of the clock"
    posted = client.post("/api/comments/", headers=community.auth("ann"), json={
        "content_type": "comics.comicpage", "object_id": 10, "body": "now"})
    assert posted.status_code == 201
    assert client.get("/api/comments/").get_json()["results"][1]["id"] == posted.get_json()["id"]
    with app.app_context(), engine.get_engine().connect() as conn:
        assert_positions_exact(conn)
