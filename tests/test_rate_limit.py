"""Posting is limited per user: 429 JSON with Retry-After past the limit, nothing written."""

from __future__ import annotations

import pytest
import redis
from sqlalchemy.exc import OperationalError

from app import create_app
from commentsvc.settings import SettingsError
from commentsvc.storage import engine, posting
from commentsvc.web import auth, current, write_batches
from conftest import REDIS_TEST_URL, Community, make_app, require_redis, table_rows
from helpers import assert_error

URL = "/api/comments/"
POST = {"content_type": "comics.comicpage", "object_id": 10, "body": "again"}
# POST as the view hands it to a batch, its fields checked.
POST_FIELDS = {**POST, "parent": None, "is_anonymous": False}


@pytest.fixture
def limited(app_factory):
    app = app_factory(COMMENTSVC_POST_RATE_LIMIT="2/minute")
    return app, Community(app), app.test_client()


def test_past_the_limit_a_post_is_429_with_retry_after(limited):
    app, community, client = limited
    for _ in range(2):
        assert client.post(URL, json=POST, headers=community.auth("ann")).status_code == 201
    before = table_rows(app)
    response = client.post(URL, json=POST, headers=community.auth("ann"))
    assert response.status_code == 429
    wait = int(response.headers["Retry-After"])
    assert 1 <= wait <= 60
    assert_error(response, 429,
                 f"Request was throttled. Expected available in {wait} second"
                 f"{'s' if wait != 1 else ''}.")
    assert table_rows(app) == before


def test_the_limit_is_per_user(limited):
    _, community, client = limited
    for _ in range(2):
        client.post(URL, json=POST, headers=community.auth("ann"))
    assert client.post(URL, json=POST, headers=community.auth("bob")).status_code == 201


def test_refused_posts_do_not_count(limited):
    _, community, client = limited
    for _ in range(5):
        response = client.post(URL, json={**POST, "body": ""}, headers=community.auth("ann"))
        assert response.status_code == 400
    for _ in range(2):
        assert client.post(URL, json=POST, headers=community.auth("ann")).status_code == 201


def test_posts_their_transaction_failed_to_write_do_not_count(limited, monkeypatch):
    """A post answered 503 wrote nothing (its client sends it again): it must not use up
    the user's turns, as it did when a post was counted before its comment was written."""
    app, community, client = limited
    real = posting.write_batch

    def failing(*_args, **_kwargs):
        raise OperationalError("INSERT", {}, Exception("canceling statement: lock timeout"))

    monkeypatch.setattr(posting, "write_batch", failing)
    before = table_rows(app)
    for _ in range(3):
        response = client.post(URL, json=POST, headers=community.auth("ann"))
        assert response.status_code == 503
    assert table_rows(app) == before
    monkeypatch.setattr(posting, "write_batch", real)
    for _ in range(2):
        assert client.post(URL, json=POST, headers=community.auth("ann")).status_code == 201
    assert client.post(URL, json=POST, headers=community.auth("ann")).status_code == 429


def test_posts_written_together_count_each(limited):
    """Posts by one user that meet in one batch are checked against each other too."""
    app, community, client = limited
    service = current.of(app)
    viewer = auth.Viewer(1, False, "ann", None)
    posts = [write_batches.PostRequest(viewer, {**POST_FIELDS, "body": f"post {n}"}, None,
                                       lambda comment_id: f"/api/comments/{comment_id}/")
             for n in range(3)]
    with app.app_context(), app.test_request_context():
        outcomes = write_batches.write(service, lambda: posts)
    assert [type(outcome).__name__ for outcome in outcomes] == ["Posted", "Posted", "Throttled"]
    assert client.post(URL, json=POST, headers=community.auth("ann")).status_code == 429


def test_an_empty_limit_turns_it_off(app_factory):
    app = app_factory(COMMENTSVC_POST_RATE_LIMIT="")
    community, client = Community(app), app.test_client()
    for _ in range(35):
        assert client.post(URL, json=POST, headers=community.auth("ann")).status_code == 201


def test_the_default_allows_30_a_minute(client, community):
    for _ in range(30):
        assert client.post(URL, json=POST, headers=community.auth("ann")).status_code == 201
    assert client.post(URL, json=POST, headers=community.auth("ann")).status_code == 429


@pytest.mark.parametrize(("name", "value"), [("POST_RATE_LIMIT", "often"),
                                             ("RATE_LIMIT_STORAGE", "nowhere://")])
def test_bad_limit_settings_stop_the_service(name, value, tmp_path):
    with pytest.raises(SettingsError, match=f"COMMENTSVC_{name}"):
        make_app(f"sqlite:///{tmp_path / 'engine.sqlite3'}", **{f"COMMENTSVC_{name}": value})


REDIS_URL = REDIS_TEST_URL.rsplit("/", 1)[0] + "/15"


def test_redis_storage_shares_the_count_between_workers(app_factory):
    """Two apps on one database stand for two workers: with Redis they share one count."""
    require_redis(REDIS_URL)  # emptied; skipped without Redis, except in CI
    config = {"COMMENTSVC_POST_RATE_LIMIT": "2/minute",
              "COMMENTSVC_RATE_LIMIT_STORAGE": REDIS_URL}
    first = app_factory(**config)
    community = Community(first)
    second = create_app({"TESTING": True, **config,
                         "COMMENTSVC_DATABASE_URL": first.config["COMMENTSVC_DATABASE_URL"]})
    try:
        headers = community.auth("ann")
        assert first.test_client().post(URL, json=POST, headers=headers).status_code == 201
        assert second.test_client().post(URL, json=POST, headers=headers).status_code == 201
        assert second.test_client().post(URL, json=POST, headers=headers).status_code == 429
        assert first.test_client().post(URL, json=POST, headers=headers).status_code == 429
    finally:
        with second.app_context():
            engine.get_engine().dispose()
        redis.Redis.from_url(REDIS_URL).flushdb()


def test_a_failing_storage_counts_in_the_worker_with_one_warning(app_factory, caplog):
    """Redis down: posts are neither failed nor unlimited; this worker counts them."""
    import logging

    from test_health import closed_port

    app = app_factory(COMMENTSVC_POST_RATE_LIMIT="2/minute",
                      COMMENTSVC_RATE_LIMIT_STORAGE=f"redis://127.0.0.1:{closed_port()}")
    community = Community(app)
    client = app.test_client()
    caplog.set_level(logging.WARNING, logger="commentsvc")
    statuses = [client.post(URL, json=POST, headers=community.auth(name)).status_code
                for name in ("ann", "ann", "ann", "bob")]
    assert statuses == [201, 201, 429, 201]
    warnings = [r.getMessage() for r in caplog.records
                if "rate-limit storage" in r.getMessage()]
    assert len(warnings) == 1  # then Redis is left alone for a while
    assert "counting posts in this worker" in warnings[0]
