"""What a supervisor relies on: the `commentsvc serve` launcher stops and ends with its
children, gunicorn's workers end with their master (gunicorn.conf.py's post_fork hook),
and forwarded headers count under plain gunicorn only when a proxy is trusted.

The launcher tests need nginx: without it they skip, except in CI (CI=true), where they fail.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from test_front import require_nginx

from bench.slow_clients import Serve
from commentsvc.operations.serving import STOP_SECONDS
from commentsvc.storage import engine
from conftest import insert_records, make_app
from harness.mixed_load import Load, stop_and_verify
from harness.servers import (
    LIST,
    Gunicorn,
    free_port,
    prepare,
    request,
    scratch_database,
    silent_database,
)
from harness.waiting import within

ROOT = Path(__file__).resolve().parent.parent
SERVING = [sys.executable, "-m", "commentsvc.operations.serving"]
SUPERVISOR_SECONDS = 2  # how soon a restart must be able to bind the port again

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="PR_SET_PDEATHSIG is Linux's")


def alive(pid: int) -> bool:
    """The process exists and is not a zombie waiting for its parent."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def descendants(pid: int) -> set[int]:
    found = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True)
    children: dict[int, list[int]] = {}
    for line in found.stdout.splitlines():
        child, parent = map(int, line.split())
        children.setdefault(parent, []).append(child)
    todo, seen = [pid], set()
    while todo:
        for child in children.get(todo.pop(), []):
            seen.add(child)
            todo.append(child)
    return seen


