"""Waiting for a condition a server reaches in its own time."""

from __future__ import annotations

import time
from collections.abc import Callable


def within(seconds: float, condition: Callable[[], bool]) -> bool:
    """Whether ``condition()`` holds within ``seconds`` (asked every 50 ms, and once more
    at the end)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()
