"""Pin every formatting rule with hand-written tables so a changed rule fails loudly."""

from __future__ import annotations

import doctest
import html
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from commentsvc.rules import formatting
from commentsvc.rules.formatting import (
    author_url,
    avatar_url,
    format_date,
    quote_segment,
    render_body,
)
from hypothesis_profiles import examples


def _a(shown: str, href: str | None = None) -> str:
    """Write the one link markup the renderer may produce, to keep the tables readable."""
    return f'<a href="{shown if href is None else href}" rel="nofollow">{shown}</a>'


def test_docstring_examples_hold() -> None:
    """Keep the worked examples in the module honest."""
    result = doctest.testmod(formatting, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


# --- render_body: the examples from the brief ------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "See https://example.com/a?b=1&c=2.",
            'See <a href="https://example.com/a?b=1&amp;c=2" rel="nofollow">'
            "https://example.com/a?b=1&amp;c=2</a>.",
        ),
        (
            "trailing link http://ex.com/path!",
            'trailing link <a href="http://ex.com/path" rel="nofollow">http://ex.com/path</a>!',
        ),
        (
            "visit www.example.org, ok?",
            'visit <a href="http://www.example.org" rel="nofollow">www.example.org</a>, ok?',
        ),
        (
            "http://ex.com/ünï and https://ex.com/%20x",
            '<a href="http://ex.com/ünï" rel="nofollow">http://ex.com/ünï</a> and '
            '<a href="https://ex.com/%20x" rel="nofollow">https://ex.com/%20x</a>',
        ),
        (
            '<a href="http://evil" onclick="x()">click</a>',
            '&lt;a href=&quot;<a href="http://evil" rel="nofollow">http://evil</a>'
            "&quot; onclick=&quot;x()&quot;&gt;click&lt;/a&gt;",
        ),
        (
            "<script>alert('x')</script>",
            "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;",
        ),
        ('He said "hello" & left', "He said &quot;hello&quot; &amp; left"),
        ("I can't wait for the next one…", "I can&#x27;t wait for the next one…"),
        ("<http://a.com>", '&lt;<a href="http://a.com" rel="nofollow">http://a.com</a>&gt;'),
        ("http://", "http://"),
        ("www.", "www."),
        (
            "Line one\nLine two\r\nLine three\rfour",
            "Line one<br />Line two<br />Line three<br />four",
        ),
        ("", ""),
        ("a\r\nb\rc\nd", "a<br />b<br />c<br />d"),
        ("multi\n\n\nbreaks", "multi<br /><br /><br />breaks"),
        (
            "www.example.org",
            '<a href="http://www.example.org" rel="nofollow">www.example.org</a>',
        ),
        (
            "(http://example.com/x)",
            '(<a href="http://example.com/x" rel="nofollow">http://example.com/x</a>)',
        ),
        ("ftp://www.example.com", "ftp://www.example.com"),
        ("user@www.example.com", "user@www.example.com"),
        ("xhttp://a.com", "xhttp://a.com"),
        (
            "&amp; already &lt;escaped&gt;",
            "&amp;amp; already &amp;lt;escaped&amp;gt;",
        ),
    ],
)
def test_render_body_brief_examples(text: str, expected: str) -> None:
    assert render_body(text) == expected


# --- render_body: escaping --------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("&", "&amp;"),
        ("<", "&lt;"),
        (">", "&gt;"),
        ('"', "&quot;"),
        ("'", "&#x27;"),
        ("a&b<c>d\"e'f", "a&amp;b&lt;c&gt;d&quot;e&#x27;f"),
        ("&#x27; &#39; &quot; &nbsp;", "&amp;#x27; &amp;#39; &amp;quot; &amp;nbsp;"),
        ("<br />", "&lt;br /&gt;"),
        # Nothing else is touched: non-ASCII, emoji, other punctuation, other white space.
        ("é … 😀 中文 ß", "é … 😀 中文 ß"),
        ("`=/;:!?()[]{}*#%+~@$\\|^", "`=/;:!?()[]{}*#%+~@$\\|^"),
        ("tab\there\u00a0nbsp\u2003em\x0bvt\x0cff", "tab\there\u00a0nbsp\u2003em\x0bvt\x0cff"),
        ("\u2028\u2029\x85", "\u2028\u2029\x85"),
        ("plain text", "plain text"),
    ],
)
def test_render_body_escapes_exactly_five_characters(text: str, expected: str) -> None:
    assert render_body(text) == expected


