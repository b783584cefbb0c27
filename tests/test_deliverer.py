"""The deliverer against a real receiver: signed, in order, retried with backoff, given up
after the retry window, one endpoint never holding up another, leases shared by several
deliverers; the events command and the metrics show where each endpoint stands."""

from __future__ import annotations

import doctest
import json
import logging
import os
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from jsonschema import Draft202012Validator

from app import create_app
from commentsvc.operations import deliverer as deliverer_module
from commentsvc.operations.deliverer import Deliverer
from commentsvc.storage import deliveries, engine, outbox
from conftest import Community
from harness.webhook_receiver import WebhookReceiver

SECRET = "test-webhook-secret-0123456789abcdef"
URL = "/api/comments/"


class Clock:
    """A clock the test moves (naive UTC, as the deliverer's)."""

    def __init__(self) -> None:
        self.now = outbox.now()

    def __call__(self):
        return self.now

    def advance(self, **delta) -> None:
        self.now += timedelta(**delta)


@pytest.fixture
def receiver():
    with WebhookReceiver(SECRET) as running:
        yield running


def hooked_app(app_factory, *urls, **config):
    return app_factory(COMMENTSVC_WEBHOOK_URLS=",".join(urls),
                       COMMENTSVC_WEBHOOK_SECRET=SECRET, COMMENTSVC_POST_RATE_LIMIT="",
                       **config)


def make_deliverer(app, clock=None, owner=None) -> Deliverer:
    with app.app_context():
        made = Deliverer(engine.get_engine(), app.extensions["commentsvc"].settings,
                         clock=clock or outbox.now, owner=owner)
        made.register()
    return made


def post_many(app, community, count: int, start: int = 0) -> list[int]:
    client = app.test_client()
    ids = []
    for n in range(start, start + count):
        response = client.post(URL, json={"content_type": "users.user", "object_id": 1,
                                          "body": f"comment {n}"},
                               headers=community.auth("bob"))
        assert response.status_code == 201
        ids.append(response.get_json()["id"])
    return ids


def endpoint_states(app) -> dict[str, deliveries.EndpointState]:
    with app.app_context(), engine.get_engine().connect() as conn:
        return {state.url: state for state in deliveries.states(conn)}


def test_docstring_examples_hold():
    assert doctest.testmod(deliverer_module).failed == 0


def test_every_event_arrives_signed_in_order_once(app_factory, receiver):
    app = hooked_app(app_factory, receiver.url)
    community = Community(app)
    ids = post_many(app, community, 5)
    client = app.test_client()
    client.patch(f"{URL}{ids[0]}/", json={"is_read": True}, headers=community.auth("ann"))
    client.delete(f"{URL}{ids[1]}/", headers=community.auth("bob"))
    assert make_deliverer(app).run_once() == 7
    events = receiver.events()
    assert [e["type"] for e in events] == ["comment.created"] * 5 + [
        "comment.read_changed", "comment.deleted"]
    assert [e["data"]["comment_id"] for e in events] == [*ids, ids[0], ids[1]]
    assert len(set(receiver.ids())) == 7
    first = receiver.received[0]["headers"]
    assert first["Commentsvc-Event-Type"] == "comment.created"
    assert first["Commentsvc-Event-Id"] == events[0]["id"]
    assert first["Commentsvc-Delivery-Attempt"] == "1"
    assert first["Content-Type"] == "application/json"
    assert first["User-Agent"].startswith("commentsvc-webhooks/")
    assert receiver.rejected == []
    # the second comment was deleted before delivery: its created event came without text
    assert events[1]["data"]["comment"]["body"] == ""
    assert make_deliverer(app).run_once() == 0  # nothing twice
    state = endpoint_states(app)[receiver.url]
    assert (state.delivered, state.pending, state.attempts) == (7, 0, 0)


