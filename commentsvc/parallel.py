"""Run one function over a stream of work items on several processes, results in order.

An import spends most of its time in Python checking lines, on one core, while the others
wait. ``ordered_map`` spreads that work over worker processes yet hands the results back
in the order of the items, so the caller sees exactly what a plain loop would have seen,
including which item raised first. At most ``window`` items are in flight, so memory does
not grow with the length of the stream.
"""

from __future__ import annotations

import multiprocessing
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, TypeVar

R = TypeVar("R")


def ordered_map(function: Callable[..., R], items: Iterable[tuple], *, workers: int,
                window: int | None = None) -> Iterator[R]:
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
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
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