# --- render_body: line breaks -----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\n", "<br />"),
        ("\r", "<br />"),
        ("\r\n", "<br />"),
        ("\n\r", "<br /><br />"),
        ("\r\r\n", "<br /><br />"),
        ("\r\n\r\n", "<br /><br />"),
        ("\r\n\n\r", "<br /><br /><br />"),
        ("end\n", "end<br />"),
        ("\nstart", "<br />start"),
        ("<\n>", "&lt;<br />&gt;"),
        ("http://a.com\nnext", _a("http://a.com") + "<br />next"),
        ("http://a.com\r\nnext", _a("http://a.com") + "<br />next"),
        ("http://a.com\rnext", _a("http://a.com") + "<br />next"),
        ("see:\nwww.a.com.\r\n", "see:<br />" + _a("www.a.com", "http://www.a.com") + ".<br />"),
    ],
)
def test_render_body_line_breaks(text: str, expected: str) -> None:
    assert render_body(text) == expected


# --- render_body: what starts a link ----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("http://a.com", _a("http://a.com")),
        ("https://a.com", _a("https://a.com")),
        ("HTTP://A.COM", _a("HTTP://A.COM")),
        ("HtTpS://a.com/X", _a("HtTpS://a.com/X")),
        ("www.a.com", _a("www.a.com", "http://www.a.com")),
        ("WWW.A.COM", _a("WWW.A.COM", "http://WWW.A.COM")),
        ("wWw.a.com/p", _a("wWw.a.com/p", "http://wWw.a.com/p")),
        ("http://x", _a("http://x")),
        ("www.x", _a("www.x", "http://www.x")),
        ("one http://a.com two https://b.com", f"one {_a('http://a.com')} two {_a('https://b.com')}"),
        # Not a link prefix at all.
        ("http:/a.com", "http:/a.com"),
        ("https:a.com", "https:a.com"),
        ("httpx://a.com", "httpx://a.com"),
        ("http:\\\\a.com", "http:\\\\a.com"),
        ("ww.a.com", "ww.a.com"),
        ("www-a.com", "www-a.com"),
        ("wwwa.com", "wwwa.com"),
    ],
)
def test_render_body_link_prefixes(text: str, expected: str) -> None:
    assert render_body(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "javascript:alert(1)",
        "JavaScript://a.com/%0Aalert(1)",
        "data:text/html;base64,AAAA",
        "ftp://old.example.com",
        "file:///etc/hosts",
        "mailto:a@b.c",
        "a@example.com",
        "example.com",
        "example.com/path?x=1",
        "//example.com",
        "tel:+123",
    ],
)
def test_render_body_never_links_other_schemes(text: str) -> None:
    assert render_body(text) == text


# --- render_body: what may come before a link -------------------------------------------


@pytest.mark.parametrize(
    ("before", "escaped"),
    [
        ("x", "x"),
        ("X", "X"),
        ("é", "é"),
        ("中", "中"),
        ("7", "7"),
        ("٣", "٣"),  # ARABIC-INDIC DIGIT THREE
        ("@", "@"),
        (".", "."),
        ("/", "/"),
        (":", ":"),
        ("-", "-"),
        ("_", "_"),
        ("+", "+"),
        ("%", "%"),
        ("&", "&amp;"),
        ("=", "="),
        ("#", "#"),
        ("~", "~"),
    ],
)
@pytest.mark.parametrize("link", ["http://a.com", "https://a.com", "www.a.com"])
def test_render_body_no_link_right_after_word_or_url_characters(
    before: str, escaped: str, link: str
) -> None:
    assert render_body(before + link) == escaped + link


