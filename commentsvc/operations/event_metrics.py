"""Prometheus metrics of webhook delivery, read from the database when Prometheus scrapes:
per endpoint, events delivered, failed attempts, events given up on, events waiting and
the lag (how long the oldest waiting one has waited); and how many events are kept.

They come from the endpoints' rows (storage.deliveries), which every deliverer on every
node updates, so any worker of any node answers with the same figures, and they survive
restarts. A scrape while the database is unreachable leaves them out.

/metrics needs no sign-in, so the ``endpoint`` label is the URL without its secrets
(rules.endpoint_urls), numbered where two endpoints would otherwise share a label.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterator

from flask import Flask
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from sqlalchemy.exc import SQLAlchemyError

from commentsvc.rules import endpoint_urls
from commentsvc.storage import deliveries, outbox
from commentsvc.storage.engine import get_engine

log = logging.getLogger(__name__)

_FAMILIES = {
    "delivered": ("commentsvc_webhook_delivered", "Events an endpoint accepted."),
    "failed": ("commentsvc_webhook_failed_attempts", "Delivery attempts that failed."),
    "given_up": ("commentsvc_webhook_given_up", "Events given up on after the retry window."),
    "pending": ("commentsvc_webhook_pending_events", "Events an endpoint has yet to accept."),
    "lag": ("commentsvc_webhook_lag_seconds",
            "Seconds the oldest event an endpoint has yet to accept has waited (0: none)."),
    "kept": ("commentsvc_events_kept", "Events kept in the outbox."),
}


class EventsCollector:
    """Reads the endpoints' rows at scrape time (one statement, not per request)."""

    def __init__(self, app: Flask) -> None:
        self._app = weakref.ref(app)

    def describe(self) -> Iterator[Metric]:
        return iter(())  # read only when collected: no query at registration

    def collect(self) -> Iterator[Metric]:
        app = self._app()
        if app is None:
            return
        try:
            with app.app_context(), get_engine().connect() as conn:
                states = deliveries.states(conn)
                kept, _newest = outbox.totals(conn)
        except SQLAlchemyError:
            log.info("webhook metrics left out: the database did not answer")
            return
        now = outbox.now()
        names = endpoint_urls.labels(state.url for state in states)
        labels = ["endpoint"]
        delivered = CounterMetricFamily(*_FAMILIES["delivered"], labels=labels)
        failed = CounterMetricFamily(*_FAMILIES["failed"], labels=labels)
        given_up = CounterMetricFamily(*_FAMILIES["given_up"], labels=labels)
        pending = GaugeMetricFamily(*_FAMILIES["pending"], labels=labels)
        lag = GaugeMetricFamily(*_FAMILIES["lag"], labels=labels)
        for state in states:
            if not state.active:
                continue
            delivered.add_metric([names[state.url]], state.delivered)
            failed.add_metric([names[state.url]], state.failed_attempts)
            given_up.add_metric([names[state.url]], state.given_up)
            pending.add_metric([names[state.url]], state.pending)
            lag.add_metric([names[state.url]], state.lag_seconds(now))
        yield from (delivered, failed, given_up, pending, lag)
        yield GaugeMetricFamily(*_FAMILIES["kept"], value=kept)
