"""An in-process cache of rendered list responses, keyed by their strong ETag.

The ETag already names everything a response is made of (the list's version and size,
the URL, the display settings), so a body stored under a tag is the body any later
request with that tag would build: no invalidation is needed, a write simply makes new
tags. Bounded by bytes, least recently used first out; one per worker process.

``PageCache`` is what the views ask of a cache; ``shared_page_cache.RedisResponseCache`` is the
other kind, shared by every worker and node (``COMMENTSVC_RESPONSE_CACHE_URL``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Protocol

import redis

from commentsvc.settings import Settings
from commentsvc.storage.redis_link import redis_client
from commentsvc.storage.shared_page_cache import RedisResponseCache

# The largest page kept in Redis (a page of 100 comments with their replies is far less).
MAX_SHARED_BODY = 2**20


class PageCache(Protocol):
    # Whether other processes put pages in it too (then any page may be there).
    shared: bool

    """Rendered list responses by strong ETag (never invalidated: a write makes new tags)."""

    def get(self, tag: str) -> bytes | None:
        """The body stored under ``tag``, or None."""

    def put(self, tag: str, body: bytes) -> None:
        """Keep ``body`` under ``tag`` if there is room for it."""


class ResponseCache:
    """Rendered response bodies by ETag, up to ``max_bytes`` in all."""

    shared = False

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._bodies: OrderedDict[str, bytes] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def get(self, tag: str) -> bytes | None:
        """The body stored under ``tag``, now the most recently used; None if absent."""
        with self._lock:
            body = self._bodies.get(tag)
            if body is not None:
                self._bodies.move_to_end(tag)
            return body

    def put(self, tag: str, body: bytes) -> None:
        """Keep ``body`` under ``tag``, evicting the least recently used to stay in bounds."""
        if len(body) > self.max_bytes:
            return
        with self._lock:
            if tag in self._bodies:
                return
            self._bodies[tag] = body
            self._size += len(body)
            while self._size > self.max_bytes:
                _, evicted = self._bodies.popitem(last=False)
                self._size -= len(evicted)

    def __len__(self) -> int:
        return len(self._bodies)

    @property
    def size(self) -> int:
        return self._size


def shared_redis(settings: Settings) -> redis.Redis | None:
    """The Redis that nodes share pages and recent writers through: the response cache's,
    else the rate limit's when that is a Redis server (``redis://``, ``rediss://``,
    ``redis+unix://``); None keeps both in each process."""
    if settings.response_cache_url:
        return redis_client(settings.response_cache_url)
    storage = settings.rate_limit_storage
    if storage.startswith(("redis://", "rediss://")):
        return redis_client(storage)
    if storage.startswith("redis+unix://"):  # the limits library's name for a socket
        return redis_client("unix://" + storage[len("redis+unix://"):])
    return None


def page_cache(settings: Settings, shared: redis.Redis | None) -> PageCache | None:
    """Rendered pages in Redis (RESPONSE_CACHE_URL), else in this worker; None when
    RESPONSE_CACHE_MB is 0."""
    if not settings.response_cache_mb:
        return None
    if settings.response_cache_url and shared is not None:
        return RedisResponseCache(shared, max_body_bytes=MAX_SHARED_BODY)
    return ResponseCache(settings.response_cache_mb * 2**20)


class RecentlyCached:
    """The pages this process put in the response cache lately (at most ``size``, the
    oldest forgotten first): only a hint, for whether reading the counter row first could
    spare the page read. Both ways give the same answer."""

    def __init__(self, size: int):
        self._size = size
        self._pages: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def holds(self, identity: str) -> bool:
        return identity in self._pages

    def add(self, identity: str) -> None:
        with self._lock:
            self._pages[identity] = None
            self._pages.move_to_end(identity)
            if len(self._pages) > self._size:
                self._pages.popitem(last=False)