def can_bind(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gunicorn and nginx do
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@pytest.fixture
def seeded_url(database_url, sample_records):
    """A database of each kind holding the sample (so lists have several pages)."""
    app = make_app(database_url)
    insert_records(app, sample_records)
    with app.app_context():
        engine.get_engine().dispose()
    return database_url


def test_a_killed_gunicorn_master_takes_its_workers_and_frees_the_port(seeded_url):
    server = Gunicorn(seeded_url, workers=2)
    try:
        workers = server.workers()
        assert len(workers) == 2
        os.kill(server.pid, signal.SIGKILL)
        server.process.wait()
        assert within(SUPERVISOR_SECONDS, lambda: not any(map(alive, workers)))
        assert within(SUPERVISOR_SECONDS, lambda: can_bind(server.port))
    finally:
        server.stop()


def next_url(base: str, forwarded_host: str = "public.example",
             forwarded_proto: str = "https") -> str:
    """The next_url of the list's first page, asked with forged forwarded headers."""
    import http.client
    import json
    import urllib.parse

    url = urllib.parse.urlsplit(base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    try:
        conn.request("GET", LIST, headers={"X-Forwarded-Proto": forwarded_proto,
                                           "X-Forwarded-Ssl": "on",
                                           "X-Forwarded-Host": forwarded_host})
        return json.loads(conn.getresponse().read())["p8n"]["next_url"]
    finally:
        conn.close()


def test_forwarded_headers_from_loopback_are_ignored_by_plain_gunicorn(seeded_url):
    with Gunicorn(seeded_url) as server:  # gunicorn.conf.py: forwarded_allow_ips = ""
        assert next_url(server.base) == f"{server.base}{LIST}?page=2"


def test_the_app_ignores_them_even_when_gunicorn_trusts_every_peer(seeded_url):
    """As under `gunicorn wsgi:app` without our configuration, whose default trusts
    loopback: gunicorn applies X-Forwarded-Proto, the app puts the socket's scheme back."""
    with Gunicorn(seeded_url, env={"GUNICORN_CMD_ARGS": "--forwarded-allow-ips=*"}) as server:
        assert next_url(server.base) == f"{server.base}{LIST}?page=2"


def test_a_trusted_proxy_is_honoured_under_gunicorn(seeded_url):
    with Gunicorn(seeded_url, env={"COMMENTSVC_TRUSTED_PROXIES": "1"}) as server:
        assert next_url(server.base) == f"https://public.example{LIST}?page=2"


def test_a_chain_of_trusted_proxies_is_honoured_under_gunicorn(seeded_url):
    """Two trusted hops, each adding its entry to the lists (OPERATIONS.md, "Forwarded
    headers"): the host and scheme are those the outer one saw, whatever a client put
    before them: the app reads forwarded lists as it did (nginx of `commentsvc serve`
    just sends no X-Forwarded-Host)."""
    with Gunicorn(seeded_url, env={"COMMENTSVC_TRUSTED_PROXIES": "2"}) as server:
        assert next_url(server.base, "evil.example, public.example, lb.internal",
                        "http, https, http") == f"https://public.example{LIST}?page=2"


@pytest.fixture
def serve_url(tmp_path):
    """The sample on SQLite for the launcher tests (what it serves does not matter)."""
    require_nginx()
    url = f"sqlite:///{tmp_path / 'serve.sqlite3'}"
    app = make_app(url)
    with app.app_context():
        engine.get_engine().dispose()
    return url


def stack_pids(served: Serve) -> set[int]:
    return descendants(served.pid)


def test_sigterm_stops_nginx_then_gunicorn_and_exits_0(serve_url):
    with Serve(serve_url) as served:
        pids = stack_pids(served)
        assert len(pids) >= 4  # nginx master and worker, gunicorn master and workers
        assert served.stop(signal.SIGTERM) == 0
        assert not any(map(alive, pids))
        assert can_bind(served.port)
        assert not served.runtime_dir.joinpath("app.sock").exists()


def running(launcher: int, word: bytes) -> set[int]:
    """The processes under ``launcher`` whose command line holds ``word``."""
    found = set()
    for pid in descendants(launcher):
        try:
            if word in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                found.add(pid)
        except (FileNotFoundError, ProcessLookupError):
            continue
    return found


SLOW_START = """
import time
from pathlib import Path


def on_starting(server):
    Path({marker!r}).touch()
    time.sleep(60)
"""


def test_a_stop_while_gunicorn_starts_ends_the_start_at_once(serve_url, tmp_path):
    """systemd's stop (after a reload) while the gunicorns start, as slow to start as on a
    loaded machine (each sleeps a minute before it opens its socket): the launcher ends in
    seconds with 0, nginx never started and the port free, where it waited for the
    gunicorns to answer (here, START_SECONDS, then a failed start) before taking the
    stop."""
    marker = tmp_path / "starting"
    settings = (ROOT / "gunicorn.conf.py").read_text() + SLOW_START.format(marker=str(marker))
    (tmp_path / "gunicorn.conf.py").write_text(settings)
    port = free_port()
    launcher = subprocess.Popen(
        SERVING + ["--port", str(port)], cwd=tmp_path,
        env={**os.environ, "DATABASE_URL": serve_url}, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE)
    try:
        assert within(60, marker.exists)  # a gunicorn is starting: serve's handlers are set
        gunicorns = running(launcher.pid, b"gunicorn")
        launcher.send_signal(signal.SIGHUP)
        launcher.send_signal(signal.SIGTERM)
        assert within(10, lambda: launcher.poll() is not None)
        assert launcher.returncode == 0
        assert b"Serving on" not in launcher.communicate()[1]
        assert not [pid for pid in gunicorns if alive(pid)]
        assert can_bind(port)
    finally:
        if launcher.poll() is None:
            launcher.kill()
        if launcher.stderr is not None and not launcher.stderr.closed:
            launcher.communicate()


def test_a_stop_passed_on_as_nginx_starts_is_not_lost(serve_url, runtime_dir, monkeypatch):
    """A stop passed on to nginx the moment it starts, before its loop (SIGQUIT ignored as
    a shell's ``&`` leaves it, here; else nginx's handler noting it for a loop not yet
    entered): nginx takes it once its loop runs, and the stack ends in seconds, where it
    went on serving until the launcher killed all after STOP_SECONDS."""
    from commentsvc.operations import serving

    monkeypatch.setenv("DATABASE_URL", serve_url)
    port = free_port()
    stack = serving.Stack("127.0.0.1", port, 1, runtime_dir, "nginx",
                          str(ROOT / "gunicorn.conf.py"), write_workers=1,
                          write_nice=0)  # a loaded machine starves a nicer one's stop
    ignored = signal.signal(signal.SIGQUIT, signal.SIG_IGN)  # what nginx inherits
    try:
        assert stack.start(lambda: False)
        stack.stop()  # SIGQUIT, sent as nginx's exec begins
        began = time.monotonic()
        stack.wait([])
        assert time.monotonic() - began < STOP_SECONDS / 2
        assert all(child.returncode is not None for child in stack.children())
        assert within(SUPERVISOR_SECONDS, lambda: can_bind(port))
    finally:
        signal.signal(signal.SIGQUIT, ignored)
        for child in stack.children():
            if child.poll() is None:
                child.kill()
                child.wait()


def test_a_reload_before_the_stack_started_signals_nothing(runtime_dir):
    """A SIGHUP taken before nginx started (a stop came during the start) is sent to no
    gunicorn: one that has not yet set its handlers would take SIGHUP's default action."""
    from commentsvc.operations import serving

    stack = serving.Stack("127.0.0.1", free_port(), 1, runtime_dir, "nginx",
                          str(ROOT / "gunicorn.conf.py"), write_workers=0)
    stack.gunicorn = subprocess.Popen(["sleep", "60"])  # SIGHUP's default action ends it
    try:
        stack.reload()
        time.sleep(0.5)
        assert stack.gunicorn.poll() is None
    finally:
        stack.gunicorn.kill()
        stack.gunicorn.wait()


SLOW_APP = """
import time
from pathlib import Path

Path({marker!r}).touch()
time.sleep(60)
"""


def test_a_worker_still_loading_the_app_ends_at_once_on_a_stop(tmp_path):
    """gunicorn's graceful stop (SIGTERM) while its worker still loads the app (a minute,
    here): the worker has no request to finish and ends at once, and so does gunicorn,
    where the worker finished loading first and the master waited out its graceful
    timeout for it."""
    marker = tmp_path / "loading"
    (tmp_path / "slow_app.py").write_text(SLOW_APP.format(marker=str(marker)))
    master = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "--config", str(ROOT / "gunicorn.conf.py"),
         "--bind", f"unix:{tmp_path / 'app.sock'}", "--workers", "1",
         "--chdir", str(tmp_path), "slow_app:app"],
        cwd=tmp_path, stderr=subprocess.DEVNULL)
    try:
        assert within(60, marker.exists)
        master.send_signal(signal.SIGTERM)
        assert within(10, lambda: master.poll() is not None)
        assert master.returncode == 0
    finally:
        if master.poll() is None:
            master.kill()
            master.wait()


