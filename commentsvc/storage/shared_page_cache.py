"""Rendered list pages in Redis, shared by every worker and every node.

The same contract as the in-process ``ResponseCache``: bodies are stored under the strong
ETag, which names the list's version (bumped in the same transaction as every write to
the list), its size, the URL and the display settings. A write therefore never needs to
delete anything: the next request reads the new version, asks for a new tag and misses.
Keys expire after a day so pages of old versions do not pile up (Redis may also evict
them first when it is configured with an LRU ``maxmemory-policy``).

Redis is an accelerator here, never a dependency: a Redis that fails or is slow answers
as a miss (and a put is dropped), the failure is logged once, and Redis is left alone for
a few seconds before the next try (``redis_link.Backoff``, which the other users of Redis
share), so a Redis outage costs a request nothing but its cached body.
"""

from __future__ import annotations

import logging
from typing import cast

import redis

from commentsvc.storage.redis_link import Backoff

log = logging.getLogger("commentsvc")

KEY_PREFIX = "commentsvc:page:"
TTL_SECONDS = 24 * 3600
class RedisResponseCache:
    """Rendered response bodies by ETag in Redis, each at most ``max_body_bytes``."""

    shared = True  # every node's pages: worth a look for any page

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
