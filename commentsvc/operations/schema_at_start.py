"""The service's tables made before `commentsvc serve` starts anything, where some are
missing (a new database, or a version that adds a table), as `make serve` makes them.

It runs ``init-db --if-missing`` in a process of its own on the app the stack serves, so
the launcher never holds a connection its gunicorns would inherit. When that fails (the
database cannot be reached, above all), the stack starts anyway: lists answer 503 until
the database answers, and ``/readyz`` says what it lacks. A server that refused to start
would need its supervisor to keep restarting it until a database that boots after it
is up.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping

import click

# init-db on the stack's app (operations.serving.APP), start-up problems as one line.
COMMAND = [sys.executable, "-m", "flask", "--app",
           "commentsvc.standalone.command:create_cli_app", "init-db", "--if-missing"]
# How long the tables may take before the stack starts without them: a database that
# takes connections and then says nothing must not keep the service from starting. A
# build cut off is finished by the next init-db (storage.upkeep).
SECONDS = 120


def prepare(env: Mapping[str, str], seconds: float = SECONDS) -> bool:
    """Create the service's missing tables (init-db's output on this process's terminal);
    whether the database was checked, else one line on stderr saying the stack starts
    anyway."""
    try:
        done = subprocess.run(COMMAND, env=dict(env), stdin=subprocess.DEVNULL,
                              timeout=seconds, check=False)
    except subprocess.TimeoutExpired:
        problem = f"init-db did not finish within {seconds:g} s"
    else:
        if done.returncode == 0:
            return True
        problem = f"init-db exited with status {done.returncode}"
    click.echo(f"The service's tables could not be checked ({problem}); starting anyway: "
               "requests answer 503 until the database answers, and /readyz says what "
               "it lacks.", err=True)
    return False
