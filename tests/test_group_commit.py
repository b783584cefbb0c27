"""storage.group_commit: writes that meet are written together, each gets its own outcome,
and no write waits for a batch that is not coming."""

from __future__ import annotations

import threading
import time

import pytest

from commentsvc.storage.group_commit import BatchInterrupted, GroupCommit


class Refused(Exception):
    pass


def queue_behind_the_first(commits, items, started, release, queued):
    """Submit the first item; once ``started`` is set (its batch under way), submit the
    rest from threads of their own and wait until ``queued`` writes wait; then set
    ``release`` and wait for every thread."""
    threads = [threading.Thread(target=commits.submit, args=(item,)) for item in items]
    threads[0].start()
    assert started.wait(5)
    for thread in threads[1:]:
        thread.start()
    while len(commits._waiting) < queued:
        time.sleep(0.01)
    release.set()
    for thread in threads:
        thread.join(5)


def test_a_write_alone_is_a_batch_of_one():
    batches = []
    commits = GroupCommit(lambda take: batches.append(take()) or [i * 2 for i in take()])
    assert commits.submit(21) == 42
    assert commits.submit(5) == 10
    assert batches == [[21], [5]]


def test_writes_that_arrive_during_a_batch_are_written_together_next():
    """While the first batch is being written, five more arrive: they make the next
    batch, each gets its own result, and the first write did not wait for them."""
    batches: list[list[int]] = []
    first_started, release = threading.Event(), threading.Event()

    def write(take):
        items = take()
        batches.append(list(items))
        if items == [0]:
            first_started.set()
            release.wait(5)
        return [f"done {i}" for i in items]

    commits = GroupCommit(write)
    results: dict[int, str] = {}

    def submit(n: int) -> None:
        results[n] = commits.submit(n)

    first = threading.Thread(target=submit, args=(0,))
    first.start()
    assert first_started.wait(5)
    others = [threading.Thread(target=submit, args=(n,)) for n in range(1, 6)]
    for thread in others:
        thread.start()
    while len(commits._waiting) < 5:  # all five queued behind the running batch
        time.sleep(0.01)
    release.set()
    for thread in (first, *others):
        thread.join(5)
    assert batches[0] == [0]
    assert sorted(batches[1]) == [1, 2, 3, 4, 5]
    assert len(batches) == 2
    assert results == {n: f"done {n}" for n in range(6)}


def test_a_refused_write_fails_alone():
    def write(take):
        return [Refused(i) if i % 2 else i for i in take()]

    commits = GroupCommit(write)
    assert commits.submit(2) == 2
    with pytest.raises(Refused):
        commits.submit(3)


def test_a_failing_batch_fails_every_write_in_it_and_the_next_batch_runs():
    gate, started = threading.Event(), threading.Event()
    calls = []

    def write(take):
        items = take()
        calls.append(list(items))
        if items == ["first"]:
            started.set()
            gate.wait(5)
            return ["ok"]
        if "bad" in items:
            raise Refused("the database said no")
        return ["ok"] * len(items)

    commits = GroupCommit(write)
    outcomes: dict[str, object] = {}

    def submit(item: str) -> None:
        try:
            outcomes[item] = commits.submit(item)
        except Refused as exc:
            outcomes[item] = exc

    threads = [threading.Thread(target=submit, args=("first",))]
    threads[0].start()
    assert started.wait(5)
    for item in ("bad", "also in the bad batch"):
        threads.append(threading.Thread(target=submit, args=(item,)))
        threads[-1].start()
    while len(commits._waiting) < 2:
        time.sleep(0.01)
    gate.set()
    for thread in threads:
        thread.join(5)
    assert outcomes["first"] == "ok"
    assert isinstance(outcomes["bad"], Refused)
    assert isinstance(outcomes["also in the bad batch"], Refused)
    assert commits.submit("later") == "ok"  # the lead was handed on, not lost


def test_no_batch_is_larger_than_the_limit():
    batches: list[int] = []
    gate, started = threading.Event(), threading.Event()

    def write(take):
        items = take()
        batches.append(len(items))
        if not started.is_set():
            started.set()
            gate.wait(5)
        return list(items)

    commits = GroupCommit(write, max_batch=3)
    queue_behind_the_first(commits, range(8), started, gate, queued=7)
    assert batches == [1, 3, 3, 1]


def test_a_writer_giving_too_few_outcomes_fails_the_batch_rather_than_guessing():
    commits = GroupCommit(lambda take: [])
    with pytest.raises(BatchInterrupted):
        commits.submit("x")


def test_many_threads_each_get_their_own_result():
    commits = GroupCommit(lambda take: [i * i for i in take()])
    results: dict[int, int] = {}
    lock = threading.Lock()

    def submit(n: int) -> None:
        value = commits.submit(n)
        with lock:
            results[n] = value

    threads = [threading.Thread(target=submit, args=(n,)) for n in range(200)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert results == {n: n * n for n in range(200)}


def test_writes_that_arrive_before_the_leader_takes_its_batch_join_it():
    """A leader takes its batch only when it is ready (a writer, once it holds the lock):
    the writes queued while it waited are in that batch, not the next."""
    batches: list[list[int]] = []
    under_way, ready = threading.Event(), threading.Event()

    def write(take):
        under_way.set()
        ready.wait(5)  # waiting for the lock, as it were
        items = take()
        batches.append(list(items))
        return list(items)

    commits = GroupCommit(write)
    queue_behind_the_first(commits, range(4), under_way, ready, queued=4)
    assert batches == [[0, 1, 2, 3]]


def test_a_writer_that_fails_before_it_takes_fails_the_writes_waiting():
    commits = GroupCommit(lambda take: (_ for _ in ()).throw(Refused("no lock")))
    with pytest.raises(Refused):
        commits.submit("x")
    assert commits._waiting == [] and not commits._busy
