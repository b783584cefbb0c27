"""An in-process cache of rendered list responses, keyed by their strong ETag.

The ETag already names everything a response is made of (the list's version and size,
the URL, the display settings), so a body stored under a tag is the body any later
request with that tag would build: no invalidation is needed, a write simply makes new
tags. Bounded by bytes, least recently used first out; one per worker process.

``PageCache`` is what the views ask of a cache; ``shared_cache.RedisResponseCache`` is the
other kind, shared by every worker and node (``COMMENTSVC_RESPONSE_CACHE_URL``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Protocol


class PageCache(Protocol):
    """Rendered list responses by strong ETag (never invalidated: a write makes new tags)."""

    def get(self, tag: str) -> bytes | None:
        """The body stored under ``tag``, or None."""

    def put(self, tag: str, body: bytes) -> None:
        """Keep ``body`` under ``tag`` if there is room for it."""


class ResponseCache:
    """Rendered response bodies by ETag, up to ``max_bytes`` in all."""

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
