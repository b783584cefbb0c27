"""`commentsvc serve`: the production stack in one process tree, nginx in front of gunicorn.

    commentsvc serve --host 0.0.0.0 --port 8000 --workers 4
    python -m commentsvc.operations.serving --port 8000   # the same, in a checkout (make serve)

It renders nginx's configuration into a private runtime directory, starts gunicorn on a
unix socket there (with gunicorn.conf.py of the working directory, when there is one) and
nginx in the foreground on HOST:PORT, then watches both:

- SIGTERM or SIGINT: nginx stops taking connections and finishes the requests it has,
  then gunicorn finishes its own; a second signal makes both stop at once.
- SIGHUP: nginx re-reads its configuration, gunicorn replaces its workers (new code).
- Either one exiting stops the other, and the command exits with status 1, so a
  supervisor restarts the whole.
- Both end with this process even when it is killed with SIGKILL (PR_SET_PDEATHSIG).

The app runs with COMMENTSVC_TRUSTED_PROXIES=1: nginx is the one hop it trusts, and nginx
sets X-Forwarded-For/Proto/Host itself instead of passing a client's.
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
from pathlib import Path

import click

from commentsvc import settings
from commentsvc.operations import front, ports, startup
from commentsvc.operations.parent_death import end_with_parent
from commentsvc.operations.startup import StartupError

APP = "commentsvc.standalone:create_app()"
GUNICORN_CONFIG = "gunicorn.conf.py"
# How long gunicorn may take to open its socket before the start counts as failed.
START_SECONDS = 30
# How long a graceful stop may take before the rest is killed (gunicorn's own
# graceful_timeout, 30 s, fits inside).
STOP_SECONDS = 40


class Stack:
    """gunicorn and nginx started as children of this process, stopped together."""

    def __init__(self, host: str, port: int, workers: int, runtime_dir: Path,
                 nginx: str, gunicorn_config: Path | None, app: str = APP):
        self.runtime_dir = runtime_dir
        self.socket = runtime_dir / "app.sock"
        max_body = settings.resolved(settings.from_environment())["MAX_REQUEST_BYTES"]
        self.conf = front.prepare_runtime_dir(runtime_dir, front.FrontConfig(
            host=host, port=port, socket=self.socket, max_body_bytes=max_body))
        self.nginx_command = [nginx, "-e", "stderr", "-p", f"{runtime_dir}/",
                              "-c", str(self.conf)]
        self.gunicorn_command = [sys.executable, "-m", "gunicorn", "--bind",
                                 f"unix:{self.socket}", "--workers", str(workers),
                                 # its control socket beside the app's, not one per user
                                 "--control-socket", str(runtime_dir / "gunicorn.ctl")]
        if gunicorn_config is not None:
            self.gunicorn_command += ["--config", str(gunicorn_config)]
        self.gunicorn_command.append(app)
        self.gunicorn: subprocess.Popen[bytes] | None = None
        self.nginx: subprocess.Popen[bytes] | None = None
        self.stopping = 0

    def start(self) -> None:
        """gunicorn first (nginx would answer 502 until its socket exists), then nginx."""
        env = {**os.environ, "COMMENTSVC_TRUSTED_PROXIES": "1"}
        self.gunicorn = _child(self.gunicorn_command, env)
        deadline = time.monotonic() + START_SECONDS
        while not _accepts(self.socket):
            if self.gunicorn.poll() is not None or time.monotonic() > deadline:
                raise click.ClickException("gunicorn did not start (see its messages above)")
            time.sleep(0.1)
        self.nginx = _child(self.nginx_command, os.environ)

    def children(self) -> list[subprocess.Popen[bytes]]:
        return [child for child in (self.nginx, self.gunicorn) if child is not None]

    def exited(self) -> subprocess.Popen[bytes] | None:
        """A child that has ended, if any."""
        return next((child for child in self.children() if child.poll() is not None), None)

    def reload(self) -> None:
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

    def wait(self, pending: list[int]) -> None:
        """Until both have ended. gunicorn is told to stop once nginx has (no request
        nginx holds is left without an app); a further signal in ``pending`` stops both
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


def _child(command: list[str], env: dict[str, str] | os._Environ[str]) -> subprocess.Popen[bytes]:
    """A child in a process group of its own (a terminal's Ctrl-C reaches only this
    process, which stops the children in order) that ends when this process ends."""
    parent = os.getpid()
    return subprocess.Popen(command, env=env, process_group=0,
                            preexec_fn=lambda: end_with_parent(signal.SIGTERM, parent))


def _accepts(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


def serve(stack: Stack) -> int:
    """Run ``stack`` until a signal stops it (0) or a part of it ends on its own (1)."""
    pending: list[int] = []
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda signum, _frame: pending.append(signum))
    status = 0
    try:
        stack.start()
        assert stack.nginx is not None and stack.gunicorn is not None  # both started
        click.echo(f"Serving on nginx (pid {stack.nginx.pid}) in front of gunicorn "
                   f"(pid {stack.gunicorn.pid}); runtime files in {stack.runtime_dir}",
                   err=True)
        while not stack.stopping:
            if pending:
                received = pending.pop(0)
                stack.reload() if received == signal.SIGHUP else stack.stop()
            elif (ended := stack.exited()) is not None:
                name = "nginx" if ended is stack.nginx else "gunicorn"
                click.echo(f"{name} exited with status {ended.returncode}; stopping the rest",
                           err=True)
                status = 1
                stack.stop()
            else:
                time.sleep(0.1)
    finally:
        if not stack.stopping:  # the start failed
            stack.stop()
        stack.wait(pending)
    return status


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address nginx listens on (0.0.0.0 or :: for every interface).")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option("--workers", default=2, show_default=True, type=click.IntRange(min=1),
              help="gunicorn worker processes.")
@click.option("--runtime-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where nginx.conf, the app's socket and temporary files go; by default "
                   "a new private directory, removed at the end.")
@click.option("--nginx", "nginx_program", help="The nginx program (default: found on PATH).")
def serve_command(host: str, port: int, workers: int, runtime_dir: Path | None,
                  nginx_program: str | None) -> None:
    """Serve the app in production: nginx in front of gunicorn (see operations.serving)."""
    nginx_program = nginx_program or front.find_nginx()
    if nginx_program is None:
        raise click.ClickException("nginx is not installed (Debian: apt-get install nginx)")
    try:
        settings.from_environment()
    except settings.SettingsError as exc:
        raise StartupError(startup.explain(exc)) from exc
    # Before anything starts: a taken port is one line, not nginx failing after gunicorn.
    ports.check(host, port, f"commentsvc serve --port {port + 1 if port else 8001} "
                            f"(make serve: PORT={port + 1 if port else 8001} make serve)")
    config = Path(GUNICORN_CONFIG)
    owned = runtime_dir is None
    if runtime_dir is None:
        runtime_dir = Path(tempfile.mkdtemp(prefix="commentsvc-serve-"))
    runtime_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        try:
            stack = Stack(host, port, workers, runtime_dir.resolve(), nginx_program,
                          config.resolve() if config.is_file() else None)
        except ValueError as exc:
            raise click.ClickException(str(exc)) from exc
        status = serve(stack)
    finally:
        if owned:
            shutil.rmtree(runtime_dir, ignore_errors=True)
    sys.exit(status)


if __name__ == "__main__":
    serve_command()