def test_a_stop_before_the_stack_starts_ends_the_first_init_db_and_the_runtime_files():
    """A SIGTERM while the first init-db waits for a database that says nothing: the
    launcher ends at once with 0, its init-db ended and its runtime directory removed (the
    signal's default action had ended it with -15 and left the directory behind); a SIGHUP
    then (a reload) stops nothing."""
    require_nginx()
    with silent_database() as url, tempfile.TemporaryDirectory() as made:
        temporary = Path(made)
        temporary.chmod(0o755)  # nginx's workers reach the runtime directory made in it
        launcher = subprocess.Popen(
            SERVING + ["--port", str(free_port())], cwd=ROOT, stderr=subprocess.PIPE,
            env={**os.environ, "TMPDIR": str(temporary), "COMMENTSVC_DB_CONNECT_TIMEOUT": "60",
                 "DATABASE_URL": url})
        try:
            assert within(60, lambda: running(launcher.pid, b"init-db"))
            init_db = running(launcher.pid, b"init-db")
            assert list(temporary.glob("commentsvc-serve-*"))
            launcher.send_signal(signal.SIGHUP)
            launcher.send_signal(signal.SIGTERM)
            assert within(STOP_SECONDS / 2, lambda: launcher.poll() is not None)
            assert launcher.returncode == 0
            assert b"Stopped before the stack started." in launcher.communicate()[1]
            assert not [pid for pid in init_db if alive(pid)]
            assert not list(temporary.glob("commentsvc-serve-*"))
        finally:
            if launcher.poll() is None:
                launcher.kill()
            if launcher.stderr is not None and not launcher.stderr.closed:
                launcher.communicate()


