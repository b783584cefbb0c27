"""`commentsvc serve`: the production stack in one process tree, nginx in front of gunicorn.

    commentsvc serve --host 0.0.0.0 --port 8000 --workers 4
    python -m commentsvc.operations.serving --port 8000   # the same, in a checkout (make serve)

It renders nginx's configuration into a private runtime directory, starts gunicorn on a
unix socket there (with gunicorn.conf.py of the working directory when there is one, else
the package's own settings, operations.gunicorn_settings), the writers' gunicorn on another
(below), and nginx in the foreground on HOST:PORT, then watches them all (before any
starts, ``nginx -t`` tests the configuration: an --nginx program that is no nginx is one
line, as a missing nginx is):

- SIGTERM or SIGINT: nginx stops taking connections and finishes the requests it has,
  then each gunicorn finishes its own; a second signal makes all stop at once.
- SIGHUP: nginx re-reads its configuration, each gunicorn replaces its workers (new code).
- Any one exiting stops the others, and the command exits with status 1, so a
  supervisor restarts the whole.
- All end with this process even when it is killed with SIGKILL (PR_SET_PDEATHSIG).

Before any starts, the service's tables are created where some are missing
(operations.schema_at_start: ``init-db --if-missing``); a database it cannot reach then
does not stop the start, and the tables are made once it answers.

The writers' gunicorn (``--write-workers``, 2 by default; 0 leaves writes with the
others) takes every request but GET, HEAD and OPTIONS, at a lower CPU priority
(``--write-nice``, 10 by default). When reads and writes want the same cores, the
scheduler gives them to the reads, and the writes wait; a machine with cores to spare
serves both at full speed. A write costs about three times a read's CPU, so without this
a burst of writes would take most of the machine from the readers (BENCHMARKS.md, "Reads
first: the writers' own gunicorn").

The app runs with COMMENTSVC_TRUSTED_PROXIES=1: nginx is the one hop it trusts, and nginx
sets X-Forwarded-For/Proto itself instead of passing a client's. It passes the client's
Host on as Host and sends no X-Forwarded-Host, a list in which a Host naming two hosts
would read as two entries (the app would take the last instead of refusing it).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import click

from commentsvc import settings
from commentsvc.operations import front, gunicorn_settings, ports, schema_at_start, startup
from commentsvc.operations.parent_death import end_with_parent
from commentsvc.operations.startup import StartupError

APP = "commentsvc.standalone:create_app()"
GUNICORN_CONFIG = "gunicorn.conf.py"
# How long gunicorn may take to open its socket before the start counts as failed.
START_SECONDS = 30
# How long a graceful stop may take before the rest is killed (gunicorn's own
# graceful_timeout, 30 s, fits inside).
STOP_SECONDS = 40
# The writers' gunicorn: its worker processes, and how much nicer than the readers' it runs.
WRITE_WORKERS = 2
WRITE_NICE = 10
# What this process sends nginx (SIGTERM also at its death, PR_SET_PDEATHSIG).
NGINX_SIGNALS = (signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP)
# What this process takes: a stop, a stop, a reload.
LAUNCHER_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Stack:
    """gunicorn (and the writers' gunicorn, when ``write_workers``) and nginx started as
    children of this process, stopped together."""

    def __init__(self, host: str, port: int, workers: int, runtime_dir: Path,
                 nginx: str, gunicorn_config: str, app: str = APP,
                 write_workers: int = WRITE_WORKERS, write_nice: int = WRITE_NICE):
        self.runtime_dir = runtime_dir
        self.socket = runtime_dir / "app.sock"
        write_socket = runtime_dir / "writes.sock" if write_workers else None
        configured = settings.resolved(settings.from_environment())
        self.conf = front.prepare_runtime_dir(runtime_dir, front.FrontConfig(
            host=host, port=port, socket=self.socket,
            max_body_bytes=configured["MAX_REQUEST_BYTES"], write_socket=write_socket,
            retry_after_seconds=configured["RETRY_AFTER"]))
        self.nginx_command = [nginx, "-e", "stderr", "-p", f"{runtime_dir}/",
                              "-c", str(self.conf)]
        self.gunicorn_command = _gunicorn_command(
            self.socket, workers, runtime_dir / "gunicorn.ctl", gunicorn_config, app)
        # The writers' gunicorn's command and socket, when there is one.
        self.writers_pool = None if write_socket is None else (_gunicorn_command(
            write_socket, write_workers, runtime_dir / "gunicorn-writes.ctl",
            gunicorn_config, app), write_socket)
        self.write_nice = write_nice
        self.gunicorn: subprocess.Popen[bytes] | None = None
        self.writers: subprocess.Popen[bytes] | None = None
        self.nginx: subprocess.Popen[bytes] | None = None
        self.stopping = 0

    def start(self, stop_requested: Callable[[], bool]) -> bool:
        """Each gunicorn first (nginx would answer 502 until its socket exists), then
        nginx; False, with nginx not started, when ``stop_requested()`` says a stop came
        while the gunicorns started: it is taken at once, where waiting for them to answer
        first took as long as their start (over STOP_SECONDS on a loaded machine).

        nginx starts with the signals this process sends it blocked: its master unblocks
        them only where its loop waits for them. A stop passed on as nginx started was
        lost otherwise (ignored, as a shell's ``&`` leaves SIGQUIT, or noted by nginx's
        handler before its loop, which then waited for another), and nothing stopped
        until STOP_SECONDS had passed."""
        env = {**os.environ, "COMMENTSVC_TRUSTED_PROXIES": "1"}
        self.gunicorn = _child(self.gunicorn_command, env)
        started = [(self.gunicorn, self.socket, "gunicorn")]
        if self.writers_pool is not None:
            command, write_socket = self.writers_pool
            self.writers = _child(command, env, nice=self.write_nice)
            started.append((self.writers, write_socket, "the writers' gunicorn"))
        deadline = time.monotonic() + START_SECONDS
        for child, path, name in started:
            while not _accepts(path):
                if stop_requested():
                    return False
                if child.poll() is not None or time.monotonic() > deadline:
                    raise click.ClickException(f"{name} did not start (see its messages above)")
                time.sleep(0.1)
        if stop_requested():
            return False
        self.nginx = _child(self.nginx_command, os.environ, blocked=NGINX_SIGNALS)
        return True

    def check_nginx(self) -> None:
        """nginx reads its configuration (``nginx -t``) before anything starts: a program
        that is no nginx, or an nginx that refuses the configuration, is one line."""
        try:
            tested = subprocess.run([*self.nginx_command, "-t", "-q"], capture_output=True,
                                    text=True, timeout=START_SECONDS, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise click.ClickException(f"nginx cannot run: {exc}") from exc
        if tested.returncode != 0:
            said = tested.stderr.strip().splitlines() or [f"exit status {tested.returncode}"]
            raise click.ClickException(f"nginx refuses its configuration: {said[-1]}")

    def children(self) -> list[subprocess.Popen[bytes]]:
        return [child for child in (self.nginx, self.gunicorn, self.writers)
                if child is not None]

    def name(self, child: subprocess.Popen[bytes]) -> str:
        """How the messages call ``child``."""
        if child is self.nginx:
            return "nginx"
        return "gunicorn" if child is self.gunicorn else "the writers' gunicorn"

    def exited(self) -> subprocess.Popen[bytes] | None:
        """A child that has ended, if any."""
        return next((child for child in self.children() if child.poll() is not None), None)

    def reload(self) -> None:
        """SIGHUP to each; nothing before nginx has started (a stop came during the
        start): a gunicorn still starting reads everything anew anyway, and one that has
        not yet set its handlers would take SIGHUP's default action and end."""
        if self.nginx is None:
            return
        for child in self.children():
            if child.poll() is None:
                child.send_signal(signal.SIGHUP)

    def stop(self) -> None:
        """Graceful the first time (nginx drains first: see ``wait``), at once the next."""
        self.stopping += 1
        if self.stopping == 1:
            _signal(self.nginx, signal.SIGQUIT)
        else:
            _signal(self.nginx, signal.SIGTERM)
            _signal(self.gunicorn, signal.SIGINT)
            _signal(self.writers, signal.SIGINT)

    def wait(self, pending: list[int]) -> None:
        """Until all have ended. Each gunicorn is told to stop once nginx has (no request
        nginx holds is left without an app); a further signal in ``pending`` stops all
        at once; after STOP_SECONDS whatever remains is killed."""
        deadline = time.monotonic() + STOP_SECONDS
        gunicorn_told = False
        while any(child.poll() is None for child in self.children()):
            for child in self.children():
                _end_group_of(child)
            while pending:
                if pending.pop(0) != signal.SIGHUP:
                    self.stop()
            nginx_gone = self.nginx is None or self.nginx.poll() is not None
            if self.stopping == 1 and nginx_gone and not gunicorn_told:
                _signal(self.gunicorn, signal.SIGTERM)
                _signal(self.writers, signal.SIGTERM)
                gunicorn_told = True
            if time.monotonic() > deadline:
                for child in self.children():
                    child.kill()
            time.sleep(0.1)
        for child in self.children():
            _end_group_of(child)


def _end_group_of(child: subprocess.Popen[bytes]) -> None:
    """Once a child has ended, end what it left of its process group: nginx's workers
    outlive a master killed with SIGKILL and would keep the port."""
    if child.poll() is not None:
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _signal(child: subprocess.Popen[bytes] | None, signum: int) -> None:
    if child is not None and child.poll() is None:
        child.send_signal(signum)


def gunicorn_config(directory: Path) -> str:
    """What the gunicorns read their settings from: gunicorn.conf.py of ``directory`` (the
    working directory: a checkout's, or an operator's own), else the package's settings,
    so that an installed service runs as a checkout does."""
    config = directory / GUNICORN_CONFIG
    return str(config.resolve()) if config.is_file() else gunicorn_settings.MODULE


def _gunicorn_command(bind: Path, workers: int, control_socket: Path,
                      config: str, app: str) -> list[str]:
    return [sys.executable, "-m", "gunicorn", "--bind", f"unix:{bind}",
            "--workers", str(workers),
            # a control socket, if the settings keep one, beside the app's, not one per user
            "--control-socket", str(control_socket), "--config", config, app]


def _child(command: list[str], env: dict[str, str] | os._Environ[str], nice: int = 0,
           blocked: tuple[signal.Signals, ...] = ()) -> subprocess.Popen[bytes]:
    """A child in a process group of its own (a terminal's Ctrl-C reaches only this
    process, which stops the children in order) that ends when this process ends, ``nice``
    steps below this process's CPU priority, started with the signals ``blocked`` (kept
    pending until it unblocks them)."""
    parent = os.getpid()

    def before_exec() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
        end_with_parent(signal.SIGTERM, parent)
        if nice:
            os.nice(nice)

    return subprocess.Popen(command, env=env, process_group=0, preexec_fn=before_exec)


def _accepts(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


class Stopped(Exception):
    """A stop (SIGTERM, SIGINT) that came before the stack started: the launcher ends at
    once (0), with what it had started ended and its own runtime directory removed, where
    the signal's default action ended it on the spot (-15) and left both behind."""


def _stop_before_start(signum: int, _frame: object) -> None:
    if signum != signal.SIGHUP:  # a reload: the stack about to start reads all anew anyway
        raise Stopped(signum)


def _say_serving(stack: Stack) -> None:
    assert stack.nginx is not None and stack.gunicorn is not None  # both started
    writers = ("" if stack.writers is None else
               f" and the writers' gunicorn (pid {stack.writers.pid}, nice "
               f"{stack.write_nice})")
    click.echo(f"Serving on nginx (pid {stack.nginx.pid}) in front of gunicorn "
               f"(pid {stack.gunicorn.pid}){writers}; runtime files in "
               f"{stack.runtime_dir}", err=True)


def serve(stack: Stack, tables: schema_at_start.Retry | None = None) -> int:
    """Run ``stack`` until a signal stops it (0) or a part of it ends on its own (1),
    making the service's tables meanwhile with ``tables`` (when the first try failed)."""
    pending: list[int] = []
    for signum in LAUNCHER_SIGNALS:
        signal.signal(signum, lambda signum, _frame: pending.append(signum))
    status = 0
    try:
        if stack.start(lambda: any(signum != signal.SIGHUP for signum in pending)):
            _say_serving(stack)
        # else a stop came during the start: the loop takes it at once
        while not stack.stopping:
            if pending:
                received = pending.pop(0)
                stack.reload() if received == signal.SIGHUP else stack.stop()
            elif (ended := stack.exited()) is not None:
                name = stack.name(ended)
                click.echo(f"{name} exited with status {ended.returncode}; stopping the rest",
                           err=True)
                status = 1
                stack.stop()
            else:
                if tables is not None:
                    tables.tick()
                time.sleep(0.1)
    finally:
        if tables is not None:
            tables.stop()
        if not stack.stopping:  # the start failed
            stack.stop()
        stack.wait(pending)
    return status


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, envvar="HOST",
              show_envvar=True,
              help="Address nginx listens on (0.0.0.0 or :: for every interface).")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535),
              envvar="PORT", show_envvar=True,
              help="Port nginx listens on (nginx takes no 0 for a free one).")