def test_a_dead_endpoint_holds_up_no_other_and_is_retried_with_backoff(app_factory, receiver):
    with WebhookReceiver(SECRET) as broken:
        broken.fail_with = 503
        app = hooked_app(app_factory, broken.url, receiver.url)
        community = Community(app)
        post_many(app, community, 3)
        clock = Clock()
        deliverer = make_deliverer(app, clock)
        assert deliverer.run_once() == 3
        assert len(receiver.events()) == 3
        assert broken.requests == 1, "one attempt, then it waits"
        state = endpoint_states(app)[broken.url]
        assert (state.attempts, state.delivered, state.pending) == (1, 0, 3)
        assert state.last_error.startswith("HTTP 503")
        assert timedelta(seconds=0.5) <= state.next_attempt - clock.now <= timedelta(seconds=1)
        assert deliverer.run_once() == 0 and broken.requests == 1, "not due yet"
        waits = []
        for _ in range(4):
            clock.advance(seconds=700)
            deliverer.run_once()
            state = endpoint_states(app)[broken.url]
            waits.append((state.next_attempt - clock.now).total_seconds())
        assert broken.requests == 5
        assert (1 <= waits[0] <= 2 and 2 <= waits[1] <= 4 and 4 <= waits[2] <= 8
                and 8 <= waits[3] <= 16), waits
        broken.fail_with = None  # it came back
        clock.advance(seconds=700)
        assert deliverer.run_once() == 3
        arrived = broken.received
        assert [item["event"]["data"]["comment_id"] for item in arrived] == [
            e["data"]["comment_id"] for e in receiver.events()], "the same order"
        assert arrived[0]["headers"]["Commentsvc-Delivery-Attempt"] == "6"
        assert endpoint_states(app)[broken.url].failed_attempts == 5


def test_an_event_failing_for_the_whole_window_is_given_up_and_listed(
        app_factory, receiver):
    app = hooked_app(app_factory, receiver.url, COMMENTSVC_WEBHOOK_RETRY_HOURS="1")
    community = Community(app)
    _, second_id = post_many(app, community, 2)
    clock = Clock()
    deliverer = make_deliverer(app, clock)
    receiver.fail_with = 500
    deliverer.run_once()
    clock.advance(minutes=59)
    deliverer.run_once()
    runner = app.test_cli_runner()
    failing = runner.invoke(args=["events"])
    assert failing.exit_code == 1
    assert f"{receiver.url} [failing]" in failing.output
    assert "event 1: 2 failed attempt(s)" in failing.output and "HTTP 500" in failing.output
    clock.advance(minutes=2)  # past the hour since the first failure
    deliverer.run_once()  # event 1 given up; event 2 fails its first attempt
    state = endpoint_states(app)[receiver.url]
    assert (state.delivered_through, state.given_up, state.attempts) == (1, 1, 1)
    receiver.fail_with = None
    clock.advance(minutes=1)
    assert deliverer.run_once() == 1
    assert [e["data"]["comment_id"] for e in receiver.events()] == [second_id]
    listed = runner.invoke(args=["events"])
    assert listed.exit_code == 1  # something was given up on
    assert "Given up on" in listed.output and "comment.created" in listed.output
    assert "after 3 attempt(s): HTTP 500" in listed.output


def test_a_lease_keeps_a_second_deliverer_off_until_it_runs_out(app_factory, receiver):
    app = hooked_app(app_factory, receiver.url, COMMENTSVC_WEBHOOK_LEASE_SECONDS="30")
    community = Community(app)
    post_many(app, community, 2)
    clock = Clock()
    first = make_deliverer(app, clock, owner="first")
    second = make_deliverer(app, clock, owner="second")
    with app.app_context():
        held = deliveries.claim(first.engine, receiver.url, "first", clock.now, 30)
    assert held is not None
    assert second.run_once() == 0, "the first holds it"
    clock.advance(seconds=31)  # the first froze; its lease ran out
    assert second.run_once() == 2
    event = deliveries.events_after(first.engine, 0, 1)[0]
    assert not deliveries.delivered(first.engine, held, event.id, clock.now, 30), (
        "a deliverer whose lease was taken over changes nothing")
    assert endpoint_states(app)[receiver.url].delivered_through == 2


