"""One JSON line per request with its id; an unhandled error's traceback goes in the log,
never in the response."""

from __future__ import annotations

import json
import logging
import re

import pytest
from flask import Flask
from flask_sqlalchemy import SQLAlchemy

from commentsvc import comments_api, ops_api
from commentsvc.operations import metrics, request_log
from commentsvc.storage import engine
from commentsvc.web import request_args

KEYS = ["time", "level", "method", "path", "status", "duration_ms", "request_id",
        "remote_addr"]


@pytest.fixture
def lines(caplog):
    """The request log's lines so far, as the JSON formatter writes them, parsed."""
    caplog.set_level(logging.INFO, logger="commentsvc.request")
    formatter = request_log.JsonFormatter()

    def read() -> list[dict]:
        return [json.loads(formatter.format(record)) for record in caplog.records
                if record.name == "commentsvc.request"]

    return read


def test_one_line_per_request_with_every_field(client, lines):
    response = client.get("/api/comments/?page_size=5", environ_base={"REMOTE_ADDR": "10.1.2.3"})
    [line] = lines()
    assert list(line) == KEYS
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", line["time"])
    assert line["level"] == "INFO"
    assert (line["method"], line["path"], line["status"]) == ("GET", "/api/comments/", 200)
    assert isinstance(line["duration_ms"], float) and line["duration_ms"] > 0
    assert line["remote_addr"] == "10.1.2.3"
    assert re.fullmatch(r"[0-9a-f]{32}", line["request_id"])
    assert response.headers["X-Request-ID"] == line["request_id"]


def test_a_sane_request_id_is_kept_and_echoed(client, lines):
    response = client.get("/healthz", headers={"X-Request-ID": "edge-7f3a:1"})
    assert response.headers["X-Request-ID"] == "edge-7f3a:1"
    assert lines()[-1]["request_id"] == "edge-7f3a:1"


@pytest.mark.parametrize("sent", ["", "two words", "x" * 129, "quote\"d", "tab\there",
                                  "caf\u00e9"])
def test_an_odd_request_id_is_replaced(client, lines, sent):
    response = client.get("/healthz", headers={"X-Request-ID": sent})
    made = response.headers["X-Request-ID"]
    assert re.fullmatch(r"[0-9a-f]{32}", made)
    assert lines()[-1]["request_id"] == made


@pytest.mark.parametrize(("sent", "kept"), [
    ("abc", True), ("A1._:+/=-", True), ("x" * 128, True), ("x" * 129, False),
    ("a b", False), ("a;b", False), (None, False),
])
def test_which_request_ids_are_sane(sent, kept):
    assert (request_log.request_id_for(sent) == sent) is kept


def test_errors_are_logged_with_their_traceback_and_answered_without(client, lines,
                                                                       monkeypatch):
    def broken(*_args, **_kwargs):
        raise RuntimeError("the secret internals broke")

    monkeypatch.setattr(request_args, "list_filters", broken)
    response = client.get("/api/comments/", headers={"X-Request-ID": "req-500"})
    assert response.status_code == 500
    assert response.get_json() == {"detail": "A server error occurred."}
    body = response.get_data(as_text=True)
    assert "Traceback" not in body and "secret" not in body
    [line] = lines()
    assert line["level"] == "ERROR"
    assert (line["status"], line["request_id"]) == (500, "req-500")
    assert line["exc_info"].startswith("Traceback (most recent call last):")
    assert "in broken" in line["exc_info"]
    assert line["exc_info"].endswith("RuntimeError: the secret internals broke")


def test_a_database_outage_is_a_warning_line(lines):
    from test_health import unreachable_app

    response = unreachable_app().test_client().get("/api/comments/")
    assert response.status_code == 503
    assert lines()[-1]["level"] == "WARNING"
    assert lines()[-1]["status"] == 503


def test_other_lines_of_a_request_carry_its_id(client, caplog):
    caplog.set_level(logging.INFO, logger="commentsvc")
    seen = []

    @client.application.get("/log-something")
    def log_something():
        logging.getLogger("commentsvc.test").info("inside %s", "the request")
        seen.append(request_log.JsonFormatter().format(caplog.records[-1]))
        return "ok"

    client.get("/log-something", headers={"X-Request-ID": "abc"})
    line = json.loads(seen[0])
    assert line == {"time": line["time"], "level": "INFO", "logger": "commentsvc.test",
                    "message": "inside the request", "request_id": "abc"}


def test_standalone_lines_go_to_stderr_as_json(client, capsys):
    capsys.readouterr()
    client.get("/api/comments/", headers={"X-Request-ID": "to-stderr"})
    written = [json.loads(text) for text in capsys.readouterr().err.splitlines()
               if text.startswith("{")]
    assert [line["request_id"] for line in written] == ["to-stderr"]
    assert list(written[0]) == KEYS


