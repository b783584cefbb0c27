"""How often one user may post, counted by the ``limits`` library (a moving window).

Only comments actually written are counted: a rejected post (bad fields, no such
target) costs nothing, so a user correcting a typo is never locked out. The counts live
in the configured storage: ``memory://`` counts in each worker process (so N workers
allow up to N times the rate), ``redis://`` shares them between workers and machines.
The view takes a post's turn while it holds the writers' lock, so checking and counting
cannot interleave between two posts.

A storage that fails (a Redis that is down or slower than 250 ms) lets the post through
with a warning in the log: the limit guards against floods, and refusing every comment
while Redis is away would lose what people wrote.
"""

from __future__ import annotations

import logging
import math
import time

import redis
from limits import parse_many
from limits.errors import StorageError
from limits.storage import storage_from_string
from limits.strategies import MovingWindowRateLimiter

from .errors import Throttled

log = logging.getLogger("commentsvc")
# How long a Redis storage may take before the post goes through uncounted.
REDIS_TIMEOUT_SECONDS = 0.25


class PostRateLimit:
    """The posting limits of one app, e.g. "10/minute" or "10/minute;200/day"."""

    def __init__(self, rate: str, storage_uri: str):
        self._items = parse_many(rate) if rate else []
        options = ({"socket_timeout": REDIS_TIMEOUT_SECONDS,
                    "socket_connect_timeout": REDIS_TIMEOUT_SECONDS}
                   if storage_uri.startswith(("redis://", "rediss://")) else {})
        self._limiter = MovingWindowRateLimiter(storage_from_string(storage_uri, **options))

    def take(self, user_id: int) -> None:
        """Count one post by ``user_id``, or raise Throttled (429) if that would exceed a
        limit; nothing is counted then. A failing storage lets the post through."""
        try:
            self._take(str(user_id))
        except (redis.RedisError, StorageError, OSError) as exc:
            log.warning("rate-limit storage unavailable, post not counted: %s", exc)

    def _take(self, key: str) -> None:
        for item in self._items:
            if not self._limiter.test(item, "post", key):
                reset = self._limiter.get_window_stats(item, "post", key).reset_time
                raise Throttled(max(1, math.ceil(reset - time.time())))
        for item in self._items:
            self._limiter.hit(item, "post", key)