def test_several_deliverers_at_once_deliver_each_event(app_factory, receiver):
    app = hooked_app(app_factory, receiver.url, COMMENTSVC_WEBHOOK_POLL_SECONDS="0.05")
    community = Community(app)
    post_many(app, community, 30)
    stop = threading.Event()
    workers = [make_deliverer(app, owner=f"node-{n}") for n in range(3)]
    threads = [threading.Thread(target=w.serve, args=(receiver.url, stop)) for w in workers]
    for thread in threads:
        thread.start()
    try:
        post_many(app, community, 30, start=30)
        events = receiver.wait_for(60)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    ids = [e["data"]["comment_id"] for e in events]
    assert len(set(receiver.ids())) == 60
    assert ids == sorted(ids), "in order, whichever deliverer sent each"


def test_the_deliver_command_refuses_to_start_unconfigured(app_factory, receiver):
    app = app_factory()
    result = app.test_cli_runner().invoke(args=["deliver", "--once"])
    assert result.exit_code == 2
    assert "COMMENTSVC_WEBHOOK_URLS is empty" in result.output
    unsigned = app_factory(COMMENTSVC_WEBHOOK_URLS=receiver.url)
    result = unsigned.test_cli_runner().invoke(args=["deliver", "--once"])
    assert result.exit_code == 2 and "COMMENTSVC_WEBHOOK_SECRET is empty" in result.output
    short = hooked_app(app_factory, receiver.url, COMMENTSVC_WEBHOOK_LEASE_SECONDS="5")
    result = short.test_cli_runner().invoke(args=["deliver", "--once"])
    assert result.exit_code == 2 and "must be longer" in result.output


def test_the_deliver_command_sends_what_is_due(app_factory, receiver):
    app = hooked_app(app_factory, receiver.url)
    community = Community(app)
    post_many(app, community, 3)
    runner = app.test_cli_runner()
    result = runner.invoke(args=["deliver", "--once"])
    assert result.exit_code == 0, result.output
    assert "Delivered 3 event(s)." in result.output
    assert len(receiver.events()) == 3
    listed = runner.invoke(args=["events"])
    assert listed.exit_code == 0, listed.output
    assert "Events: 3 kept, newest id 3." in listed.output
    assert f"{receiver.url} [ok] delivered 3, waiting 0, lag 0.0 s" in listed.output


def test_an_endpoint_no_longer_configured_stops_holding_events_back(app_factory, receiver):
    app = hooked_app(app_factory, receiver.url, "http://127.0.0.1:9/gone")
    make_deliverer(app)
    replaced = create_app({**app.config, "COMMENTSVC_WEBHOOK_URLS": receiver.url})
    make_deliverer(replaced)  # the same database, one endpoint fewer
    states = endpoint_states(replaced)
    assert states["http://127.0.0.1:9/gone"].active is False
    assert states[receiver.url].active is True
    with replaced.app_context():
        engine.get_engine().dispose()


def test_metrics_give_delivered_failed_and_lag(app_factory, receiver):
    app = hooked_app(app_factory, receiver.url)
    community = Community(app)
    post_many(app, community, 2)
    receiver.fail_with = 500
    make_deliverer(app).run_once()
    text = app.test_client().get("/metrics").get_data(as_text=True)
    label = f'endpoint="{receiver.url}"'
    assert f"commentsvc_webhook_delivered_total{{{label}}} 0.0" in text
    assert f"commentsvc_webhook_failed_attempts_total{{{label}}} 1.0" in text
    assert f"commentsvc_webhook_given_up_total{{{label}}} 0.0" in text
    assert f"commentsvc_webhook_pending_events{{{label}}} 2.0" in text
    lag = next(line for line in text.splitlines()
               if line.startswith(f"commentsvc_webhook_lag_seconds{{{label}}}"))
    assert float(lag.split()[-1]) >= 0
    assert "commentsvc_events_kept 2.0" in text


