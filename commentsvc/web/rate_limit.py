"""How often one user may post, counted by the ``limits`` library (a moving window).

Only comments actually written are counted: a rejected post (bad fields, no such
target) costs nothing, so a user correcting a typo is never locked out, and neither does
a post its transaction failed to write (a lock timeout, a database error, a batch run
again post by post), which its client will send again. The counts live in the
configured storage: ``memory://`` counts in each worker process (so N workers allow up
to N times the rate), ``redis://`` shares them between workers and machines. A batch
checks each post while it holds the writers' lock (``check``, with the batch's earlier
posts by the same user) and counts its posts once they are written, still under the
lock (``count``), so checking and counting cannot interleave between two posts.

A storage that fails (a Redis that is down or slower than 250 ms) never fails a post:
the post is counted in this worker's memory instead, as ``memory://`` would, with a
warning in the log, and the storage is left alone for 5 s before the next try (so an
outage does not hold the writers' lock for a timeout on every post). The limit still
holds per worker meanwhile; refusing every comment while Redis is away would lose what
people wrote.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

import redis
from limits import parse_many
from limits.errors import StorageError
from limits.storage import MemoryStorage, storage_from_string
from limits.strategies import MovingWindowRateLimiter

from commentsvc.storage.redis_link import TIMEOUT_SECONDS, Backoff
from commentsvc.web.exceptions import Throttled


class PostRateLimit:
    """The posting limits of one app, e.g. "10/minute" or "10/minute;200/day"."""

    def __init__(self, rate: str, storage_uri: str):
        self._items = parse_many(rate) if rate else []
        # A Redis storage that does not answer within the timeout every use of Redis
        # here has: the post is counted in memory instead.
        options = ({"socket_timeout": TIMEOUT_SECONDS,
                    "socket_connect_timeout": TIMEOUT_SECONDS}
                   if storage_uri.startswith(("redis://", "rediss://", "redis+unix://"))
                   else {})
        self._limiter = MovingWindowRateLimiter(
            storage_from_string(storage_uri, wrap_exceptions=True, **options))
        self._fallback: MovingWindowRateLimiter | None = None  # made on the first failure
        self._fallback_lock = threading.Lock()
        self._backoff = Backoff("rate-limit storage (counting posts in this worker)")

    def check(self, user_id: int, cost: int = 1) -> None:
        """Raise Throttled (429) if ``cost`` more posts by ``user_id`` would exceed a
        limit. Counts nothing: ``count`` does, once they are written."""
        if self._items:
            self._use(lambda limiter: self._check(limiter, str(user_id), cost))

    def count(self, user_id: int, cost: int = 1) -> None:
        """Count ``cost`` posts by ``user_id``, written."""
        if self._items:
            self._use(lambda limiter: self._hit(limiter, str(user_id), cost))

    def _use(self, work: Callable[[MovingWindowRateLimiter], None]) -> None:
        """``work`` on the storage; on this worker's counts while the storage fails."""
        if not self._backoff.resting:
            try:
                return work(self._limiter)
            except (StorageError, redis.RedisError, OSError) as exc:
                self._backoff.failed(exc)
        work(self._fallback or self._make_fallback())

    def _make_fallback(self) -> MovingWindowRateLimiter:
        """This worker's counts, made once: two posts meeting the first failure at once
        count in the same memory."""
        with self._fallback_lock:
            if self._fallback is None:
                self._fallback = MovingWindowRateLimiter(MemoryStorage())
            return self._fallback

    def _check(self, limiter: MovingWindowRateLimiter, key: str, cost: int) -> None:
        for item in self._items:
            if not limiter.test(item, "post", key, cost=cost):
                reset = limiter.get_window_stats(item, "post", key).reset_time
                raise Throttled(max(1, math.ceil(reset - time.time())))

    def _hit(self, limiter: MovingWindowRateLimiter, key: str, cost: int) -> None:
        for item in self._items:
            limiter.hit(item, "post", key, cost=cost)
