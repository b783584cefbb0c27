"""Group commit: the writes that meet in one process share one writers' transaction.

Every write takes the site's one writers' lock and holds it through its commit (list
positions depend on every earlier comment), so the lock, not the machine, would set how
many writes a second the site takes. Here the first write to arrive leads: once its
transaction holds the lock, it takes every write that is waiting by then (those that
arrived while it waited for the lock included), up to ``max_batch``, and runs them
together (one lock, a few statements for all of them, one commit). The writes that
arrive later wait for the next batch, which the first of them leads. Alone, a write is a
batch of one and waits for nobody.

Each write gets its own outcome: a result, or the exception that refused it (a 400 for
one post refuses only that post). An exception the batch itself raised (the database
gone, a deadline passed) is every member's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeAlias, TypeVar, Union

T = TypeVar("T")
R = TypeVar("R")

# What a batch writer gives each write: its result, or the exception that refused it.
Outcome: TypeAlias = Union[R, BaseException]  # noqa: UP007 - a generic alias needs Union


class BatchInterrupted(RuntimeError):
    """The batch holding this write stopped before it gave the write an outcome."""


class _Slot(Generic[T, R]):
    """One waiting write: what it is, and (once known) its outcome or the lead."""

    __slots__ = ("item", "outcome", "decided", "leads", "wake")

    def __init__(self, item: T) -> None:
        self.item = item
        self.outcome: R | BaseException = BatchInterrupted()
        self.decided = False
        self.leads = False
        self.wake = threading.Event()

    def result(self) -> R:
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome


class GroupCommit(Generic[T, R]):
    """Runs batches of the items handed to ``submit`` by concurrent threads; ``submit``
    returns its item's outcome.

    ``write(take)`` writes one batch: it calls ``take()`` once, when it is ready to write
    (a writer calls it once it holds the writers' lock, so the writes that arrived while
    it waited for the lock join this batch), and returns one outcome per item ``take``
    gave, in order.
    """

    def __init__(self, write: Callable[[Callable[[], list[T]]], Sequence[Outcome[R]]],
                 max_batch: int = 64) -> None:
        self._write = write
        self._max_batch = max_batch
        self._mutex = threading.Lock()
        self._waiting: list[_Slot[T, R]] = []
        self._busy = False

    def submit(self, item: T) -> R:
        """Write ``item`` in the next batch; its result, or raise what refused it."""
        slot: _Slot[T, R] = _Slot(item)
        with self._mutex:
            self._waiting.append(slot)
            leads = slot.leads = not self._busy
            self._busy = True
        if not leads:
            slot.wake.wait()
            if slot.decided:
                return slot.result()
        self._lead()
        return slot.result()

    def _lead(self) -> None:
        """Write the batch at the head of the queue (this thread's write comes first),
        then hand the lead to the first write still waiting, if any."""
        batch: list[_Slot[T, R]] = []

        def take() -> list[T]:
            if not batch:
                with self._mutex:
                    batch.extend(self._waiting[:self._max_batch])
                    del self._waiting[:self._max_batch]
            return [slot.item for slot in batch]

        try:
            outcomes = self._write(take)
            if len(outcomes) != len(batch) or not batch:
                raise BatchInterrupted(f"{len(outcomes)} outcomes for {len(batch)} writes")
            for slot, outcome in zip(batch, outcomes, strict=True):
                slot.outcome = outcome
        except Exception as exc:  # the batch's own failure is every member's
            take()
            for slot in batch:
                slot.outcome = exc
        finally:
            take()  # (already taken, unless the writer stopped before it took)
            with self._mutex:
                successor = self._waiting[0] if self._waiting else None
                if successor is None:
                    self._busy = False
                else:
                    successor.leads = True
            for slot in batch:
                slot.decided = True
                slot.wake.set()
            if successor is not None:
                successor.wake.set()
