"""/metrics in Prometheus' text format: requests by endpoint and status, their durations,
the pool in use; one registry per app."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from commentsvc.operations import metrics
from commentsvc.storage import engine


def scrape(client) -> dict[str, list]:
    """The samples of /metrics, by metric family name."""
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/plain; version=")
    assert response.headers["Cache-Control"] == "no-store"
    return {family.name: family.samples
            for family in text_string_to_metric_families(response.get_data(as_text=True))}


def requests_counted(client, method: str, endpoint: str, status: int) -> float:
    """commentsvc_requests_total for one label set (0 when it has not been seen)."""
    for sample in scrape(client)["commentsvc_requests"]:
        if sample.name == "commentsvc_requests_total" and sample.labels == {
                "method": method, "endpoint": endpoint, "status": str(status)}:
            return sample.value
    return 0.0


def durations_counted(client, method: str, endpoint: str) -> float:
    for sample in scrape(client)["commentsvc_request_duration_seconds"]:
        if sample.name.endswith("_count") and sample.labels == {"method": method,
                                                                "endpoint": endpoint}:
            return sample.value
    return 0.0


def test_requests_are_counted_by_endpoint_and_status(client, sample):
    before = requests_counted(client, "GET", "commentsvc.comment_list", 200)
    for _ in range(3):
        assert client.get("/api/comments/?page=2").status_code == 200
    assert client.get("/api/comments/?page=99999").status_code == 404
    assert client.get("/api/comments/1/").status_code in (200, 404)
    assert requests_counted(client, "GET", "commentsvc.comment_list", 200) == before + 3
    assert requests_counted(client, "GET", "commentsvc.comment_list", 404) == 1
    assert durations_counted(client, "GET", "commentsvc.comment_list") == 4


def test_unmatched_paths_share_one_label(client):
    client.get("/no/such/page")
    client.get("/api/comments/not-a-number/")
    client.put("/api/comments/")  # 405: no rule matched this method
    assert requests_counted(client, "GET", "unmatched", 404) == 2
    assert requests_counted(client, "PUT", "unmatched", 405) == 1
    labels = {s.labels["endpoint"] for s in scrape(client)["commentsvc_requests"]}
    assert not any(label.startswith("/") for label in labels)


def test_odd_methods_are_counted_as_other(client):
    client.open("/api/comments/", method="BREW")
    client.open("/api/comments/", method="PROPFIND")
    assert requests_counted(client, "other", "unmatched", 405) == 2


def test_the_ops_routes_count_themselves(client):
    client.get("/healthz")
    client.get("/readyz")
    scrape(client)
    assert requests_counted(client, "GET", "commentsvc_ops.healthz", 200) == 1
    assert requests_counted(client, "GET", "commentsvc_ops.readyz", 200) == 1
    assert requests_counted(client, "GET", "commentsvc_ops.metrics", 200) >= 1


def test_durations_fall_in_buckets(client):
    client.get("/healthz")
    buckets = [s for s in scrape(client)["commentsvc_request_duration_seconds"]
               if s.name.endswith("_bucket")
               and s.labels["endpoint"] == "commentsvc_ops.healthz"]
    assert [b.labels["le"] for b in buckets][:2] == ["0.0005", "0.001"]
    assert buckets[-1].labels["le"] == "+Inf" and buckets[-1].value == 1


def test_the_pool_gauge_reads_checked_out_connections(app):
    client = app.test_client()
    [gauge] = scrape(client)["commentsvc_db_pool_connections_in_use"]
    assert gauge.value == 0
    with app.app_context(), engine.get_engine().connect():
        [held] = scrape(client)["commentsvc_db_pool_connections_in_use"]
    assert held.value == 1


def test_each_app_keeps_its_own_figures(app_factory):
    first, second = app_factory(), app_factory()
    first.test_client().get("/healthz")
    assert metrics.for_app(first).registry is not metrics.for_app(second).registry
    assert requests_counted(first.test_client(), "GET", "commentsvc_ops.healthz", 200) == 1
    assert requests_counted(second.test_client(), "GET", "commentsvc_ops.healthz", 200) == 0


def test_gunicorn_workers_share_their_figures_in_multiprocess_mode(app, database_url,
                                                                     tmp_path):
    """With PROMETHEUS_MULTIPROC_DIR every scrape adds up both workers' requests, whichever
    worker answers it."""
    import time
    import urllib.request
    from concurrent.futures import ThreadPoolExecutor

    from harness.servers import Gunicorn

    shared = tmp_path / "prometheus"
    shared.mkdir()
    def get_list(_n: int) -> bytes:
        return urllib.request.urlopen(server.base + "/api/comments/").read()

    def counting_workers() -> set[str]:
        return {path.name.split("_")[-1] for path in shared.glob("counter_*.db")}

    with Gunicorn(database_url, env={"PROMETHEUS_MULTIPROC_DIR": str(shared)}) as server, \
            ThreadPoolExecutor(8) as pool:
        # Eight at a time, so while one sync worker is busy the other accepts (once it
        # has booted: until then the first takes everything).
        deadline = time.monotonic() + 20
        while len(counting_workers()) < 2 and time.monotonic() < deadline:
            list(pool.map(get_list, range(16)))
        assert len(counting_workers()) == 2  # both workers count into the shared directory
        before = _scraped_list_200(server.base)
        list(pool.map(get_list, range(30)))
        counts = {_scraped_list_200(server.base) for _ in range(6)}
    assert counts == {before + 30}  # every scrape, whichever worker answers it


def _scraped_list_200(base: str) -> float:
    import urllib.request

    text = urllib.request.urlopen(base + "/metrics").read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "commentsvc_requests_total" and sample.labels == {
                    "method": "GET", "endpoint": "commentsvc.comment_list", "status": "200"}:
                return sample.value
    return 0.0


def test_a_counter_is_shared_between_threads_only_once_its_histogram_is(app):
    """Threaded workers: a thread that finds a label combination's counter kept goes
    straight on to its histogram, so the histogram must be kept first (else KeyError, a
    500, on the first concurrent requests of an endpoint)."""
    recorder = metrics.RequestMetrics(app)
    counter_kept_when_histogram_bound = []
    bind_histogram = recorder.duration.labels

    def labels(*values):
        counter_kept_when_histogram_bound.append(("GET", "an.endpoint", 200) in recorder._counted)
        return bind_histogram(*values)

    recorder.duration.labels = labels
    recorder.record("GET", "an.endpoint", 200, 0.01)
    recorder.record("GET", "an.endpoint", 200, 0.01)
    assert counter_kept_when_histogram_bound == [False]


def test_a_scrape_reads_again_past_a_file_another_worker_is_only_making(app, tmp_path,
                                                                        monkeypatch):
    """prometheus_client creates a worker's figures file empty, then sizes it; a scrape
    between the two found no header (struct.error) and was a 500."""
    shared = tmp_path / "prometheus"
    shared.mkdir()
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(shared))
    (shared / "counter_99999.db").write_bytes(b"")  # a worker between open and truncate

    def sized_later(seconds):
        (shared / "counter_99999.db").unlink()  # the worker is done (here: gone)

    monkeypatch.setattr(metrics.time, "sleep", sized_later)
    response = app.test_client().get("/metrics")
    assert response.status_code == 200, response.get_data(as_text=True)
    assert b"commentsvc_db_pool_connections_in_use" in response.data


def lock_counts(client) -> tuple[float, float]:
    """How many writers' transactions /metrics has seen waiting for and holding the lock."""
    samples = scrape(client)
    return tuple(next(s.value for s in samples[name] if s.name == f"{name}_count")
                 for name in ("commentsvc_writers_lock_wait_seconds",
                              "commentsvc_writers_lock_held_seconds"))