def test_each_event_sent_is_the_body_and_headers_the_openapi_webhooks_give(
        app_factory, receiver):
    app = hooked_app(app_factory, receiver.url)
    community = Community(app)
    [first] = post_many(app, community, 1)
    client = app.test_client()
    client.patch(f"{URL}{first}/", json={"is_read": True}, headers=community.auth("ann"))
    client.delete(f"{URL}{first}/", headers=community.auth("bob"))
    assert app.test_cli_runner().invoke(args=["erase-user", "2"]).exit_code == 0
    make_deliverer(app).run_once()
    doc = client.get("/api/schema/").get_json()
    seen = set()
    for item in receiver.received:
        event = item["event"]
        operation = doc["webhooks"][event["type"]]["post"]
        schema = operation["requestBody"]["content"]["application/json"]["schema"]
        validator = Draft202012Validator({**schema, "components": doc["components"]})
        assert [e.message for e in validator.iter_errors(event)] == [], event
        assert {p["name"] for p in operation["parameters"]} <= set(item["headers"])
        seen.add(event["type"])
    assert seen == {"comment.created", "comment.read_changed", "comment.deleted",
                    "comment.erased"}


def test_the_installed_command_runs_deliver_too(tmp_path, receiver):
    """`commentsvc deliver` is the same command as `flask --app app deliver`."""
    environ = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'c.sqlite3'}",
               "COMMENTSVC_WEBHOOK_URLS": receiver.url, "COMMENTSVC_WEBHOOK_SECRET": SECRET}
    ran = subprocess.run(
        [sys.executable, "-c", "from commentsvc.standalone import cli; cli()", "deliver",
         "--once"], env=environ, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "Delivered 0 event(s).\n"
    del environ["COMMENTSVC_WEBHOOK_SECRET"]
    refused = subprocess.run(
        [sys.executable, "-c", "from commentsvc.standalone import cli; cli()", "deliver"],
        env=environ, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert refused.returncode == 2
    assert "COMMENTSVC_WEBHOOK_SECRET is empty" in refused.stderr


def test_the_alarm_ends_once_nothing_fails_and_nothing_was_given_up_lately(
        app_factory, receiver):
    with WebhookReceiver(SECRET) as dead:
        dead.fail_with = 500
        app = hooked_app(app_factory, receiver.url, dead.url,
                         COMMENTSVC_WEBHOOK_RETRY_HOURS="0.001")
        community = Community(app)
        post_many(app, community, 1)
        clock = Clock()
        deliverer = make_deliverer(app, clock)
        deliverer.run_once()
        clock.advance(seconds=10)
        deliverer.run_once()  # given up on at the dead endpoint
        runner = app.test_cli_runner()
        assert runner.invoke(args=["events"]).exit_code == 1
        with app.app_context(), engine.get_engine().begin() as conn:
            conn.execute(sa.text("UPDATE commentsvc_webhook_failure SET given_up_at = :t")
                         .bindparams(sa.bindparam("t", type_=sa.DateTime())),
                         {"t": outbox.now() - timedelta(hours=25)})
        quiet = runner.invoke(args=["events"])
        assert quiet.exit_code == 0, quiet.output
        assert "Given up on" in quiet.output  # still listed, no longer alarming
        assert runner.invoke(args=["events", "--alarm-hours", "26"]).exit_code == 1
        for hours in ("nan", "inf", "1e400", "1e7"):  # a usage error, not a traceback
            refused = runner.invoke(args=["events", "--alarm-hours", hours])
            assert refused.exit_code == 2 and "--alarm-hours" in refused.output, refused.output
            assert "Traceback" not in refused.output
        post_many(app, community, 1)
        deliverer.run_once()  # the dead endpoint fails again: it alarms
        assert runner.invoke(args=["events"]).exit_code == 1
        replaced = create_app({**app.config, "COMMENTSVC_WEBHOOK_URLS": receiver.url})
        make_deliverer(replaced)  # the dead endpoint is no longer configured
        shown = replaced.test_cli_runner().invoke(args=["events"])
        assert shown.exit_code == 0, shown.output
        assert f"{dead.url} [failing, not configured]" in shown.output
        with replaced.app_context():
            engine.get_engine().dispose()


def test_deliver_once_adds_its_endpoints_and_prunes(app_factory, receiver):
    app = hooked_app(app_factory, receiver.url, COMMENTSVC_EVENT_RETENTION_HOURS="0.0001")
    make_deliverer(app)
    community = Community(app)
    post_many(app, community, 3)
    other = create_app({**app.config, "COMMENTSVC_WEBHOOK_URLS": "http://127.0.0.1:9/x"})
    result = other.test_cli_runner().invoke(args=["deliver", "--once"])
    assert result.exit_code == 0, result.output
    assert endpoint_states(app)[receiver.url].active is True, "--once deactivates nothing"
    time.sleep(0.5)  # past the retention
    assert app.test_cli_runner().invoke(args=["deliver", "--once"]).exit_code == 0
    with app.app_context(), engine.get_engine().connect() as conn:
        assert outbox.totals(conn) == (3, 3), "the other endpoint lacks them: kept"
    make_deliverer(app)  # a deliverer of the configuration: the other is not in it
    assert app.test_cli_runner().invoke(args=["deliver", "--once"]).exit_code == 0
    with app.app_context(), engine.get_engine().connect() as conn:
        assert outbox.totals(conn) == (1, 3), "delivered everywhere and old: pruned"
    with other.app_context():
        engine.get_engine().dispose()


def test_the_standalone_deliverer_logs_each_line_once(tmp_path):
    """The standalone app writes JSON log lines; deliver adds no second copy of each."""
    url = f"sqlite:///{tmp_path / 'c.sqlite3'}"
    app = create_app({"TESTING": True, "COMMENTSVC_DATABASE_URL": url,
                      "COMMENTSVC_POST_RATE_LIMIT": ""})
    with app.app_context(), engine.get_engine().begin() as conn:
        engine.create_schema(conn)
    post_many(app, Community(app), 1)
    with app.app_context():
        engine.get_engine().dispose()
    environ = {**os.environ, "DATABASE_URL": url, "COMMENTSVC_WEBHOOK_SECRET": SECRET,
               "COMMENTSVC_WEBHOOK_URLS": "http://127.0.0.1:9/nobody-listens"}
    ran = subprocess.run([sys.executable, "-m", "flask", "--app", "app", "deliver", "--once"],
                         env=environ, capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).resolve().parents[1])
    assert ran.returncode == 0, ran.stderr
    failed = [line for line in ran.stderr.splitlines() if "failed (attempt 1;" in line]
    assert len(failed) == 1, ran.stderr
    assert json.loads(failed[0])["logger"] == "commentsvc.deliverer"


def test_the_documented_event_schemas_are_exact(app):
    """Each event schema admits its own type only, and requires every field."""
    doc = app.test_client().get("/api/schema/").get_json()
    schemas = doc["components"]["schemas"]
    for event_type, name in (("comment.created", "CommentCreatedEvent"),
                             ("comment.read_changed", "CommentReadChangedEvent"),
                             ("comment.deleted", "CommentDeletedEvent"),
                             ("comment.erased", "CommentErasedEvent")):
        assert schemas[name]["properties"]["type"]["enum"] == [event_type]
        assert schemas[name]["required"] == ["id", "type", "created", "data"]
        assert doc["webhooks"][event_type]["post"]["requestBody"]["content"][
            "application/json"]["schema"] == {"$ref": f"#/components/schemas/{name}"}
    assert set(schemas["CreatedData"]["required"]) == {
        "comment_id", "content_type", "object_id", "parent_id", "comment"}
    assert len(schemas["StoredComment"]["required"]) == 9


def secret_urls(receiver) -> tuple[str, str]:
    """Two endpoints at the receiver with a password and a token: alike once hidden."""
    base = f"http://admin:s3cretpw@127.0.0.1:{receiver.port}{receiver.path}"
    return f"{base}?token=abc", f"{base}?token=abd"


def assert_no_secret(text: str) -> None:
    for secret in ("s3cretpw", "abc", "abd"):
        assert secret not in text, text


def test_metrics_and_the_events_command_show_no_secret_of_an_endpoint_yet_keep_two_apart(
        app_factory, receiver):
    first, second = secret_urls(receiver)
    app = hooked_app(app_factory, first, second)
    post_many(app, Community(app), 2)
    assert make_deliverer(app).run_once() == 4
    # what is delivered and stored is the URL as configured, secrets and all
    assert sorted(item["path"] for item in receiver.received) == [
        "/hooks/comments?token=abc"] * 2 + ["/hooks/comments?token=abd"] * 2
    assert {item["headers"]["Authorization"] for item in receiver.received} == {
        "Basic YWRtaW46czNjcmV0cHc="}  # admin:s3cretpw
    assert set(endpoint_states(app)) == {first, second}
    text = app.test_client().get("/metrics").get_data(as_text=True)
    assert_no_secret(text)
    hidden = f"http://admin:***@127.0.0.1:{receiver.port}/hooks/comments?token=***"
    for number in (1, 2):
        assert (f'commentsvc_webhook_delivered_total{{endpoint="{hidden} ({number})"}} 2.0'
                in text), text
    listed = app.test_cli_runner().invoke(args=["events"])
    assert listed.exit_code == 0, listed.output
    assert_no_secret(listed.output)
    assert f"{hidden} (1) [ok] delivered 2" in listed.output
    assert f"{hidden} (2) [ok] delivered 2" in listed.output


def test_a_failing_endpoint_s_secrets_stay_out_of_logs_errors_and_the_events_command(
        app_factory, caplog):
    dead = "http://admin:s3cretpw@127.0.0.1:9/gone?token=abc"
    app = hooked_app(app_factory, dead, COMMENTSVC_WEBHOOK_RETRY_HOURS="1")
    post_many(app, Community(app), 1)
    clock = Clock()
    deliverer = make_deliverer(app, clock)
    caplog.set_level(logging.WARNING, "commentsvc.deliverer")
    deliverer.run_once()
    clock.advance(minutes=61)
    deliverer.run_once()  # given up
    messages = [r.getMessage() for r in caplog.records if r.name == "commentsvc.deliverer"]
    assert len(messages) == 2
    assert "to http://admin:***@127.0.0.1:9/gone?token=*** failed" in messages[0]
    assert "for http://admin:***@127.0.0.1:9/gone?token=*** after 2" in messages[1]
    assert "url: /gone?token=***" in messages[1], "the error of requests, scrubbed"
    for message in messages:
        assert_no_secret(message)
    state = endpoint_states(app)[dead]  # stored as configured
    assert_no_secret(state.last_error or "")
    listed = app.test_cli_runner().invoke(args=["events"])
    assert listed.exit_code == 1
    assert "UTC http://admin:***@127.0.0.1:9/gone?token=*** event 1" in listed.output
    assert_no_secret(listed.output)


def test_an_error_kept_before_secrets_were_scrubbed_is_shown_without_them(
        app_factory, receiver):
    first, _ = secret_urls(receiver)
    app = hooked_app(app_factory, first)
    post_many(app, Community(app), 1)
    make_deliverer(app)
    with app.app_context(), engine.get_engine().begin() as conn:
        conn.execute(sa.text(
            "UPDATE commentsvc_webhook_endpoint SET attempts = 1, first_failure = :now, "
            "last_error = :error WHERE url = :url"),
            {"now": outbox.now(), "url": first,
             "error": "ConnectionError: Max retries exceeded with url: "
                      "/hooks/comments?token=abc; s3cretpw"})
    listed = app.test_cli_runner().invoke(args=["events"])
    assert listed.exit_code == 1
    assert "url: /hooks/comments?token=***; ***" in listed.output
    assert_no_secret(listed.output)


def test_the_deliverer_s_threads_are_named_without_secrets(app_factory, receiver):
    first, second = secret_urls(receiver)
    deliverer = make_deliverer(hooked_app(app_factory, first, second))
    stop = threading.Event()
    running = threading.Thread(target=deliverer.run, args=(stop,))
    running.start()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            names = [t.name for t in threading.enumerate() if t.name.startswith("deliver ")]
            if len(names) == 2:
                break
            time.sleep(0.01)
    finally:
        stop.set()
        running.join(10)
    hidden = f"deliver http://admin:***@127.0.0.1:{receiver.port}/hooks/comments?token=***"
    assert sorted(names) == [f"{hidden} (1)", f"{hidden} (2)"]
