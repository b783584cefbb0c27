"""The sign-in keys this process has lately seen sign someone in, so that a post need not
read its key before it is written.

Reading the key (web.auth.viewer_by_digest) took three of a post's round trips to the
database (begin, read, roll back; one since it runs on the connection the list reads
keep) and a fifth of its worker's time. A post whose key is
known here goes straight to its batch, and the writers' transaction reads the key back
with the batch's other facts (queries.posting.BATCH_FACTS): a key revoked meanwhile is
refused there with the same 401, and nothing is written. So a revoked key stops working
at the next write, as before, and never later.

A viewer from here carries the digest still to be confirmed (``Viewer.unconfirmed_key``).
A refusal raised before the batch (a bad body, say) confirms the key first, so a revoked
key still gets 401 rather than 400 (web.viewer.posted_as). Posts with an
Idempotency-Key confirm the key before their batch too, as a replay is found before the
batch reads its facts.

What a viewer shows besides its id (name, avatar, staff) is at most ``ttl`` seconds old;
at most ``size`` keys are kept, the oldest forgotten first.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace

from flask import Flask

from commentsvc.web.auth import Viewer

TTL_SECONDS = 60.0
SIZE = 10_000

# Where an app keeps its known keys.
EXTENSION = "commentsvc.known_keys"


class KnownKeys:
    """Key digest -> the viewer it signed in, unconfirmed, for ``ttl`` seconds."""

    def __init__(self, ttl: float = TTL_SECONDS, size: int = SIZE,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl
        self._size = size
        self._clock = clock
        self._mutex = threading.Lock()
        self._viewers: OrderedDict[str, tuple[float, Viewer]] = OrderedDict()

    def get(self, digest: str) -> Viewer | None:
        """The viewer ``digest`` signed in lately, marked unconfirmed; None if not known."""
        with self._mutex:
            found = self._viewers.get(digest)
            if found is None:
                return None
            if found[0] <= self._clock():
                del self._viewers[digest]
                return None
            return found[1]

    def keep(self, digest: str, viewer: Viewer) -> None:
        """Remember that ``digest`` signed ``viewer`` in (just read from the database)."""
        unconfirmed = replace(viewer, unconfirmed_key=digest)
        with self._mutex:
            self._viewers.pop(digest, None)
            self._viewers[digest] = (self._clock() + self._ttl, unconfirmed)
            while len(self._viewers) > self._size:
                self._viewers.popitem(last=False)

    def forget(self, digest: str) -> None:
        """A key that was refused, or is about to be read again."""
        with self._mutex:
            self._viewers.pop(digest, None)

    def __len__(self) -> int:
        return len(self._viewers)


def of(app: Flask) -> KnownKeys:
    """The keys ``app`` knows (made on first use; threads that race make one)."""
    known = app.extensions.get(EXTENSION)
    if known is None:
        known = app.extensions.setdefault(EXTENSION, KnownKeys())
    assert isinstance(known, KnownKeys)
    return known
