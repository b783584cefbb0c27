"""Comment bodies, dates and author paths kept free of Flask so every rule can be tested alone."""

from __future__ import annotations

import re
from datetime import UTC, datetime, tzinfo
from urllib.parse import quote
from zoneinfo import ZoneInfo

__all__ = [
    "EARLIEST_DATE",
    "LATEST_DATE",
    "author_url",
    "avatar_url",
    "format_date",
    "quote_segment",
    "render_body",
]

# One table does all escaping and turns both kinds of line break into ``<br />``; ``\r\n``
# is folded to ``\n`` beforehand so that it gives a single break.
_ESCAPES = str.maketrans(
    {
        "&": "&amp;",
        "<": "&lt;",
        ">": "&gt;",
        '"': "&quot;",
        "'": "&#x27;",
        "\r": "<br />",
        "\n": "<br />",
    }
)

# A link starts with ``http://``, ``https://`` or ``www.`` (any case), at the start of the
# text or after a character that cannot be inside a word, address or URL; ``\w`` covers
# every Unicode letter and digit plus ``_``.
_LINK_START = re.compile(r"(?<![\w@./:+%&=#~-])(?:https?://|www\.)", re.IGNORECASE)
# The rest of a link runs up to white space, one of ``< > " '`` or the end of the text.
_LINK_REST = re.compile(r"[^\s<>\"']*")
# Punctuation that ends a sentence rather than a URL.
_TRAILING = ".,;:!?)"

# The dates a comment may carry (naive UTC, from EARLIEST_DATE up to but not including
# LATEST_DATE): far enough from year 1 and year 9999 that every time zone can show them,
# and wide enough for any real comment. Import refuses others; the API only ever stores
# its own clock's time.
EARLIEST_DATE = datetime(1900, 1, 1)
LATEST_DATE = datetime(9000, 1, 1)

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def render_body(text: str) -> str:
    """Turn stored comment text into HTML whose only markup is ``<br />`` and nofollow links.

    Everything is escaped (``& < > " '``); ``\\r\\n``, ``\\r`` and ``\\n`` each become
    ``<br />``; ``http://``, ``https://`` and ``www.`` links become ``<a>`` elements.
    A link ends at white space, ``< > " '`` or the end of the text, loses any trailing
    ``.,;:!?)``, must keep something after its prefix (a letter or digit first, for
    ``www.``) and may not start right after a letter, digit or ``@ . / : - _ + % & = # ~``.

    >>> render_body("See https://ex.com/?b=1&c=2.")
    'See <a href="https://ex.com/?b=1&amp;c=2" rel="nofollow">https://ex.com/?b=1&amp;c=2</a>.'
    >>> render_body("visit www.example.org, ok?")
    'visit <a href="http://www.example.org" rel="nofollow">www.example.org</a>, ok?'
    >>> render_body("(http://example.com/x)")
    '(<a href="http://example.com/x" rel="nofollow">http://example.com/x</a>)'
    >>> render_body("ftp://www.example.com, user@www.example.com, javascript:alert(1)")
    'ftp://www.example.com, user@www.example.com, javascript:alert(1)'
    >>> render_body("<b>\\"hi\\"</b> & it's\\r\\nover")
    '&lt;b&gt;&quot;hi&quot;&lt;/b&gt; &amp; it&#x27;s<br />over'
    >>> render_body("http:// and www. alone")
    'http:// and www. alone'
    """
    text = text.replace("\r\n", "\n")
    parts: list[str] = []
    emitted = 0  # text[:emitted] is already in parts
    pos = 0  # where to look for the next link start
    length = len(text)
    while True:
        start_match = _LINK_START.search(text, pos)
        if start_match is None:
            break
        start, rest = start_match.span()
        is_www = start_match.group()[0] in "wW"
        # Checking the first character before scanning keeps runs like "www.!www.!..." linear.
        if is_www and not (rest < length and text[rest].isalnum()):
            pos = rest
            continue
        rest_match = _LINK_REST.match(text, rest)
        assert rest_match is not None  # the pattern also matches an empty run
        run_end = rest_match.end()
        tail = text[rest:run_end].rstrip(_TRAILING)
        if not tail:
            pos = run_end  # the run held only trailing punctuation, where no link can start
            continue
        end = rest + len(tail)
        shown = text[start:end].translate(_ESCAPES)
        href = "http://" + shown if is_www else shown
        parts.append(text[emitted:start].translate(_ESCAPES))
        parts.append(f'<a href="{href}" rel="nofollow">{shown}</a>')
        emitted = pos = end
    parts.append(text[emitted:].translate(_ESCAPES))
    return "".join(parts)


