"""A word in shared memory that every process of one machine changes after each write it
commits to a database: how a process on the same machine knows, without asking the
database, that something may have changed since it last asked (storage.list_versions).

One file per database and user, in the machine's shared memory (``/dev/shm``, else the
temporary directory), named by a digest of the database's URL (its password left out):
the processes that name the database alike share it. Each change writes a value no
process wrote before (a random start of the process's own, counted on), so a reader that
finds the value it saw knows that no write this file hears of committed since. What the
file does not hear of (another machine, another spelling of the URL, SQL from outside the
service) reaches the processes as the database's notifications instead.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import tempfile
import threading
from pathlib import Path

from sqlalchemy.engine import URL

_WORDS = 8  # the file's size in 8-byte words (only the first is used)


def _directory() -> Path:
    shared = Path("/dev/shm")
    return shared if shared.is_dir() and os.access(shared, os.W_OK) else Path(
        tempfile.gettempdir())


def file_for(url: URL) -> Path:
    """The file of the database ``url`` names, for this user."""
    named = URL.create(url.drivername, url.username, None, url.host, url.port, url.database,
                       url.query).render_as_string(hide_password=False)
    digest = hashlib.sha256(named.encode("utf-8")).hexdigest()[:24]
    return _directory() / f"commentsvc-writes-{os.getuid()}-{digest}"


class NodeWrites:
    """The shared word of one database (opened again in a forked child)."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self._pid = 0
        self._words: memoryview | None = None
        self._next = 0
        # A lock another thread held at fork() would never be let go in the child (these
        # objects live as long as their process).
        os.register_at_fork(after_in_child=self._new_lock)

    def _new_lock(self) -> None:
        self._lock = threading.Lock()

    def value(self) -> int:
        """The word now."""
        return self._open()[0]

    def changed(self) -> None:
        """Say that a write of this process committed (or may have)."""
        words = self._open()
        with self._lock:
            self._next = (self._next + 1) & 0xFFFF_FFFF_FFFF_FFFF
            words[0] = self._next

    def _open(self) -> memoryview:
        words = self._words
        if words is not None and self._pid == os.getpid():
            return words
        with self._lock:
            if self._words is None or self._pid != os.getpid():
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
                try:
                    if os.fstat(fd).st_size < _WORDS * 8:
                        os.ftruncate(fd, _WORDS * 8)
                    mapped = mmap.mmap(fd, _WORDS * 8)
                finally:
                    os.close(fd)
                self._words = memoryview(mapped).cast("Q")
                self._next = int.from_bytes(os.urandom(8), "little")
                self._pid = os.getpid()
            return self._words


_by_url: dict[URL, NodeWrites] = {}
_made = threading.Lock()


def for_url(url: URL) -> NodeWrites:
    """The shared word of the database ``url`` names (one object per URL and process)."""
    found = _by_url.get(url)
    if found is None:
        with _made:
            found = _by_url.get(url)
            if found is None:
                found = _by_url[url] = NodeWrites(file_for(url))
    return found
