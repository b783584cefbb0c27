"""A client that retries its posts with an Idempotency-Key, under connections cut, workers
killed and the database stopped at random moments, ends with each post stored exactly
once (the short form of bench/retry_faults.py; see RELIABILITY.md, "Retried writes").

It serves a database of its own on a private PostgreSQL cluster; the shared server is
never touched.
"""

from __future__ import annotations

import pytest
from pg_cluster import skip_reason

from bench.retry_faults import KINDS, run

pytestmark = pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")


def test_retried_posts_are_stored_exactly_once_under_120_faults():
    report = run(faults_wanted=120, clients=4, weights=(0.7, 0.25, 0.05), max_seconds=120,
                 race_rounds=10)
    assert report["faults_injected"] == 120
    assert all(report["faults_by_kind"][kind] > 0 for kind in KINDS), report
    assert report["retries"] > 0 and report["posts_tried"] > 50, report
    assert report["unexpected_answers"] == [] and report["unfinished"] == 0, report
    assert report["duplicates"] == 0, report
    assert report["lost"] == 0, report
    assert report["one_id_per_post"], report
    assert report["posts_answered_201"] == report["posts_tried"], report
    # Before the faults: 10 times 8 requests with one key at once, each stored once; the
    # seven that came second waited for the writers' lock and got the first's answer.
    raced = report["same_key_at_once"]
    assert raced["answers_by_status"] == {"201": 80}, raced
    assert raced["replayed"] == 70 and raced["one_id_per_round"], raced
    assert raced["duplicates"] == 0, raced
