"""Webhooks under faults (harness.event_faults): the deliverer killed mid-send, the
receiver down, the database stopped; every event made arrives, none is forged or lost.
Short runs here; bench/event_faults.py gives RELIABILITY.md's figures."""

from __future__ import annotations

import uuid

import pytest
from pg_cluster import PgCluster, skip_reason

from harness import event_faults


def assert_nothing_lost(figures: event_faults.Figures) -> None:
    assert figures.made >= 50, figures
    assert figures.lost == 0, figures
    assert figures.unknown == 0 and figures.rejected == 0, figures
    assert figures.delivered == figures.made, figures
    assert figures.kills == 2, figures


def test_sqlite_every_event_arrives_through_kills_and_a_receiver_outage(tmp_path):
    figures = event_faults.run(f"sqlite:///{tmp_path / 'events.sqlite3'}", kills=2,
                               receiver_down=3, drain_limit=60)
    assert_nothing_lost(figures)


@pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")
def test_postgres_every_event_arrives_through_kills_and_receiver_and_database_outages():
    with PgCluster() as cluster:
        url = cluster.create_database(f"events_{uuid.uuid4().hex[:8]}")
        figures = event_faults.run(url, cluster=cluster, kills=2, receiver_down=3,
                                   database_down=3, drain_limit=60)
    assert_nothing_lost(figures)
    assert figures.database_down_seconds == 3 and figures.posts_refused > 0, figures
