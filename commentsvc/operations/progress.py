"""Progress bars for the long commands (import, export, seed), on a terminal only.

On a terminal the bar is click's, on stderr; anywhere else (a pipe, a log, CI) nothing is
drawn and the command prints its one summary line when it is done.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import click


def on_terminal() -> bool:
    """Whether a person watches stderr (the bar's stream)."""
    return sys.stderr.isatty()


@contextmanager
def bar(length: int | None, label: str) -> Iterator[Callable[[int], Any]]:
    """Inside: a function advancing the bar by n steps of ``length``; it draws nothing
    off a terminal or when the length is unknown."""
    if length is None or not on_terminal():
        yield lambda _n: None
        return
    with click.progressbar(length=length, label=label, file=sys.stderr) as shown:
        yield shown.update


def counting(items: Iterable[Any], advance: Callable[[int], Any],
             size: Callable[[Any], int] = lambda _item: 1, every: int = 10_000) -> Iterator[Any]:
    """The same items, advancing by ``size`` of each, in steps of about ``every`` items
    (the bar's redraw costs more than a line's parse)."""
    pending = 0
    for done, item in enumerate(items, start=1):
        pending += size(item)
        yield item
        if done % every == 0:
            advance(pending)
            pending = 0
    advance(pending)