def test_when_nginx_dies_the_launcher_stops_gunicorn_and_exits_1(serve_url):
    with Serve(serve_url) as served:
        pids = stack_pids(served)
        nginx = int(served.runtime_dir.joinpath("nginx.pid").read_text())
        os.kill(nginx, signal.SIGKILL)  # its workers are orphaned: the launcher ends them
        served.process.wait(timeout=45)
        assert served.process.returncode == 1
        assert "nginx exited" in served.output()
        assert within(SUPERVISOR_SECONDS, lambda: not any(map(alive, pids)))
        assert can_bind(served.port)


def test_a_killed_launcher_takes_nginx_and_gunicorn_with_it(serve_url):
    with Serve(serve_url) as served:
        pids = stack_pids(served)
        os.kill(served.pid, signal.SIGKILL)
        served.process.wait()
        assert within(10, lambda: not any(map(alive, pids)))
        assert can_bind(served.port)


def test_bad_settings_stop_the_launcher_before_anything_starts(tmp_path):
    require_nginx()
    env = {**os.environ, "COMMENTSVC_MAX_REQUEST_BYTES": "0"}
    finished = subprocess.run(SERVING + ["--port", str(free_port())],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert finished.returncode == 2  # a start-up problem: one line, no traceback
    assert "COMMENTSVC_MAX_REQUEST_BYTES='0'" in finished.stderr
    assert len(finished.stderr.strip().splitlines()) == 1


def nginx_programs(tmp_path: Path) -> dict[str, str]:
    """Programs given as --nginx that are no working nginx, by what is wrong with them."""
    not_a_program = tmp_path / "not-a-program"
    not_a_program.write_text("nginx\n")
    refusing = tmp_path / "refusing"
    refusing.write_text('#!/bin/sh\necho "nginx: [emerg] unknown directive" >&2\nexit 1\n')
    for program in (not_a_program, refusing):
        program.chmod(0o755)
    return {"missing": "/nonexistent", "not on PATH": "no-such-nginx-program",
            "a directory": str(tmp_path), "not executable": str(tmp_path / "plain"),
            "not a program": str(not_a_program), "refusing": str(refusing)}


@pytest.mark.parametrize(("kind", "said"), [
    ("missing", "--nginx /nonexistent: no such executable file"),
    ("not on PATH", "--nginx no-such-nginx-program: no such executable file"),
    ("a directory", ": no such executable file"),
    ("not executable", ": no such executable file"),
    ("not a program", "nginx cannot run: [Errno 8] Exec format error"),
    ("refusing", "nginx refuses its configuration: nginx: [emerg] unknown directive")])
def test_an_nginx_that_cannot_serve_is_one_line_before_anything_starts(tmp_path, kind, said):
    """As an nginx missing from PATH is: exit 1, one line, no traceback, no gunicorn."""
    (tmp_path / "plain").write_text("nginx\n")
    program = nginx_programs(tmp_path)[kind]
    finished = subprocess.run(SERVING + ["--nginx", program, "--port", str(free_port())],
                              cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert finished.returncode == 1
    assert finished.stderr.startswith("Error: ") and said in finished.stderr
    assert len(finished.stderr.strip().splitlines()) == 1  # gunicorn, started, logs lines


def gunicorns(served: Serve) -> dict[str, list[int]]:
    """The stack's gunicorn processes (master and workers) by the socket they serve."""
    found: dict[str, list[int]] = {}
    for pid in stack_pids(served):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except (FileNotFoundError, ProcessLookupError):  # exited meanwhile (a reload)
            continue
        binds = [arg.decode() for arg in command if arg.startswith(b"unix:")]
        if b"gunicorn" in command and binds:
            found.setdefault(Path(binds[0]).name, []).append(pid)
    return found


def test_the_writers_gunicorn_runs_nicer_than_the_readers(serve_url):
    with Serve(serve_url, args=("--write-workers", "2", "--write-nice", "7")) as served:
        pools = gunicorns(served)
        assert len(pools["app.sock"]) == 3 and len(pools["writes.sock"]) == 3  # masters too
        mine = os.getpriority(os.PRIO_PROCESS, served.pid)
        assert {os.getpriority(os.PRIO_PROCESS, pid) for pid in pools["app.sock"]} == {mine}
        assert {os.getpriority(os.PRIO_PROCESS, pid) for pid in pools["writes.sock"]} == {
            min(mine + 7, 19)}
        assert "nice 7" in served.output()


def test_without_write_workers_one_gunicorn_takes_everything(serve_url):
    with Serve(serve_url, args=("--write-workers", "0")) as served:
        assert set(gunicorns(served)) == {"app.sock"}
        assert "commentsvc_writes" not in served.runtime_dir.joinpath("nginx.conf").read_text()
        assert served.stop(signal.SIGTERM) == 0


def parent_of(pid: int) -> int | None:
    """``pid``'s parent; None once it has exited (a reload replaces workers meanwhile)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None


def test_a_post_through_the_stack_is_written_and_read_back(serve_url):
    community = prepare(serve_url, comments=20, targets=2, posters=1)
    token = next(iter(community.tokens.values()))
    content_type, object_id = community.targets[0]
    with Serve(serve_url) as served:
        assert "writes.sock" in gunicorns(served)
        posted = request(served.base, "POST", LIST, token=token, body={
            "content_type": content_type, "object_id": object_id, "body": "by the writers"})
        assert posted.status == 201, posted.body
        page = request(served.base, "GET",
                       f"{LIST}?content_type={content_type}&object_id={object_id}")
        newest = json.loads(page.body)["results"][0]
        assert (newest["id"], newest["body"]) == (json.loads(posted.body)["id"],
                                                  "by the writers")


def answer_for_host(base: str, method: str, path: str, host: str, token: str = "",
                    body: dict | None = None) -> tuple[int, dict]:
    """Status and JSON body of ``method`` on ``path``, sent with ``host`` as its Host."""
    import http.client
    import urllib.parse

    url = urllib.parse.urlsplit(base)
    headers = {"Host": host, "Connection": "close", "Accept": "application/json",
               **({"Authorization": f"Token {token}"} if token else {}),
               **({"Content-Type": "application/json"} if body is not None else {})}
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    try:
        conn.request(method, path, body=None if body is None else json.dumps(body),
                     headers=headers)
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def test_a_host_naming_two_hosts_is_refused_through_the_front_and_writes_nothing(serve_url):
    """As under gunicorn alone (API.md, "Host and path"). nginx passes the client's Host on
    as it came and no X-Forwarded-Host: as one, "victim.example,evil.example" reads as a
    list of two hosts, and the app, trusting nginx's entry (the last), built its URLs and
    its Location on evil.example and wrote the post."""
    community = prepare(serve_url, comments=5, targets=1, posters=1)
    token = next(iter(community.tokens.values()))
    content_type, object_id = community.targets[0]
    two_hosts = "victim.example,evil.example"
    refused = (400, {"detail": "Invalid Host header."})
    target = f"{LIST}?content_type={content_type}&object_id={object_id}&page_size=100"
    with Serve(serve_url) as served:
        listed = answer_for_host(served.base, "GET", target, "victim.example")[1]["results"]
        assert answer_for_host(served.base, "GET", LIST, two_hosts) == refused
        assert answer_for_host(served.base, "POST", LIST, two_hosts, token, {
            "content_type": content_type, "object_id": object_id, "body": "x"}) == refused
        assert answer_for_host(served.base, "GET", target, "victim.example")[1][
            "results"] == listed


def test_when_the_writers_gunicorn_dies_the_launcher_stops_the_rest_and_exits_1(serve_url):
    with Serve(serve_url) as served:
        pids = stack_pids(served)
        master = next(pid for pid in gunicorns(served)["writes.sock"]
                      if parent_of(pid) == served.pid)
        os.kill(master, signal.SIGKILL)
        served.process.wait(timeout=45)
        assert served.process.returncode == 1
        assert "the writers' gunicorn exited" in served.output()
        assert within(SUPERVISOR_SECONDS, lambda: not any(map(alive, pids)))
        assert can_bind(served.port)


def pool_workers(served: Serve) -> set[int]:
    """The worker processes of every gunicorn of the stack (not their masters)."""
    pids = [pid for pool in gunicorns(served).values() for pid in pool]
    return {pid for pid in pids if parent_of(pid) not in (served.pid, None)}


def test_a_reload_behind_the_front_drops_no_request(serve_url):
    """nginx keeps its connections to both gunicorns open between requests; SIGHUP
    replaces every worker of both while requests (each on a new connection to nginx)
    keep coming, and none fails: an old worker closes the connections it keeps idle as it
    exits, and nginx opens new ones."""
    community = prepare(serve_url, comments=300, targets=5, posters=2)
    with Serve(serve_url) as served:
        # 2 readers, 2 writers; the stack answers once each gunicorn has one worker, so a
        # second may still be starting
        assert within(30, lambda: len(pool_workers(served)) == 4)
        first = pool_workers(served)
        load = Load(served.base, community, threads=4).start()
        time.sleep(2)
        os.kill(served.pid, signal.SIGHUP)
        assert within(30, lambda: len(pool_workers(served)) == 4
                      and not pool_workers(served) & first)
        time.sleep(2)
        checks = stop_and_verify(load, served.base, serve_url)
    assert checks["201 posts stored once"] > 0


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_the_stack_makes_a_new_databases_tables_before_it_serves(kind, tmp_path):
    """README, Production: `commentsvc serve` creates missing tables, as make serve does
    (it ran init-db before the launcher); the launcher alone had served 500s."""
    require_nginx()
    if kind == "sqlite":
        check_new(f"sqlite:///{tmp_path / 'new.sqlite3'}")
    else:
        with scratch_database("commentsvc_serve_new") as url:
            check_new(url)


def check_new(url: str) -> None:
    with Serve(url) as served:
        assert request(served.base, "GET", "/readyz").status == 200
        listed = request(served.base, "GET", LIST)
        assert listed.status == 200, listed.body
        assert json.loads(listed.body)["results"] == []
        assert "could not be checked" not in served.output()


def test_a_database_it_cannot_reach_does_not_stop_the_start():
    """A database down when the stack starts (one that boots after it) gets one line, and
    503s until it answers, rather than a launcher its supervisor must keep restarting."""
    require_nginx()
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/nothing"
    with Serve(url, env={"COMMENTSVC_DB_CONNECT_TIMEOUT": "1"}) as served:
        listed = request(served.base, "GET", LIST)
        assert listed.status == 503
        assert json.loads(listed.body) == {
            "detail": "The database is unavailable. Try again shortly."}
        assert "The service's tables could not be checked (init-db exited with status 2)" \
            in served.output()


def test_a_new_database_that_comes_after_the_stack_gets_its_tables():
    """A database created (or a server started) after the stack: the launcher tries again
    until it answers, and the lists then serve, where they had answered 500 for good."""
    require_nginx()
    with scratch_database("commentsvc_serve_later") as url:
        later = url + "_later"
        name = later.rsplit("/", 1)[1]
        with Serve(later) as served:
            assert request(served.base, "GET", LIST).status == 503
            with engine_of(url) as conn:
                conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
            try:
                assert within(60, lambda: request(served.base, "GET", LIST).status == 200)
                assert within(10, lambda: "The service's tables are checked" in
                              served.output())
            finally:
                served.stop()
                with engine_of(url) as conn:
                    conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def engine_of(url: str):
    """An autocommit connection to the server of ``url``."""
    import sqlalchemy as sa

    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            yield conn
    finally:
        admin.dispose()


def test_port_0_is_refused_before_anything_starts():
    """nginx cannot listen on a port chosen for it: one usage line, exit 2."""
    require_nginx()
    finished = subprocess.run(SERVING + ["--port", "0"], cwd=ROOT, capture_output=True,
                              text=True, timeout=60)
    assert finished.returncode == 2
    assert "Invalid value for '--port'" in finished.stderr


def test_the_port_workers_and_host_come_from_the_environment_as_make_run_takes_them():
    """`commentsvc serve` without options takes PORT (and HOST, WORKERS, WRITE_WORKERS)
    from the environment: a port taken is the one PORT names, one line, exit 2."""
    require_nginx()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        finished = subprocess.run(SERVING, cwd=ROOT, capture_output=True, text=True,
                                  timeout=60, env={**os.environ, "PORT": str(port),
                                                   "HOST": "127.0.0.1"})
    assert finished.returncode == 2, finished.stderr
    assert f"Port {port} on 127.0.0.1" in finished.stderr
    assert f"commentsvc serve --port {port + 1}" in finished.stderr
    help_text = " ".join(subprocess.run(SERVING + ["--help"], capture_output=True, text=True,
                                        timeout=60, check=True).stdout.split())
    for name in ("HOST", "PORT", "WORKERS", "WRITE_WORKERS"):
        assert f"[env var: {name};" in help_text


def test_an_installed_service_serves_with_the_packages_gunicorn_settings(serve_url, tmp_path):
    """Run where there is no gunicorn.conf.py (an installed package), the launcher's
    gunicorns still get the package's settings: threaded workers, JSON log lines."""
    assert not (tmp_path / "gunicorn.conf.py").exists()
    with Serve(serve_url, cwd=tmp_path) as served:
        assert request(served.base, "GET", LIST).status == 200
        assert served.stop(signal.SIGTERM) == 0
        logged = [json.loads(line) for line in served.output().splitlines()
                  if line.startswith("{")]
    assert {"Using worker: commentsvc.operations.gunicorn_worker.ThreadWorker"} <= {
        entry.get("message") for entry in logged}


def test_gunicorn_settings_are_the_packages_whether_read_from_the_file_or_the_module(
        tmp_path):
    """gunicorn.conf.py of a checkout is the package's settings, which `commentsvc serve`
    passes where the working directory has no such file; neither keeps a control socket
    (gunicorn's default is one path per user, which two servers would share)."""
    from gunicorn.app.base import Application

    from commentsvc.operations import gunicorn_settings
    from commentsvc.operations.serving import gunicorn_config

    class Loaded(Application):
        def __init__(self, location: str):
            self.location = location
            super().__init__()

        def init(self, parser, opts, args):
            return None

        def load_config(self):
            self.load_config_from_file(self.location)

        def load(self):
            return None

    assert gunicorn_config(tmp_path) == gunicorn_settings.MODULE
    assert gunicorn_config(ROOT) == str(ROOT / "gunicorn.conf.py")
    names = ("worker_class_str", "threads", "timeout", "graceful_timeout", "keepalive",
             "limit_request_line", "forwarded_allow_ips", "control_socket_disable",
             "logger_class", "post_fork")
    from_file, from_module = (Loaded(location).cfg for location in (
        str(ROOT / "gunicorn.conf.py"), gunicorn_settings.MODULE))
    assert [getattr(from_file, name) for name in names] == \
        [getattr(from_module, name) for name in names]
    assert (from_module.worker_class_str, from_module.threads) == (
        "commentsvc.operations.gunicorn_worker.ThreadWorker", 8)
    assert from_module.control_socket_disable is True
