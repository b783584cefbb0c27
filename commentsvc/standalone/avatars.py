"""Avatar images drawn in pure Python: the default avatar and a user's identicon.

The standalone service stores no uploaded images, so a user's avatar is drawn from the
SHA-256 of their name: the same name always gives the same picture, a different name
almost always a different one. Pictures are small RGB PNGs written with zlib and struct.

    >>> identicon("Zoë Kraus") == identicon("Zoë Kraus") != identicon("Zoe Kraus")
    True
    >>> png_size(identicon("x/y?z#w"))
    (64, 64)
"""

from __future__ import annotations

import colorsys
import hashlib
import struct
import zlib
from functools import lru_cache
from pathlib import Path

SIZE = 64
GRID = 5  # cells per side; the left half is mirrored onto the right, as in GitHub's
CELL = 10
MARGIN = (SIZE - GRID * CELL) // 2
BACKGROUND = (240, 240, 240)
# Bumped whenever the drawing changes, so that clients' cached copies are replaced.
VERSION = "1"

DEFAULT_AVATAR_FILE = (Path(__file__).resolve().parent.parent
                       / "web" / "static" / "img" / "default-avatar.png")

Pixel = tuple[int, int, int]


def png(rows: list[list[Pixel]]) -> bytes:
    """An 8-bit RGB PNG of ``rows`` (each a list of (r, g, b)), every row unfiltered."""
    height, width = len(rows), len(rows[0])
    raw = b"".join(b"\x00" + bytes(channel for pixel in row for channel in pixel)
                   for row in rows)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) read from a PNG's header."""
    if not data.startswith(b"\x89PNG\r\n\x1a\n") or data[12:16] != b"IHDR":
        raise ValueError("not a PNG")
    return struct.unpack(">II", data[16:24])


def name_digest(name: str) -> bytes:
    """The SHA-256 of a name's UTF-8 (lone surrogates kept, as the database may hold them)."""
    return hashlib.sha256(name.encode("utf-8", "surrogatepass")).digest()


def colour(digest: bytes) -> Pixel:
    """A saturated, mid-light colour whose hue comes from the digest's first two bytes."""
    hue = int.from_bytes(digest[:2], "big") / 65536
    red, green, blue = colorsys.hls_to_rgb(hue, 0.5, 0.6)
    return round(red * 255), round(green * 255), round(blue * 255)


def cells(digest: bytes) -> list[list[bool]]:
    """The 5x5 pattern: the left three columns from the digest's bits, mirrored.

    >>> all(row == row[::-1] for row in cells(name_digest("bob")))
    True
    """
    bits = int.from_bytes(digest[2:6], "big")
    pattern = []
    for row in range(GRID):
        half = [bool(bits >> (row * 3 + column) & 1) for column in range(3)]
        pattern.append(half + half[1::-1])
    return pattern


@lru_cache(maxsize=4096)  # a page shows the same few authors again and again
def identicon(name: str) -> bytes:
    """The 64x64 PNG avatar of ``name``."""
    digest = name_digest(name)
    foreground, pattern = colour(digest), cells(digest)
    rows = []
    for y in range(SIZE):
        row = []
        for x in range(SIZE):
            gy, gx = (y - MARGIN) // CELL, (x - MARGIN) // CELL
            inside = 0 <= gy < GRID and 0 <= gx < GRID and y >= MARGIN and x >= MARGIN
            row.append(foreground if inside and pattern[gy][gx] else BACKGROUND)
        rows.append(row)
    return png(rows)


def silhouette() -> bytes:
    """The default avatar: a grey head and shoulders, 64x64 (committed as
    static/img/default-avatar.png; a test checks the file is this drawing)."""
    back, figure = (209, 213, 219), (156, 163, 175)
    rows = []
    for y in range(SIZE):
        row = []
        for x in range(SIZE):
            head = (x - 32) ** 2 + (y - 24) ** 2 <= 11 ** 2
            shoulders = ((x - 32) / 22) ** 2 + ((y - 62) / 20) ** 2 <= 1
            row.append(figure if head or shoulders else back)
        rows.append(row)
    return png(rows)