@pytest.mark.parametrize(
    ("before", "escaped"),
    [
        (" ", " "),
        ("\t", "\t"),
        ("\u00a0", "\u00a0"),
        ("\n", "<br />"),
        ("(", "("),
        ("[", "["),
        ("{", "{"),
        ("!", "!"),
        ("?", "?"),
        (",", ","),
        (";", ";"),
        ("*", "*"),
        ("$", "$"),
        ("|", "|"),
        ("\\", "\\"),
        ("^", "^"),
        ("`", "`"),
        ("…", "…"),
        ("«", "«"),
        ("<", "&lt;"),
        (">", "&gt;"),
        ('"', "&quot;"),
        ("'", "&#x27;"),
    ],
)
@pytest.mark.parametrize(
    ("link", "href"),
    [("http://a.com", "http://a.com"), ("https://a.com", "https://a.com"),
     ("www.a.com", "http://www.a.com")],
)
def test_render_body_links_right_after_other_characters(
    before: str, escaped: str, link: str, href: str
) -> None:
    assert render_body(before + link) == escaped + _a(link, href)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ftp://www.example.com/x", "ftp://www.example.com/x"),
        ("user@www.example.com", "user@www.example.com"),
        ("xhttp://a.com and xwww.a.com", "xhttp://a.com and xwww.a.com"),
        ("go?u=http://a.com", "go?u=http://a.com"),
        ("1http://a.com", "1http://a.com"),
        # A URL inside a link stays part of that one link.
        ("http://a.com/?u=http://b.com", _a("http://a.com/?u=http://b.com")),
        ("http://a.com/r/www.b.com", _a("http://a.com/r/www.b.com")),
        ("[http://a.com]", "[" + _a("http://a.com]")),  # "]" is not trailing punctuation
    ],
)
def test_render_body_link_start_examples(text: str, expected: str) -> None:
    assert render_body(text) == expected


# --- render_body: where a link ends -----------------------------------------------------


@pytest.mark.parametrize(
    ("after", "escaped"),
    [
        (" ", " "),
        ("\t", "\t"),
        ("\n", "<br />"),
        ("\r", "<br />"),
        ("\x0b", "\x0b"),
        ("\x0c", "\x0c"),
        ("\u00a0", "\u00a0"),  # NO-BREAK SPACE
        ("\u2003", "\u2003"),  # EM SPACE
        ("\u3000", "\u3000"),  # IDEOGRAPHIC SPACE
        ("\u2028", "\u2028"),  # LINE SEPARATOR
        ("\u205f", "\u205f"),  # MEDIUM MATHEMATICAL SPACE
        ("<", "&lt;"),
        (">", "&gt;"),
        ('"', "&quot;"),
        ("'", "&#x27;"),
    ],
)
def test_render_body_link_ends_at_space_and_quote_characters(after: str, escaped: str) -> None:
    assert render_body(f"http://a.com/x{after}y") == _a("http://a.com/x") + f"{escaped}y"
    assert render_body(f"www.a.com{after}y") == _a("www.a.com", "http://www.a.com") + f"{escaped}y"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Everything else, including the trailing set in the middle, stays in the link.
        ("http://a.com/a.b,c;d:e!f?g)h", _a("http://a.com/a.b,c;d:e!f?g)h")),
        ("http://a.com/p?q=1&r=2#frag", _a("http://a.com/p?q=1&amp;r=2#frag")),
        ("http://a.com/(x", _a("http://a.com/(x")),
        ("http://a.com/x(", _a("http://a.com/x(")),
        ("http://a.com/x]", _a("http://a.com/x]")),
        ("http://a.com/x/", _a("http://a.com/x/")),
        ("http://a.com/x-", _a("http://a.com/x-")),
        ("http://a.com/x…", _a("http://a.com/x…")),
        ("http://a.com/`{}|\\^", _a("http://a.com/`{}|\\^")),
        ("http://a.com,http://b.com", _a("http://a.com,http://b.com")),
        ("http://a.com/\u200bx", _a("http://a.com/\u200bx")),  # ZERO WIDTH SPACE is no space
        ("https://ex.com/ünï/😀", _a("https://ex.com/ünï/😀")),
    ],
)
def test_render_body_link_keeps_everything_up_to_its_end(text: str, expected: str) -> None:
    assert render_body(text) == expected


# --- render_body: trailing punctuation --------------------------------------------------


@pytest.mark.parametrize("mark", list(".,;:!?)"))
def test_render_body_strips_each_trailing_mark(mark: str) -> None:
    assert render_body(f"http://a.com/x{mark}") == _a("http://a.com/x") + mark
    assert render_body(f"www.a.com{mark} z") == _a("www.a.com", "http://www.a.com") + f"{mark} z"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("http://a.com/x).,;:!?", _a("http://a.com/x") + ").,;:!?"),
        ("(see http://a.com/x)).", "(see " + _a("http://a.com/x") + "))."),
        ("http://a.com/x.html.", _a("http://a.com/x.html") + "."),
        ("http://a.com/x?!", _a("http://a.com/x") + "?!"),
        ("http://a.com/x...<b>", _a("http://a.com/x") + "...&lt;b&gt;"),
        ("www.a.com..", _a("www.a.com", "http://www.a.com") + ".."),
        ("http://a.com/wiki/F_(b)", _a("http://a.com/wiki/F_(b") + ")"),
        ("'http://a.com/x'.", "&#x27;" + _a("http://a.com/x") + "&#x27;."),
        ('"http://a.com/x."', "&quot;" + _a("http://a.com/x") + ".&quot;"),
    ],
)
def test_render_body_strips_trailing_marks_repeatedly(text: str, expected: str) -> None:
    assert render_body(text) == expected