def format_date(value: datetime, tz: ZoneInfo | tzinfo) -> str:
    """Show a stored time in the reader's zone with English month names whatever the locale.

    A naive ``value`` means UTC; an aware one is converted as it is.

    >>> utc = ZoneInfo("UTC")
    >>> format_date(datetime(2023, 1, 13, 21, 2), utc)
    '13 Jan, 2023, 09:02 PM'
    >>> format_date(datetime(2023, 1, 3, 0, 5), utc)
    '03 Jan, 2023, 12:05 AM'
    >>> format_date(datetime(2023, 7, 4, 12, 0), utc)
    '04 Jul, 2023, 12:00 PM'
    >>> format_date(datetime(2023, 1, 13, 21, 2), ZoneInfo("Europe/Paris"))
    '13 Jan, 2023, 10:02 PM'
    >>> format_date(datetime(2023, 1, 14, 2, 30), ZoneInfo("America/New_York"))
    '13 Jan, 2023, 09:30 PM'

    It never fails: a time the zone cannot show (within hours of year 1 or 9999, which a
    datetime cannot pass) is shown in UTC instead, so one odd row cannot break a page.

    >>> format_date(datetime(9999, 12, 31, 23, 0), ZoneInfo("Asia/Tokyo"))
    '31 Dec, 9999, 11:00 PM'
    """
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    try:
        local = value.astimezone(tz)
    except (OverflowError, ValueError):
        try:
            local = value.astimezone(UTC)
        except (OverflowError, ValueError):
            local = value  # an aware value whose UTC time is out of range: as written
    hour = local.hour % 12 or 12
    meridiem = "AM" if local.hour < 12 else "PM"
    month = _MONTHS[local.month - 1]
    return f"{local.day:02d} {month}, {local.year:04d}, {hour:02d}:{local.minute:02d} {meridiem}"


def quote_segment(name: str) -> str:
    """Percent-encode text as UTF-8 so it stays one path segment, whatever it contains.

    Only ``A-Z a-z 0-9 _ . - ~`` are left as they are.

    >>> quote_segment("Ann Smith/x?y#z 100%")
    'Ann%20Smith%2Fx%3Fy%23z%20100%25'
    >>> quote_segment("Zoë_~.-")
    'Zo%C3%AB_~.-'
    """
    return quote(name, safe="")


def author_url(username: str) -> str:
    """Link an author's page, with the name quoted so it cannot change the path.

    >>> author_url("Ann Smith")
    '/user/Ann%20Smith/'
    >>> author_url("x/y?z#w")
    '/user/x%2Fy%3Fz%23w/'
    """
    return f"/user/{quote_segment(username)}/"


def avatar_url(username: str, avatar: str | None, default: str) -> str:
    """Point at the author's avatar thumbnail, or at ``default`` when there is no avatar.

    >>> avatar_url("Zoë Kraus", "av2.png", "/static/img/default-avatar.png")
    '/media/users/Zo%C3%AB%20Kraus/thumb/av2.png'
    >>> avatar_url("li wei", None, "/static/img/default-avatar.png")
    '/static/img/default-avatar.png'
    >>> avatar_url("li wei", "", "/static/img/default-avatar.png")
    '/static/img/default-avatar.png'
    """
    if not avatar:
        return default
    return f"/media/users/{quote_segment(username)}/thumb/{quote_segment(avatar)}"
