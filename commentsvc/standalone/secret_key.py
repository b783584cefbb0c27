"""The standalone app's secret key when none is configured: generated once, kept in the
instance folder, so sign-in cookies survive restarts and every worker signs alike.

Workers start together; each writes its candidate to a file of its own and links it into
place, which fails if another got there first, so every worker reads the same key.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

FILE_NAME = "secret_key"


def instance_secret(instance_path: str | os.PathLike[str]) -> str:
    """The key kept in ``instance_path``/secret_key, created (mode 0600) if missing."""
    path = Path(instance_path) / FILE_NAME
    if not path.exists():
        candidate = path.with_name(f".{FILE_NAME}.{os.getpid()}.{secrets.token_hex(4)}")
        descriptor = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="ascii") as out:
            out.write(secrets.token_hex(32) + "\n")
            out.flush()
            os.fsync(out.fileno())
        try:
            os.link(candidate, path)  # never replaces a key another worker kept
        except FileExistsError:
            pass
        finally:
            candidate.unlink()
    key = path.read_text(encoding="ascii").strip()
    if len(key) < 32:
        raise RuntimeError(f"{path} holds no usable key; delete it to make a new one")
    return key