# --- render_body: a link needs something after its prefix -------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "http://",
        "https://",
        "HTTPS://",
        "www.",
        "WWW.",
        "http://.",
        "https://...)!?",
        "http://)",
        "www.)",
        "www..",
        "www.-a.com",
        "www._a.com",
        "www..a.com",
        "www./x",
        "www.~x",
        "www.%41.com",
        "www.?q",
        "www.(a)",
    ],
)
def test_render_body_leaves_empty_or_bad_links_as_text(text: str) -> None:
    assert render_body(text) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("http:// x", "http:// x"),
        ("www.&amp;", "www.&amp;amp;"),
        ("http://<x>", "http://&lt;x&gt;"),
        ("www. x", "www. x"),
        ("www.é.com", _a("www.é.com", "http://www.é.com")),
        ("www.5.com", _a("www.5.com", "http://www.5.com")),
        ("www.a", _a("www.a", "http://www.a")),
        ("www._site.example", "www._site.example"),  # after www. a letter or digit
        ("www.-x.com", "www.-x.com"),
        ("www.%7Euser.org", "www.%7Euser.org"),
        ("http://-", _a("http://-")),
        ("http://.x", _a("http://.x")),
        # A refused candidate does not stop the search for later links.
        ("http:// then http://a.com", "http:// then " + _a("http://a.com")),
        ("www. then www.a.com", "www. then " + _a("www.a.com", "http://www.a.com")),
        ("http://.) (www.a.com)", "http://.) (" + _a("www.a.com", "http://www.a.com") + ")"),
        ("www.!http://a.com", "www.!" + _a("http://a.com")),
    ],
)
def test_render_body_link_content_rules(text: str, expected: str) -> None:
    assert render_body(text) == expected


# --- render_body: only the allowed markup, and nothing lost ------------------------------

_NASTY = [
    "",
    "plain",
    "See https://example.com/a?b=1&c=2.",
    '<a href="http://evil" onclick="x()">click</a>',
    "<script>alert('x')</script>",
    '"><img src=x onerror=alert(1)>',
    "http://a.com/\"onmouseover=\"alert(1)",
    "http://a.com/'><script>alert(1)</script>",
    "www.a.com/<script>",
    "https://x.com/?q=<b>&r=\"'&s=`",
    '<a href="javascript:alert(1)">x</a>',
    '<a href="http://x" rel="nofollow">fake</a>',
    "</a><br /><br/><br>",
    "&lt;&#60;&#x3C;&amp;&quot;&#x27;",
    "javascript:alert(1) data:text/html;base64,AAAA mailto:a@b.c",
    "((((http://a.com)))) [www.b.com].",
    "http://a.com)))...!!!???;;;:::,,,",
    "www.a.com\nwww.b.com\r\nhttp://c.com\rhttps://d.com",
    "http://a.com/&amp;&lt;",
    "<<<>>>\"\"\"'''&&&",
    "\u2028\u2029\x85\x00\x1f\x7f",
    "\r\n\r\r\n\n\r",
    "http:// https:// www. HTTP://X WWW.Y",
    "ftp://www.example.com user@www.example.com xhttp://a.com",
    "I can't wait for the next one… 😀 ünï",
    "http://ex.com/ünï and https://ex.com/%20x",
    "<http://a.com>\"https://b.com\"'www.c.com'",
]

# The scheme keeps the case it was typed in, so "HTTP://" is allowed too.
_ALLOWED_OPEN = re.compile(r'<a href="((?i:https?)://[^"<>]*)" rel="nofollow">([^<>]*)</a>')


