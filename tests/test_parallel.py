"""commentsvc.interchange.parallel.ordered_map: results in order, the first error first, bounded."""

from __future__ import annotations

import time

import pytest

from commentsvc.interchange.parallel import ordered_map


class Refused(Exception):
    pass


def square(n: int) -> int:
    return n * n


def fail_at(n: int, slow_failure: int, fast_failure: int) -> int:
    """Fails at two items: the earlier one only after the later one has failed."""
    if n == slow_failure:
        time.sleep(0.5)
        raise Refused(n)
    if n == fast_failure:
        raise Refused(n)
    return n


@pytest.mark.parametrize("workers", [1, 2])
def test_results_come_in_the_items_order(workers):
    assert list(ordered_map(square, ((n,) for n in range(50)), workers=workers)) == [
        n * n for n in range(50)]


@pytest.mark.parametrize("workers", [1, 2])
def test_the_earliest_failing_item_is_the_one_raised(workers):
    items = [(n, 3, 6) for n in range(10)]
    seen = []
    with pytest.raises(Refused) as raised:
        for result in ordered_map(fail_at, items, workers=workers, window=8):
            seen.append(result)
    assert raised.value.args == (3,)
    assert seen == [0, 1, 2]


def test_no_more_than_the_window_is_in_flight():
    pulled = []

    def items():
        for n in range(40):
            pulled.append(n)
            yield (n,)

    in_flight = []
    for done, _ in enumerate(ordered_map(square, items(), workers=2, window=3), start=1):
        in_flight.append(len(pulled) - done)
    assert max(in_flight) <= 3
    assert len(in_flight) == 40
