"""Prometheus metrics of one app: requests by endpoint and status, their latency, the
database pool's connections in use, how long writers wait for and hold the site's one
writers' lock (storage.engine.writing), and webhook delivery (operations.event_metrics).

Each app has a registry of its own (not the client library's global one), so many apps in
one process (tests, a host with several) never collide. Labels are bounded: the endpoint
is the Flask endpoint of the matched route (``commentsvc.comment_list``), never the path,
and ``unmatched`` for a request no route matched; an unusual method counts as ``other``.

Under gunicorn each worker keeps its own figures and ``/metrics`` answers with the figures
of the worker that serves the scrape, unless ``PROMETHEUS_MULTIPROC_DIR`` names a directory
(emptied before the service starts) in which the workers share their request and lock
figures; the pool gauge is always the answering worker's.
"""

from __future__ import annotations

import os
import struct
import time
import weakref
from collections.abc import Iterator

from flask import Flask, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector

from commentsvc.operations.event_metrics import EventsCollector
from commentsvc.storage.engine import WRITERS_LOCK_OBSERVER, configured_engine
from commentsvc.web.responses import NOSNIFF, READ_ONLY_ALLOW

_EXTENSION = "commentsvc_metrics"
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# From a cached page or a 304 (well under a millisecond) to a stuck database (seconds).
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
           10.0)

# A writers' transaction holds the lock from a fraction of a millisecond (one post) to
# minutes (an import).
LOCK_BUCKETS = (0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
                10.0)


class RequestMetrics:
    """The counters of one app, with each label combination's child bound once."""

    def __init__(self, app: Flask) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "commentsvc_requests_total", "Requests answered, by method, endpoint and status.",
            ("method", "endpoint", "status"), registry=self.registry)
        self.duration = Histogram(
            "commentsvc_request_duration_seconds",
            "Seconds from the start of a request's handling to its response, by method and "
            "endpoint.", ("method", "endpoint"), buckets=BUCKETS, registry=self.registry)
        self.lock_wait = Histogram(
            "commentsvc_writers_lock_wait_seconds",
            "Seconds a writers' transaction (a batch of writes, an import) waited for the "
            "site's one writers' lock, from asking for a connection.",
            buckets=LOCK_BUCKETS, registry=self.registry)
        self.lock_held = Histogram(
            "commentsvc_writers_lock_held_seconds",
            "Seconds a writers' transaction held the site's one writers' lock, to its "
            "commit or rollback.", buckets=LOCK_BUCKETS, registry=self.registry)
        app.extensions[WRITERS_LOCK_OBSERVER] = self.writers_lock
        self.registry.register(PoolCollector(app))
        self.registry.register(EventsCollector(app))
        self._counted: dict[tuple[str, str, int], Counter] = {}
        self._timed: dict[tuple[str, str], Histogram] = {}

    def record(self, method: str, endpoint: str, status: int, seconds: float) -> None:
        """Count one answered request and its duration."""
        counted = self._counted.get((method, endpoint, status))
        if counted is None:
            counted = self._bind(method, endpoint, status)
        counted.inc()
        self._timed[method if method in METHODS else "other", endpoint].observe(seconds)

    def writers_lock(self, waited: float, held: float) -> None:
        """One writers' transaction: how long it waited for the lock, how long it held it."""
        self.lock_wait.observe(waited)
        self.lock_held.observe(held)

    def _bind(self, method: str, endpoint: str, status: int) -> Counter:
        """Bind the children of a label combination seen for the first time."""
        label = method if method in METHODS else "other"
        counted = self.requests.labels(label, endpoint, str(status))
        # The histogram first: with threaded workers another thread may find the counter
        # the moment it is kept, and goes straight on to the histogram.
        self._timed.setdefault((label, endpoint), self.duration.labels(label, endpoint))
        if label == method:  # other methods are not kept, so they cannot grow the dict
            self._counted[method, endpoint, status] = counted
        return counted


class PoolCollector:
    """The pool's checked-out connections, read when Prometheus scrapes (not per request)."""

    NAME = "commentsvc_db_pool_connections_in_use"
    HELP = "Connections of the SQLAlchemy pool checked out at scrape time (this worker)."

    def __init__(self, app: Flask) -> None:
        self._app = weakref.ref(app)

    def describe(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(self.NAME, self.HELP)

    def collect(self) -> Iterator[Metric]:
        gauge = GaugeMetricFamily(self.NAME, self.HELP)
        app = self._app()
        if app is not None:
            with app.app_context():
                # not get_engine: a scrape in the fail-fast window after a hang answers
                checkedout = getattr(configured_engine().pool, "checkedout", None)
            if checkedout is not None:
                gauge.add_metric([], checkedout())
        yield gauge


def for_app(app: Flask) -> RequestMetrics:
    """The app's metrics, made on first use."""
    found: RequestMetrics | None = app.extensions.get(_EXTENSION)
    if found is None:  # made twice at worst, never kept twice
        found = app.extensions.setdefault(_EXTENSION, RequestMetrics(app))
    return found


# A worker creates its figures' file (prometheus_client's MmapedDict) empty, then sizes
# it: a scrape that reads it in between finds no header (struct.error). Read again.
SCRAPE_TRIES = 5
SCRAPE_RETRY_SECONDS = 0.01


def _latest(registry: CollectorRegistry) -> bytes:
    """The registry's text, read again when another worker's file is only being made."""
    for attempt in range(1, SCRAPE_TRIES + 1):
        try:
            return generate_latest(registry)
        except struct.error:
            if attempt == SCRAPE_TRIES:
                raise
            time.sleep(SCRAPE_RETRY_SECONDS)
    raise AssertionError("unreachable")


def exposition(app: Flask) -> Response:
    """The metrics in Prometheus' text format: this worker's, or every worker's in
    multiprocess mode (plus this worker's pool)."""
    registry = for_app(app).registry
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        shared = CollectorRegistry()
        MultiProcessCollector(shared)  # type: ignore[no-untyped-call]  # its __init__ has no hints
        shared.register(PoolCollector(app))
        shared.register(EventsCollector(app))
        registry = shared
    return Response(_latest(registry), mimetype=None,
                    content_type=CONTENT_TYPE_LATEST,
                    headers={"Cache-Control": "no-store", "Allow": READ_ONLY_ALLOW, **NOSNIFF})