@pytest.mark.parametrize("text", _NASTY)
def test_render_body_output_has_only_allowed_markup_and_round_trips(text: str) -> None:
    out = render_body(text)
    for match in _ALLOWED_OPEN.finditer(out):
        href, shown = match.groups()
        assert href in (shown, "http://" + shown)
    bare = _ALLOWED_OPEN.sub(lambda m: m.group(2), out).replace("<br />", "\n")
    assert "<" not in bare
    assert ">" not in bare
    assert '"' not in bare
    assert "'" not in bare
    assert html.unescape(bare) == text.replace("\r\n", "\n").replace("\r", "\n")


def test_render_body_leaves_pathological_input_as_text() -> None:
    """Long runs of near-links stay plain text (their speed is measured in bench/)."""
    texts = [
        "www.!" * 50_000,
        "http://" + ")" * 250_000,
        ("http:// " * 30_000) + "x",
        "a" * 250_000,
    ]
    assert [render_body(text) for text in texts] == texts


# --- format_date ------------------------------------------------------------------------

UTC_ZONE = ZoneInfo("UTC")


@pytest.mark.parametrize(
    ("value", "zone", "expected"),
    [
        (datetime(2023, 1, 13, 21, 2), "UTC", "13 Jan, 2023, 09:02 PM"),
        (datetime(2023, 1, 3, 0, 5), "UTC", "03 Jan, 2023, 12:05 AM"),
        (datetime(2023, 7, 4, 12, 0), "UTC", "04 Jul, 2023, 12:00 PM"),
        (datetime(2023, 1, 13, 21, 2), "Europe/Paris", "13 Jan, 2023, 10:02 PM"),
        (datetime(2023, 7, 4, 12, 0), "Europe/Paris", "04 Jul, 2023, 02:00 PM"),
        (datetime(2023, 1, 14, 2, 30), "America/New_York", "13 Jan, 2023, 09:30 PM"),
        (datetime(2024, 1, 1, 3, 0), "America/New_York", "31 Dec, 2023, 10:00 PM"),
        (datetime(2024, 3, 1, 4, 59), "America/New_York", "29 Feb, 2024, 11:59 PM"),
        (datetime(2023, 3, 12, 6, 59), "America/New_York", "12 Mar, 2023, 01:59 AM"),
        (datetime(2023, 3, 12, 7, 0), "America/New_York", "12 Mar, 2023, 03:00 AM"),
        (datetime(2023, 12, 31, 15, 0), "Asia/Tokyo", "01 Jan, 2024, 12:00 AM"),
        (datetime(2023, 1, 13, 21, 2), "Asia/Kolkata", "14 Jan, 2023, 02:32 AM"),
        (datetime(2023, 1, 13, 21, 2), "Pacific/Kiritimati", "14 Jan, 2023, 11:02 AM"),
        (datetime(2023, 1, 13, 21, 2), "Pacific/Pago_Pago", "13 Jan, 2023, 10:02 AM"),
    ],
)
def test_format_date_converts_naive_utc_to_zone(value: datetime, zone: str, expected: str) -> None:
    assert format_date(value, ZoneInfo(zone)) == expected


@pytest.mark.parametrize(
    ("hour", "minute", "expected"),
    [
        (0, 0, "05 Jun, 2023, 12:00 AM"),
        (0, 59, "05 Jun, 2023, 12:59 AM"),
        (1, 0, "05 Jun, 2023, 01:00 AM"),
        (9, 5, "05 Jun, 2023, 09:05 AM"),
        (11, 59, "05 Jun, 2023, 11:59 AM"),
        (12, 0, "05 Jun, 2023, 12:00 PM"),
        (12, 1, "05 Jun, 2023, 12:01 PM"),
        (13, 0, "05 Jun, 2023, 01:00 PM"),
        (21, 2, "05 Jun, 2023, 09:02 PM"),
        (22, 10, "05 Jun, 2023, 10:10 PM"),
        (23, 59, "05 Jun, 2023, 11:59 PM"),
    ],
)
def test_format_date_twelve_hour_clock(hour: int, minute: int, expected: str) -> None:
    assert format_date(datetime(2023, 6, 5, hour, minute), UTC_ZONE) == expected


