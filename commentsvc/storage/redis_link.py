"""The service's link to Redis, shared by the page cache, the recent writers of the
replica routing and the posting limit: a client that gives up quickly, and a backoff
that leaves a failing Redis alone for a while.

Redis is an accelerator, never a dependency: each user treats a failure as "no answer"
and carries on without it.
"""

from __future__ import annotations

import logging
import threading
import time

import redis

log = logging.getLogger("commentsvc")

# Seconds to wait for Redis before counting it as a miss, and to leave it alone after.
TIMEOUT_SECONDS = 0.25
BACKOFF_SECONDS = 5.0


def redis_client(url: str) -> redis.Redis:
    """A client for ``url`` that gives up quickly (see TIMEOUT_SECONDS)."""
    return redis.Redis.from_url(url, socket_timeout=TIMEOUT_SECONDS,
                                socket_connect_timeout=TIMEOUT_SECONDS)


class Backoff:
    """Leaves a failing Redis alone for ``seconds`` after each failure, with one warning
    per failure, so an outage costs requests no time waiting for it."""

    def __init__(self, what: str, seconds: float = BACKOFF_SECONDS):
        self.what = what
        self.seconds = seconds
        self._resting_until = 0.0
        self._lock = threading.Lock()

    @property
    def resting(self) -> bool:
        """True while Redis is to be left alone."""
        return time.monotonic() < self._resting_until

    def failed(self, exc: Exception) -> None:
        """Redis failed: rest, and log it unless another thread just did."""
        with self._lock:
            if self.resting:
                return
            self._resting_until = time.monotonic() + self.seconds
        log.warning("%s unavailable, doing without it for %s s: %s", self.what, self.seconds,
                    exc)
