"""The service's tables made before `commentsvc serve` starts anything, where some are
missing (a new database, or a version that adds a table), as `make serve` makes them.

It runs ``init-db --if-missing`` in a process of its own on the app the stack serves, so
the launcher never holds a connection its gunicorns would inherit; the process ends with
the launcher. When that fails (the database cannot be reached, above all), the stack
starts anyway, lists answer 503 meanwhile (``/readyz`` says why), and the launcher runs it
again, quietly, 5 s after a failed run and then less often, until one run succeeds: a
database that boots after the service, new or not, then needs nothing more. A server
that refused to start would need its supervisor to keep restarting it until the
database is up.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping

import click

from commentsvc.operations.parent_death import end_with_parent

# init-db on the stack's app (operations.serving.APP), start-up problems as one line.
COMMAND = [sys.executable, "-m", "flask", "--app",
           "commentsvc.standalone.command:create_cli_app", "init-db", "--if-missing"]
# How long a run may take before it is given up: a database that takes connections and
# then says nothing must not keep the service from starting. A build cut off is finished
# by the next init-db (storage.upkeep).
SECONDS = 120
# How long after a failed run the next one starts, while the stack serves: at first, then
# twice as long each time up to the last (a run costs a Python start, a second or two of
# CPU, so a long outage does not keep a core busy).
RETRY_SECONDS = 5
MAX_RETRY_SECONDS = 60


def _run(env: Mapping[str, str], quiet: bool) -> subprocess.Popen[bytes]:
    """One run of init-db, ending with this process (its output here unless ``quiet``)."""
    parent = os.getpid()
    output = subprocess.DEVNULL if quiet else None
    return subprocess.Popen(COMMAND, env=dict(env), stdin=subprocess.DEVNULL, stdout=output,
                            stderr=output,
                            preexec_fn=lambda: end_with_parent(signal.SIGTERM, parent))


def prepare(env: Mapping[str, str], seconds: float = SECONDS) -> bool:
    """Create the service's missing tables (init-db's output on this process's terminal);
    whether the database was checked, else one line on stderr saying the stack starts
    anyway (then ``Retry`` goes on)."""
    run = _run(env, quiet=False)
    status: int | None = None
    try:
        status = run.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        pass
    finally:  # a run that overstays, or a stop meanwhile (operations.serving.Stopped)
        _end(run)
    if status == 0:
        return True
    problem = (f"init-db did not finish within {seconds:g} s" if status is None else
               f"init-db exited with status {status}")
    click.echo(f"The service's tables could not be checked ({problem}); starting anyway: "
               "requests answer 503 until the database answers, and /readyz says what "
               f"it lacks. Trying again in {RETRY_SECONDS} s, then less often.", err=True)
    return False


class Retry:
    """init-db --if-missing run again while the stack serves, one run at a time, ``pause``
    after the last failed (doubling up to MAX_RETRY_SECONDS), until one succeeds; ``tick``
    is called by the launcher's watch loop, ``stop`` when it stops."""

    def __init__(self, env: Mapping[str, str], seconds: float = SECONDS,
                 pause: float = RETRY_SECONDS):
        self.env, self.seconds, self.pause = env, seconds, pause
        self.run: subprocess.Popen[bytes] | None = None
        self.started = 0.0
        self.next_at = time.monotonic() + pause
        self.done = False

    def tick(self) -> None:
        if self.done:
            return
        now = time.monotonic()
        if self.run is None:
            if now >= self.next_at:
                self.run, self.started = _run(self.env, quiet=True), now
            return
        status = self.run.poll()
        if status is None and now - self.started < self.seconds:
            return
        self.stop()
        if status == 0:
            self.done = True
            click.echo("The service's tables are checked: the database answers.", err=True)
        else:
            self.next_at = now + self.pause
            self.pause = min(self.pause * 2, MAX_RETRY_SECONDS)

    def stop(self) -> None:
        if self.run is not None:
            _end(self.run)
            self.run = None


def _end(run: subprocess.Popen[bytes]) -> None:
    """``run`` ended (killed if it still runs) and reaped."""
    if run.poll() is None:
        run.kill()
    run.wait()