@pytest.mark.parametrize(
    ("month", "day", "expected"),
    [
        (1, 1, "01 Jan, 2023, 10:00 AM"),
        (2, 9, "09 Feb, 2023, 10:00 AM"),
        (3, 10, "10 Mar, 2023, 10:00 AM"),
        (4, 30, "30 Apr, 2023, 10:00 AM"),
        (5, 31, "31 May, 2023, 10:00 AM"),
        (6, 15, "15 Jun, 2023, 10:00 AM"),
        (7, 4, "04 Jul, 2023, 10:00 AM"),
        (8, 8, "08 Aug, 2023, 10:00 AM"),
        (9, 30, "30 Sep, 2023, 10:00 AM"),
        (10, 1, "01 Oct, 2023, 10:00 AM"),
        (11, 11, "11 Nov, 2023, 10:00 AM"),
        (12, 25, "25 Dec, 2023, 10:00 AM"),
    ],
)
def test_format_date_english_months_and_padded_days(month: int, day: int, expected: str) -> None:
    assert format_date(datetime(2023, month, day, 10, 0), UTC_ZONE) == expected


def test_format_date_pads_year_to_four_digits() -> None:
    assert format_date(datetime(999, 5, 6, 7, 8), UTC_ZONE) == "06 May, 0999, 07:08 AM"


@pytest.mark.parametrize(
    ("value", "zone", "expected"),
    [
        (datetime(2023, 1, 13, 21, 2, tzinfo=UTC), ZoneInfo("Europe/Paris"),
         "13 Jan, 2023, 10:02 PM"),
        (datetime(2023, 1, 13, 23, 2, tzinfo=ZoneInfo("Europe/Paris")), UTC_ZONE,
         "13 Jan, 2023, 10:02 PM"),
        (datetime(2023, 1, 13, 21, 2, tzinfo=timezone(timedelta(hours=-5))), UTC_ZONE,
         "14 Jan, 2023, 02:02 AM"),
        (datetime(2023, 7, 4, 8, 0, tzinfo=ZoneInfo("America/New_York")),
         ZoneInfo("Asia/Tokyo"), "04 Jul, 2023, 09:00 PM"),
        # Plain tzinfo objects work as the target zone too.
        (datetime(2023, 1, 13, 1, 0), timezone(timedelta(hours=-3)), "12 Jan, 2023, 10:00 PM"),
        (datetime(2023, 1, 13, 1, 0), UTC, "13 Jan, 2023, 01:00 AM"),
    ],
)
def test_format_date_converts_aware_values_and_plain_tzinfo(
    value: datetime, zone: ZoneInfo | timezone, expected: str
) -> None:
    assert format_date(value, zone) == expected


@pytest.fixture
def local_time_far_from_utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Move the process's local zone to UTC+05:45 so naive-as-local mistakes show."""
    if not hasattr(time, "tzset"):
        pytest.skip("time.tzset is not available on this platform")
    monkeypatch.setenv("TZ", "XYZ-05:45")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("local_time_far_from_utc")
def test_format_date_naive_means_utc_whatever_the_local_zone() -> None:
    assert format_date(datetime(2023, 1, 13, 21, 2), UTC_ZONE) == "13 Jan, 2023, 09:02 PM"
    assert format_date(datetime(2023, 1, 13, 21, 2), ZoneInfo("Europe/Paris")) == (
        "13 Jan, 2023, 10:02 PM"
    )


# --- quote_segment, author_url, avatar_url ----------------------------------------------

_UNRESERVED = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~"


def test_quote_segment_keeps_only_unreserved_ascii() -> None:
    for code in range(128):
        char = chr(code)
        expected = char if char in _UNRESERVED else f"%{code:02X}"
        assert quote_segment(char) == expected, repr(char)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("", ""),
        (_UNRESERVED, _UNRESERVED),
        (" ", "%20"),
        ("/", "%2F"),
        ("?", "%3F"),
        ("#", "%23"),
        ("%", "%25"),
        ("%20", "%2520"),
        ("&=+;,:@", "%26%3D%2B%3B%2C%3A%40"),
        ("!*'()$", "%21%2A%27%28%29%24"),
        ("\\\t\n\x00\x7f", "%5C%09%0A%00%7F"),
        ("é", "%C3%A9"),
        ("É", "%C3%89"),
        ("€", "%E2%82%AC"),
        ("😀", "%F0%9F%98%80"),
        ("\u00a0", "%C2%A0"),
        ("中文", "%E4%B8%AD%E6%96%87"),
    ],
)
def test_quote_segment(name: str, expected: str) -> None:
    assert quote_segment(name) == expected


