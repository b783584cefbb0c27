"""How often one user may post, counted by the ``limits`` library (a moving window).

Only comments actually written are counted: a rejected post (bad fields, no such
target) costs nothing, so a user correcting a typo is never locked out. The counts live
in the configured storage: ``memory://`` counts in each worker process (so N workers
allow up to N times the rate), ``redis://`` shares them between workers and machines.
The view takes a post's turn while it holds the writers' lock, so checking and counting
cannot interleave between two posts.
"""

from __future__ import annotations

import math
import time

from limits import parse_many
from limits.storage import storage_from_string
from limits.strategies import MovingWindowRateLimiter

from .errors import Throttled


class PostRateLimit:
    """The posting limits of one app, e.g. "10/minute" or "10/minute;200/day"."""

    def __init__(self, rate: str, storage_uri: str):
        self._items = parse_many(rate) if rate else []
        self._limiter = MovingWindowRateLimiter(storage_from_string(storage_uri))

    def take(self, user_id: int) -> None:
        """Count one post by ``user_id``, or raise Throttled (429) if that would exceed a
        limit; nothing is counted then."""
        key = str(user_id)
        for item in self._items:
            if not self._limiter.test(item, "post", key):
                reset = self._limiter.get_window_stats(item, "post", key).reset_time
                raise Throttled(max(1, math.ceil(reset - time.time())))
        for item in self._items:
            self._limiter.hit(item, "post", key)
