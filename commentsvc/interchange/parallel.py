"""Run one function over a stream of work items on several processes, results in order.

An import spends most of its time in Python checking lines, on one core, while the others
wait. ``ordered_map`` spreads that work over worker processes yet hands the results back
in the order of the items, so the caller sees exactly what a plain loop would have seen,
including which item raised first. At most ``window`` items are in flight, so memory does
not grow with the length of the stream.

Workers never outlive the process that started them: killed with SIGKILL, it runs no
clean-up, and its workers would wait on their queue for ever (and with them the
multiprocessing resource tracker, which exits once every holder of its pipe is gone).
So each worker asks Linux for SIGKILL when its parent dies (PR_SET_PDEATHSIG) and, on
any system, checks every half second that its parent is still the one that started it.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, TypeVar

from commentsvc.operations.parent_death import end_with_parent

R = TypeVar("R")


def ordered_map(function: Callable[..., R], items: Iterable[tuple[Any, ...]], *, workers: int,
                window: int | None = None) -> Generator[R, None, None]:
    """``function(*item)`` for each item, in the items' order.

    ``workers`` <= 1 runs everything in this process. Otherwise worker processes are
    started with "spawn" (no copy of this process's connections or threads), so
    ``function`` and the items must be picklable and ``function`` defined at module
    level. An exception from any item is raised when its turn comes; the items after it
    are then cancelled and the workers stopped.
    """
    if workers <= 1:
        for item in items:
            yield function(*item)
        return
    window = window or 2 * workers
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=die_with_parent, initargs=(os.getpid(),))
    pending: deque[Future[Any]] = deque()
    try:
        for item in items:
            pending.append(pool.submit(function, *item))
            if len(pending) >= window:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()
        pool.shutdown(wait=True, cancel_futures=True)


PARENT_CHECK_SECONDS = 0.5


def die_with_parent(parent_pid: int) -> None:
    """Worker initializer: end this process as soon as ``parent_pid`` is gone.

    The kernel's signal (Linux, parent_death) is immediate but follows the parent's thread
    that started the worker; the watch thread covers other systems and that case.
    """
    end_with_parent(signal.SIGKILL, parent_pid)  # already gone: killed right away
    threading.Thread(target=_exit_when_orphaned, args=(parent_pid,), daemon=True,
                     name="commentsvc-parent-watch").start()


def _exit_when_orphaned(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(PARENT_CHECK_SECONDS)
    os._exit(1)