@pytest.mark.parametrize(
    ("username", "expected"),
    [
        ("Ann Smith", "/user/Ann%20Smith/"),
        ("x/y?z#w", "/user/x%2Fy%3Fz%23w/"),
        ("100% Real", "/user/100%25%20Real/"),
        ("Émile Zola", "/user/%C3%89mile%20Zola/"),
        ("  spaced  ", "/user/%20%20spaced%20%20/"),
        ("O'Brien", "/user/O%27Brien/"),
        ("Tab\tName", "/user/Tab%09Name/"),
        ("ann", "/user/ann/"),
        ("a.b-c_d~e", "/user/a.b-c_d~e/"),
        ("<b>&amp;", "/user/%3Cb%3E%26amp%3B/"),
    ],
)
def test_author_url(username: str, expected: str) -> None:
    assert author_url(username) == expected


DEFAULT_AVATAR = "/static/img/default-avatar.png"


@pytest.mark.parametrize(
    ("username", "avatar", "default", "expected"),
    [
        ("Zoë Kraus", "av2.png", DEFAULT_AVATAR, "/media/users/Zo%C3%AB%20Kraus/thumb/av2.png"),
        ("li wei", None, DEFAULT_AVATAR, DEFAULT_AVATAR),
        ("li wei", "", DEFAULT_AVATAR, DEFAULT_AVATAR),
        ("ann", "my pic.png", DEFAULT_AVATAR, "/media/users/ann/thumb/my%20pic.png"),
        ("a/b", "../x.png", DEFAULT_AVATAR, "/media/users/a%2Fb/thumb/..%2Fx.png"),
        ("ann", "é?#%.png", DEFAULT_AVATAR, "/media/users/ann/thumb/%C3%A9%3F%23%25.png"),
        ("ann", " ", DEFAULT_AVATAR, "/media/users/ann/thumb/%20"),
        # The default is returned exactly as given, never quoted.
        ("ann", None, "/static/img/dé fault.png?v=1", "/static/img/dé fault.png?v=1"),
        ("ann", "", "", ""),
    ],
)
def test_avatar_url(username: str, avatar: str | None, default: str, expected: str) -> None:
    assert avatar_url(username, avatar, default) == expected


# --- format_date never fails ----------------------------------------------------------

# The zones farthest east and west, zones with odd offsets, and fixed offsets of almost a day.
EXTREME_ZONES = [ZoneInfo(name) for name in (
    "UTC", "Pacific/Kiritimati", "Pacific/Apia", "Etc/GMT-14", "Etc/GMT+12",
    "Pacific/Pago_Pago", "America/St_Johns", "Asia/Kathmandu", "Australia/Lord_Howe",
    "America/Los_Angeles", "Europe/Dublin")] + [
    timezone(timedelta(hours=23, minutes=59)), timezone(-timedelta(hours=23, minutes=59))]
_SHOWN = re.compile(r"\d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec), \d{4}, "
                    r"(0[1-9]|1[0-2]):[0-5]\d [AP]M")


@given(st.datetimes(), st.sampled_from(EXTREME_ZONES))
@examples(400)
def test_format_date_shows_every_storable_time_in_every_zone(value, tz) -> None:
    """Any naive datetime a row can hold, shown in any zone, gives a date and never an
    error; inside the accepted range it is the zone's own time."""
    shown = format_date(value, tz)
    assert _SHOWN.fullmatch(shown), shown
    if formatting.EARLIEST_DATE <= value < formatting.LATEST_DATE:
        local = value.replace(tzinfo=UTC).astimezone(tz)
        assert shown.startswith(f"{local.day:02d} ") and f", {local.year:04d}, " in shown


@pytest.mark.parametrize("tz", EXTREME_ZONES)
@pytest.mark.parametrize("value", [datetime.min, datetime.max, datetime(1, 1, 1, 23, 59),
                                   datetime(9999, 12, 31, 0, 0), datetime(9999, 12, 31, 23)])
def test_format_date_at_the_ends_of_time_falls_back_to_utc(value, tz) -> None:
    shown = format_date(value, tz)
    try:
        local = value.replace(tzinfo=UTC).astimezone(tz)
    except OverflowError:
        local = value  # the zone cannot show it: UTC instead
    hour = local.hour % 12 or 12
    assert shown == (f"{local.day:02d} {formatting._MONTHS[local.month - 1]}, "
                     f"{local.year:04d}, {hour:02d}:{local.minute:02d} "
                     f"{'AM' if local.hour < 12 else 'PM'}")
