"""The command line as a newcomer meets it: start-up problems as one line with exit 2 (a
traceback only with FLASK_DEBUG), `commentsvc --version`, `init-db --drop` that asks, and
progress and summaries that say what happened."""

from __future__ import annotations

import os
import pty
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from test_interchange import counts, import_file, invoke

from commentsvc import __version__
from commentsvc.operations import front, progress
from commentsvc.standalone import cli
from conftest import ADMIN_URL, SAMPLE_COPY
from harness.servers import silent_database

ROOT = Path(__file__).resolve().parents[1]
# The ports check and the production launcher, run as `make run` and `make serve` run them.
PORTS = [sys.executable, "-m", "commentsvc.operations.ports"]
SERVING = [sys.executable, "-m", "commentsvc.operations.serving"]


def flask(*args: str, env: dict[str, str] | None = None, **kwargs) -> subprocess.CompletedProcess:
    """`flask --app app ARGS` in the checkout, as the README runs it."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("COMMENTSVC_", "FLASK_"))
               and k != "DATABASE_URL"}
    return subprocess.run([sys.executable, "-m", "flask", "--app", "app", *args], cwd=ROOT,
                          env={**environ, **(env or {})}, capture_output=True, text=True,
                          timeout=120, check=False, **kwargs)


def assert_one_line_error(done: subprocess.CompletedProcess, *parts: str) -> None:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("Error: ")
    for part in parts:
        assert part in lines[0]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_bad_setting_is_one_line_naming_it_and_the_fix(tmp_path):
    env = {"DATABASE_URL": f"sqlite:///{tmp_path / 'x.sqlite3'}", "COMMENTSVC_PAGE_SIZE": "0"}
    assert_one_line_error(flask("init-db", env=env), "COMMENTSVC_PAGE_SIZE='0'",
                          "at least 1", "unset the variable")
    assert not (tmp_path / "x.sqlite3").exists()  # nothing was made


def test_a_setting_naming_a_missing_function_is_one_line_too(tmp_path):
    env = {"DATABASE_URL": f"sqlite:///{tmp_path / 'x.sqlite3'}",
           "COMMENTSVC_CURRENT_USER": "nowhere_module:current_user"}
    assert_one_line_error(flask("init-db", env=env), "COMMENTSVC_CURRENT_USER",
                          "No module named 'nowhere_module'")


def test_an_unsupported_database_url_is_one_line(tmp_path):
    assert_one_line_error(flask("init-db", env={"DATABASE_URL": "mysql://db/comments"}),
                          "DATABASE_URL='mysql://db/comments'", "postgresql://")


def test_debug_shows_the_traceback(tmp_path):
    env = {"DATABASE_URL": f"sqlite:///{tmp_path / 'x.sqlite3'}", "COMMENTSVC_PAGE_SIZE": "0"}
    for debug in (flask("init-db", env={**env, "FLASK_DEBUG": "1"}),
                  flask("--debug", "init-db", env=env)):
        assert debug.returncode == 1
        assert "Traceback" in debug.stderr and "SettingsError" in debug.stderr


def test_a_postgresql_server_that_is_down_is_one_line(tmp_path):
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/comments"
    assert_one_line_error(flask("init-db", env={"DATABASE_URL": url}),
                          "Cannot reach the PostgreSQL server", "Connection refused",
                          "start it, or fix DATABASE_URL")


def test_a_missing_postgresql_database_is_one_line_with_createdb(postgres_url):
    name = f"commentsvc_missing_{uuid.uuid4().hex[:8]}"
    url = sa.make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    for command in (["init-db"], ["seed", "--comments", "5"], ["create-token", "1"]):
        assert_one_line_error(flask(*command, env={"DATABASE_URL": url}),
                              f'database "{name}" does not exist', f"createdb {name}")


def test_a_server_that_takes_the_connection_and_says_nothing_is_one_line():
    """A frozen PostgreSQL (its postmaster stopped): the kernel takes the connection, no
    answer comes, and the connection's deadline gives up: one line, as for one that is
    down."""
    with silent_database() as url:
        done = flask("init-db", env={"DATABASE_URL": url, "COMMENTSVC_DB_CONNECT_TIMEOUT": "2"})
    assert_one_line_error(done, "Cannot reach the PostgreSQL server")


def test_a_missing_sqlite_folder_is_one_line(tmp_path):
    url = f"sqlite:///{tmp_path / 'no' / 'such' / 'folder' / 'x.sqlite3'}"
    assert_one_line_error(flask("init-db", env={"DATABASE_URL": url}),
                          "Cannot open the SQLite database file")


def test_a_taken_port_is_one_line_before_anything_starts():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        taken = subprocess.run(PORTS + ["--port", str(port)],
                               cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert_one_line_error(taken, f"Port {port} on 127.0.0.1 is already in use",
                          f"PORT={port + 1} make run")
    assert taken.stdout == ""
    free = subprocess.run(PORTS + ["--port", str(port)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert (free.returncode, free.stdout, free.stderr) == (0, "", "")


def test_make_run_on_a_taken_port_stops_before_serving(tmp_path):
    if not (ROOT / ".venv" / "bin" / "python").exists():
        pytest.skip("make run needs the checkout's .venv (make install)")
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        done = subprocess.run(["make", "--no-print-directory", "-o", ".venv/bin/.installed",
                               "run", f"PORT={port}"], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)
    assert done.returncode == 2
    assert "Serving comments" not in done.stdout
    assert f"Error: Port {port} on 127.0.0.1 is already in use" in done.stderr
    assert f"choose another port: PORT={port + 1} make run." in done.stderr
    assert "Traceback" not in done.stderr


def test_commentsvc_serve_on_a_taken_port_is_one_line(tmp_path):
    if front.find_nginx() is None:
        pytest.skip("commentsvc serve needs nginx")
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        done = subprocess.run(SERVING + ["--port", str(port),
                               "--runtime-dir", str(tmp_path / "run")], cwd=ROOT,
                              capture_output=True, text=True, timeout=60)
    assert_one_line_error(done, f"Port {port} on 127.0.0.1 is already in use",
                          f"commentsvc serve --port {port + 1}")


def test_commentsvc_version_is_its_own():
    shown = CliRunner().invoke(cli, ["--version"])
    assert shown.exit_code == 0
    assert shown.stdout.startswith(f"commentsvc {__version__} (Flask ")


def test_init_db_drop_refuses_without_a_terminal_or_yes(app, runner):
    invoke(runner, ["seed", "--comments", "20", "--targets", "2"])
    before = counts(app)
    refused = invoke(runner, ["init-db", "--drop"])
    assert refused.exit_code == 2
    assert refused.stderr == ("Error: init-db --drop deletes every comment, user and key of "
                              "the service; nobody is at a terminal to confirm: add --yes.\n")
    assert counts(app) == before
    dropped = invoke(runner, ["init-db", "--drop", "--yes"])
    assert dropped.exit_code == 0
    assert dropped.stdout == "Dropped the service's tables; database schema ready.\n"
    assert counts(app)["commentsvc_comment"] == 0


def ask_on_a_terminal(database: str, answer: bytes) -> tuple[int, str]:
    """`init-db --drop` on a pseudo-terminal, answering the question with ``answer``."""
    leader, follower = pty.openpty()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("COMMENTSVC_")}
    process = subprocess.Popen([sys.executable, "-m", "flask", "--app", "app", "init-db",
                                "--drop"], cwd=ROOT, stdin=follower, stdout=follower,
                               stderr=follower, env={**environ, "DATABASE_URL": database})
    os.close(follower)
    os.write(leader, answer)
    output = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the terminal closed: the command ended
            break
        if not chunk:
            break
        output += chunk
    os.close(leader)
    return process.wait(timeout=60), output.decode(errors="replace")


def test_init_db_drop_asks_on_a_terminal(tmp_path):
    database = f"sqlite:///{tmp_path / 'asked.sqlite3'}"
    seeded = flask("seed", "--comments", "10", "--targets", "2",
                   env={"DATABASE_URL": database})
    assert seeded.returncode == 0, seeded.stderr

    def comments() -> int:
        engine = sa.create_engine(database)
        with engine.connect() as conn:
            found = conn.execute(sa.text("SELECT COUNT(*) FROM commentsvc_comment")).scalar()
        engine.dispose()
        return found

    status, output = ask_on_a_terminal(database, b"n\n")
    assert "deletes every comment, user, comic page and key of the service. Go on?" in output
    assert (status, "Nothing dropped." in output, comments()) == (1, True, 10)
    status, output = ask_on_a_terminal(database, b"y\n")
    assert (status, "Dropped the service's tables" in output, comments()) == (0, True, 0)


def test_import_shows_a_bar_on_a_terminal_and_one_line_otherwise(app, runner, monkeypatch):
    quiet = import_file(runner, SAMPLE_COPY)
    assert quiet.exit_code == 0, quiet.output
    assert quiet.stderr == "" and quiet.stdout.count("\n") == 1
    assert quiet.stdout.startswith("Imported ")
    monkeypatch.setattr(progress, "on_terminal", lambda: True)
    shown = import_file(runner, SAMPLE_COPY)
    assert f"Importing {SAMPLE_COPY}" in shown.stderr
    assert shown.stdout.startswith("Imported 0 users, 0 comic pages, 0 comments")


def test_export_says_how_many_records_it_wrote(app, runner, tmp_path, monkeypatch):
    invoke(runner, ["seed", "--comments", "30", "--targets", "2"])
    out = tmp_path / "out.ndjson"
    done = invoke(runner, ["export", str(out)])
    records = len(out.read_text(encoding="utf-8").splitlines())
    assert done.stdout == ""
    assert done.stderr.startswith(f"Exported {records:,} records to {out} in ")
    monkeypatch.setattr(progress, "on_terminal", lambda: True)
    assert "Exporting" in invoke(runner, ["export", str(out)]).stderr


def test_progress_counting_passes_every_item_and_counts_all_of_them():
    advanced: list[int] = []
    items = list(progress.counting(iter(range(25)), advanced.append, every=10))
    assert items == list(range(25))
    assert advanced == [10, 10, 5]
    sized = list(progress.counting([b"ab\n", b"c\n"], advanced.append, size=len, every=10))
    assert sized == [b"ab\n", b"c\n"] and advanced[-1] == 5