def test_each_writers_transaction_is_timed_once(client, community):
    before = lock_counts(client)[0]  # the community was written with the lock too

    def timed() -> tuple[float, float]:
        waited, held = lock_counts(client)
        return waited - before, held - before

    ann = community.auth("ann")
    posted = client.post("/api/comments/", headers=ann, json={
        "content_type": "comics.comicpage", "object_id": 10, "body": "hi"})
    assert posted.status_code == 201
    assert timed() == (1.0, 1.0)
    assert client.delete(posted.headers["Location"], headers=ann).status_code == 204
    assert timed() == (2.0, 2.0)
    refused = client.post("/api/comments/", headers=ann, json={
        "content_type": "comics.comicpage", "object_id": 999999, "body": "hi"})
    assert refused.status_code == 400  # checked under the lock, which it held meanwhile
    assert timed() == (3.0, 3.0)
    assert client.get("/api/comments/").status_code == 200
    assert timed() == (3.0, 3.0)  # reads take no lock


def test_a_transaction_that_fails_is_timed_to_its_rollback(app):
    told = []
    app.extensions[engine.WRITERS_LOCK_OBSERVER] = lambda waited, held: told.append(
        (waited, held))
    with app.app_context():
        try:
            with engine.writing(engine.get_engine()):
                raise LookupError("the writer's own failure")
        except LookupError:
            pass
        with engine.writing(engine.get_engine()):
            pass
    assert len(told) == 2 and all(waited >= 0 and held >= 0 for waited, held in told)


def test_without_an_app_a_writer_tells_no_one(app):
    with app.app_context():
        found = engine.get_engine()
    with engine.writing(found) as conn:
        assert conn.exec_driver_sql("SELECT 1").scalar() == 1


def test_an_observer_that_fails_fails_no_writer(app, caplog):
    """A commit is the writer's answer: a timing that cannot be recorded is only logged."""
    def broken(waited, held):
        raise OSError("no space left for the metrics file")

    app.extensions[engine.WRITERS_LOCK_OBSERVER] = broken
    with app.app_context():
        with engine.writing(engine.get_engine()) as conn:
            conn.exec_driver_sql("SELECT 1")
    assert "the writers' lock timing was not recorded" in caplog.text


def test_a_scrape_in_the_fail_fast_window_still_reads_the_pool(pg_app):
    """Right after a deadline passed, requests that need the database are refused at once
    (storage.outage); /metrics needs none, and is what watches the outage: it answers."""
    from commentsvc.storage import outage

    client = pg_app.test_client()
    with pg_app.app_context():
        found = outage.outage_of(engine.get_engine())
    assert found is not None and found.fail_fast_seconds > 0
    found.failed("a test's hung database", hung=True)
    try:
        assert client.get("/api/comments/").status_code == 503  # the window is open
        [gauge] = scrape(client)["commentsvc_db_pool_connections_in_use"]
        assert gauge.value == 0
    finally:
        found.fail_fast_until = 0.0  # closed, for the fixture's own clean-up