def test_with_nothing_else_listening_lines_are_written_without_a_log_record(
        client, capsys, monkeypatch):
    """As under gunicorn: the root logger has no handlers (pytest's are set aside)."""
    monkeypatch.setattr(logging.root, "handlers", [])
    built = []
    make_record = logging.Logger.makeRecord
    monkeypatch.setattr(logging.Logger, "makeRecord",
                        lambda self, *args, **kwargs: built.append(args[0])
                        or make_record(self, *args, **kwargs))
    capsys.readouterr()
    client.get("/api/comments/", headers={"X-Request-ID": "direct-1"})
    written = [json.loads(text) for text in capsys.readouterr().err.splitlines()]
    assert built == []
    [line] = written
    assert list(line) == KEYS
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", line["time"])
    assert (line["level"], line["path"], line["status"], line["request_id"]) == (
        "INFO", "/api/comments/", 200, "direct-1")


def test_a_listening_host_handler_gets_every_line_as_a_record(client, monkeypatch):
    monkeypatch.setattr(logging.root, "handlers", [])
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    logging.getLogger("commentsvc.request").addHandler(handler)
    try:
        assert request_log.sole_json_handler(logging.INFO) is None
        client.get("/healthz", headers={"X-Request-ID": "to-host"})
    finally:
        logging.getLogger("commentsvc.request").removeHandler(handler)
    assert [record.fields["request_id"] for record in records] == ["to-host"]
    assert request_log.sole_json_handler(logging.INFO) is not None  # standalone again


def make_host(database_url: str, with_ops: bool) -> Flask:
    """A host site with comments under /community, and its own page at /."""
    host = Flask("host_site")
    host.config["SQLALCHEMY_DATABASE_URI"] = database_url
    SQLAlchemy().init_app(host)
    host.add_url_rule("/", "home", lambda: "host home")
    host.register_blueprint(comments_api, url_prefix="/community")
    if with_ops:
        host.register_blueprint(ops_api, url_prefix="/community")
    with host.app_context(), engine.get_engine().begin() as conn:
        engine.drop_schema(conn)
        engine.create_schema(conn)
    return host


@pytest.mark.parametrize("with_ops", [False, True])
def test_mounted_comments_are_logged_and_counted_and_the_hosts_pages_are_not(
        database_url, lines, with_ops):
    host = make_host(database_url, with_ops)
    try:
        client = host.test_client()
        assert client.get("/").data == b"host home"
        assert client.get("/community/api/comments/").status_code == 200
        assert client.get("/community/api/nothing/").status_code == 404
        assert [(line["path"], line["status"]) for line in lines()] == [
            ("/community/api/comments/", 200), ("/community/api/nothing/", 404)]
        assert "X-Request-ID" not in client.get("/").headers
        exposed = client.get("/community/metrics")
        if not with_ops:
            assert exposed.status_code == 404
            text = metrics.exposition(host).get_data(as_text=True)
        else:
            assert exposed.status_code == 200
            assert client.get("/community/readyz").get_json() == {"status": "ready"}
            text = exposed.get_data(as_text=True)
        assert ('commentsvc_requests_total{endpoint="commentsvc.comment_list",method="GET",'
                'status="200"} 1.0') in text
        assert 'endpoint="unmatched",method="GET",status="404"} 1.0' in text
    finally:
        with host.app_context():
            engine.get_engine().dispose()


def test_library_errors_with_their_tracebacks_are_json_lines(client, capsys, monkeypatch):
    """SQLAlchemy's pool logs "Exception during reset" with a traceback when it gives up a
    dead connection: one JSON line with the traceback inside, never plain text."""
    monkeypatch.setattr(logging.root, "handlers", [])  # as under gunicorn
    capsys.readouterr()
    try:
        raise ConnectionError("server closed the connection unexpectedly")
    except ConnectionError:
        logging.getLogger("sqlalchemy.pool.impl.QueuePool").error(
            "Exception during reset or similar", exc_info=True)
    [text] = capsys.readouterr().err.splitlines()
    line = json.loads(text)
    assert (line["level"], line["logger"], line["message"]) == (
        "ERROR", "sqlalchemy.pool.impl.QueuePool", "Exception during reset or similar")
    assert line["exc_info"].startswith("Traceback (most recent call last):")
    assert line["exc_info"].endswith("server closed the connection unexpectedly")


def test_gunicorns_own_lines_are_json(capsys):
    from gunicorn.config import Config

    from commentsvc.operations.gunicorn_logging import JsonLogger

    config = Config()
    config.set("loglevel", "info")
    logger = JsonLogger(config)
    capsys.readouterr()
    logger.critical("WORKER TIMEOUT (pid:%s)", 1234)
    try:
        raise RuntimeError("a worker crashed")
    except RuntimeError:
        logger.exception("Error handling request /api/comments/")
    first, second = (json.loads(text) for text in capsys.readouterr().err.splitlines())
    assert (first["level"], first["logger"], first["message"]) == (
        "CRITICAL", "gunicorn.error", "WORKER TIMEOUT (pid:1234)")
    assert second["exc_info"].endswith("RuntimeError: a worker crashed")
