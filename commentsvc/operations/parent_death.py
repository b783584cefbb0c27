"""Processes that end with their parent, so a crashed master leaves nothing behind.

When a gunicorn master is killed with SIGKILL its workers would go on serving and keep its
listening socket for up to ``timeout`` seconds, and a supervisor's restart fails with
"Connection in use". Linux can signal a process the moment its parent dies
(prctl PR_SET_PDEATHSIG): gunicorn.conf.py's post_fork hook asks for SIGKILL in each
worker (the master's death is a crash already; the restart must not wait for a request),
and ``commentsvc serve`` asks for SIGTERM in nginx and gunicorn (they shut down cleanly).
Elsewhere than Linux nothing is set up.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
from typing import Any

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def end_with_parent(signum: int, parent_pid: int) -> bool:
    """Have this process receive ``signum`` when its parent dies; True when set up.

    ``parent_pid`` is the parent it was started by: if that one is already gone (it died
    between the fork and this call, so the kernel would never signal), the signal is
    sent right away.
    """
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0) != 0:
        return False
    if os.getppid() != parent_pid:
        os.kill(os.getpid(), signum)
    return True


def post_fork(server: Any, worker: Any) -> None:
    """gunicorn hook (the arbiter and the new worker): the worker is killed as soon as its
    master dies."""
    end_with_parent(signal.SIGKILL, server.pid)