@click.option("--workers", default=2, show_default=True, type=click.IntRange(min=1),
              envvar="WORKERS", show_envvar=True, help="gunicorn worker processes.")
@click.option("--write-workers", default=WRITE_WORKERS, show_default=True,
              type=click.IntRange(min=0), envvar="WRITE_WORKERS", show_envvar=True,
              help="Worker processes of the writers' gunicorn, which takes every request but "
                   "GET, HEAD and OPTIONS; 0: writes go to the other workers.")
@click.option("--write-nice", default=WRITE_NICE, show_default=True,
              type=click.IntRange(0, 19),
              help="How much lower the writers' CPU priority is (nice steps).")
@click.option("--runtime-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where nginx.conf, the app's socket and temporary files go; by default "
                   "a new private directory, removed at the end.")
@click.option("--nginx", "nginx_program", help="The nginx program (default: found on PATH).")
def serve_command(host: str, port: int, workers: int, write_workers: int, write_nice: int,
                  runtime_dir: Path | None, nginx_program: str | None) -> None:
    """Serve the app in production: nginx in front of gunicorn (see operations.serving)."""
    nginx = front.find_nginx(nginx_program)
    if nginx is None:
        raise click.ClickException(
            f"--nginx {nginx_program}: no such executable file" if nginx_program
            else "nginx is not installed (Debian: apt-get install nginx)")
    try:
        settings.from_environment()
    except settings.SettingsError as exc:
        raise StartupError(startup.explain(exc)) from exc
    # Before anything starts: a taken port is one line, not nginx failing after gunicorn.
    other = ports.next_port(port)
    ports.check(host, port, f"commentsvc serve --port {other} "
                            f"(make serve: PORT={other} make serve)")
    owned = runtime_dir is None
    for signum in LAUNCHER_SIGNALS:  # until serve's own
        signal.signal(signum, _stop_before_start)
    status = 0
    try:
        if runtime_dir is None:
            runtime_dir = Path(tempfile.mkdtemp(prefix="commentsvc-serve-"))
        runtime_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            stack = Stack(host, port, workers, runtime_dir.resolve(), nginx,
                          gunicorn_config(Path.cwd()),
                          write_workers=write_workers, write_nice=write_nice)
        except ValueError as exc:
            raise click.ClickException(str(exc)) from exc
        stack.check_nginx()
        # missing tables made, as make serve makes them; if the database cannot say,
        # again while the stack serves
        tables = None if schema_at_start.prepare(os.environ) else schema_at_start.Retry(
            os.environ)
        status = serve(stack, tables)
    except Stopped:
        click.echo("Stopped before the stack started.", err=True)
    finally:
        if owned and runtime_dir is not None:
            shutil.rmtree(runtime_dir, ignore_errors=True)
    sys.exit(status)


if __name__ == "__main__":
    serve_command()
