"""Rendered list pages in Redis, shared by every worker and every node.

The same contract as the in-process ``ResponseCache``: bodies are stored under the strong
ETag, which names the list's version (bumped in the same transaction as every write to
the list), its size, the URL and the display settings. A write therefore never needs to
delete anything: the next request reads the new version, asks for a new tag and misses.
Keys expire after a day so pages of old versions do not pile up (Redis may also evict
them first when it is configured with an LRU ``maxmemory-policy``).

Redis is an accelerator here, never a dependency: a Redis that fails or is slow answers
as a miss (and a put is dropped), the failure is logged once, and Redis is left alone for
a few seconds before the next try (``Backoff``, which the other users of Redis share), so
a Redis outage costs a request nothing but its cached body.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import cast

import redis

log = logging.getLogger("commentsvc")

KEY_PREFIX = "commentsvc:page:"
TTL_SECONDS = 24 * 3600
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


class RedisResponseCache:
    """Rendered response bodies by ETag in Redis, each at most ``max_body_bytes``."""

    def __init__(self, client: redis.Redis, max_body_bytes: int):
        self.client = client
        self.max_body_bytes = max_body_bytes
        self._backoff = Backoff("response cache")

    def get(self, tag: str) -> bytes | None:
        """The body stored under ``tag``; None when absent or when Redis fails."""
        if self._backoff.resting:
            return None
        try:
            # redis-py types every reply Awaitable | Any (its sync and async clients share them)
            return cast("bytes | None", self.client.get(KEY_PREFIX + tag))
        except redis.RedisError as exc:
            self._backoff.failed(exc)
            return None

    def put(self, tag: str, body: bytes) -> None:
        """Keep ``body`` under ``tag`` for a day (dropped when too large or Redis fails)."""
        if len(body) > self.max_body_bytes or self._backoff.resting:
            return
        try:
            self.client.set(KEY_PREFIX + tag, body, ex=TTL_SECONDS)
        except redis.RedisError as exc:
            self._backoff.failed(exc)
