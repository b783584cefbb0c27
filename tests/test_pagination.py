"""Pin every paging rule with hand-written tables so a changed rule fails loudly."""

from __future__ import annotations

import doctest

import pytest

from commentsvc.rules import pagination
from commentsvc.rules.pagination import (
    InvalidPage,
    build_p8n,
    num_pages,
    page_numbers_to_show,
    page_url,
    parse_page,
    position_range,
)

BASE = "http://testserver/api/comments/"


def test_docstring_examples_hold() -> None:
    """Keep the worked examples in the module honest."""
    result = doctest.testmod(pagination, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


# --- num_pages -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("count", "page_size", "expected"),
    [
        (0, 10, 1),
        (1, 10, 1),
        (9, 10, 1),
        (10, 10, 1),
        (11, 10, 2),
        (20, 10, 2),
        (25, 10, 3),
        (1, 1, 1),
        (100, 1, 100),
        (0, 1, 1),
        # Exact integer arithmetic: a float division would round these wrongly.
        (10**17 + 1, 1, 10**17 + 1),
        (10**17 + 1, 10**17, 2),
    ],
)
def test_num_pages(count: int, page_size: int, expected: int) -> None:
    assert num_pages(count, page_size) == expected


@pytest.mark.parametrize(("count", "page_size"), [(10, 0), (10, -1), (-1, 10)])
def test_num_pages_rejects_nonsense(count: int, page_size: int) -> None:
    with pytest.raises(ValueError):
        num_pages(count, page_size)


# --- parse_page ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "pages", "expected"),
    [
        (None, 5, 1),
        ("", 5, 1),
        (None, 1, 1),
        ("last", 5, 5),
        ("last", 1, 1),
        ("1", 5, 1),
        ("3", 5, 3),
        ("5", 5, 5),
        ("007", 10, 7),
        ("01", 1, 1),
        ("10", 10, 10),
        ("99", 100, 99),
        ("100", 100, 100),
        ("0" * 5000 + "3", 3, 3),
    ],
)
def test_parse_page_accepts(raw: str | None, pages: int, expected: int) -> None:
    assert parse_page(raw, pages) == expected


@pytest.mark.parametrize(
    ("raw", "pages"),
    [
        ("0", 5),
        ("00", 5),
        ("-1", 5),
        ("abc", 5),
        ("1.0", 5),
        (" 2", 5),
        ("2 ", 5),
        ("2\n", 5),
        ("+2", 5),
        ("\u0663", 5),  # ARABIC-INDIC DIGIT THREE
        ("\u00b2", 5),  # SUPERSCRIPT TWO: str.isdigit() says yes
        ("\uff13", 5),  # FULLWIDTH DIGIT THREE
        ("2_0", 50),
        ("1e1", 50),
        ("0x1", 50),
        ("LAST", 5),
        ("Last", 5),
        ("last ", 5),
        ("first", 5),
        ("6", 5),
        ("2", 1),
        ("11", 10),
        ("101", 100),
        ("010", 9),
        ("9" * 400, 5),
        ("9" * 100_000, 10**6),
    ],
)
def test_parse_page_rejects(raw: str, pages: int) -> None:
    with pytest.raises(InvalidPage):
        parse_page(raw, pages)


def test_parse_page_rejects_no_pages() -> None:
    with pytest.raises(ValueError):
        parse_page("last", 0)


# --- position_range --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("page", "page_size", "count", "expected"),
    [
        (1, 10, 25, (16, 25)),
        (2, 10, 25, (6, 15)),
        (3, 10, 25, (1, 5)),
        (1, 10, 20, (11, 20)),
        (2, 10, 20, (1, 10)),
        (1, 10, 10, (1, 10)),
        (1, 10, 1, (1, 1)),
        (1, 10, 0, (1, 0)),
        (1, 1, 3, (3, 3)),
        (2, 1, 3, (2, 2)),
        (3, 1, 3, (1, 1)),
        (1, 3, 7, (5, 7)),
        (2, 3, 7, (2, 4)),
        (3, 3, 7, (1, 1)),
    ],
)
def test_position_range(page: int, page_size: int, count: int, expected: tuple[int, int]) -> None:
    assert position_range(page, page_size, count) == expected


@pytest.mark.parametrize(
    ("page", "page_size", "count"),
    [(0, 10, 25), (-1, 10, 25), (4, 10, 25), (3, 10, 20), (2, 10, 0), (0, 10, 0)],
)
def test_position_range_rejects_pages_outside_the_list(
    page: int, page_size: int, count: int
) -> None:
    with pytest.raises(InvalidPage):
        position_range(page, page_size, count)


@pytest.mark.parametrize("page_size", [1, 2, 3, 7, 10])
@pytest.mark.parametrize("count", [1, 2, 9, 10, 11, 30, 31])
def test_pages_cover_every_position_once_newest_first(page_size: int, count: int) -> None:
    seen: list[int] = []
    for page in range(1, num_pages(count, page_size) + 1):
        lo, hi = position_range(page, page_size, count)
        seen.extend(range(hi, lo - 1, -1))
        last_page = page == num_pages(count, page_size)
        assert hi - lo + 1 == page_size or last_page
    assert seen == list(range(count, 0, -1))


# --- page_numbers_to_show ----------------------------------------------------------------

N = None

# Written out by hand from the rule, not computed by it.
DISPLAYED = [
    # (current, final, expected)
    (1, 1, [1]),
    (1, 2, [1, 2]),
    (2, 2, [1, 2]),
    (1, 5, [1, 2, 3, 4, 5]),
    (2, 5, [1, 2, 3, 4, 5]),
    (3, 5, [1, 2, 3, 4, 5]),
    (4, 5, [1, 2, 3, 4, 5]),
    (5, 5, [1, 2, 3, 4, 5]),
    (1, 6, [1, 2, 3, N, 6]),
    (2, 6, [1, 2, 3, N, 6]),
    (3, 6, [1, 2, 3, 4, 5, 6]),
    (4, 6, [1, 2, 3, 4, 5, 6]),
    (5, 6, [1, N, 4, 5, 6]),
    (6, 6, [1, N, 4, 5, 6]),
    (1, 7, [1, 2, 3, N, 7]),
    (2, 7, [1, 2, 3, N, 7]),
    (3, 7, [1, 2, 3, 4, N, 7]),
    (4, 7, [1, 2, 3, 4, 5, 6, 7]),
    (5, 7, [1, N, 4, 5, 6, 7]),
    (6, 7, [1, N, 5, 6, 7]),
    (7, 7, [1, N, 5, 6, 7]),
    (1, 10, [1, 2, 3, N, 10]),
    (2, 10, [1, 2, 3, N, 10]),
    (3, 10, [1, 2, 3, 4, N, 10]),
    (4, 10, [1, 2, 3, 4, 5, N, 10]),
    (5, 10, [1, N, 4, 5, 6, N, 10]),
    (6, 10, [1, N, 5, 6, 7, N, 10]),
    (7, 10, [1, N, 6, 7, 8, 9, 10]),
    (8, 10, [1, N, 7, 8, 9, 10]),
    (9, 10, [1, N, 8, 9, 10]),
    (10, 10, [1, N, 8, 9, 10]),
    (14, 16, [1, N, 13, 14, 15, 16]),
    (1, 100, [1, 2, 3, N, 100]),
    (2, 100, [1, 2, 3, N, 100]),
    (3, 100, [1, 2, 3, 4, N, 100]),
    (4, 100, [1, 2, 3, 4, 5, N, 100]),
    (5, 100, [1, N, 4, 5, 6, N, 100]),
    (50, 100, [1, N, 49, 50, 51, N, 100]),
    (96, 100, [1, N, 95, 96, 97, N, 100]),
    (97, 100, [1, N, 96, 97, 98, 99, 100]),
    (98, 100, [1, N, 97, 98, 99, 100]),
    (99, 100, [1, N, 98, 99, 100]),
    (100, 100, [1, N, 98, 99, 100]),
]


@pytest.mark.parametrize(("current", "final", "expected"), DISPLAYED)
def test_page_numbers_to_show(current: int, final: int, expected: list[int | None]) -> None:
    assert page_numbers_to_show(current, final) == expected


def test_displayed_table_covers_every_position_that_matters() -> None:
    covered = {(current, final) for current, final, _ in DISPLAYED}
    for final in (1, 2, 5, 6, 7):
        assert {(c, final) for c in range(1, final + 1)} <= covered
    for final, middle in ((10, 6), (100, 50)):
        for c in (1, 2, 3, 4, 5, middle, final - 4, final - 3, final - 2, final - 1, final):
            assert (c, final) in covered


@pytest.mark.parametrize(
    ("final", "current"),
    [(final, current) for final in range(1, 61) for current in range(1, final + 1)],
)
def test_page_numbers_to_show_properties(final: int, current: int) -> None:
    shown = page_numbers_to_show(current, final)
    numbers = [n for n in shown if n is not None]
    assert shown[0] == 1
    assert shown[-1] == final
    assert current in shown
    assert numbers == sorted(set(numbers))  # strictly increasing
    for i, item in enumerate(shown):
        if item is None:
            before, after = shown[i - 1], shown[i + 1]
            assert before is not None and after is not None
            assert after - before >= 3
        elif i > 0 and shown[i - 1] is not None:
            assert item == shown[i - 1] + 1
    if final <= 5:
        assert shown == list(range(1, final + 1))


@pytest.mark.parametrize(("current", "final"), [(0, 5), (6, 5), (0, 10), (11, 10), (-1, 1)])
def test_page_numbers_to_show_rejects_pages_outside_the_list(current: int, final: int) -> None:
    with pytest.raises(InvalidPage):
        page_numbers_to_show(current, final)


def test_page_numbers_to_show_rejects_no_pages() -> None:
    with pytest.raises(ValueError):
        page_numbers_to_show(1, 0)


# --- page_url ------------------------------------------------------------------------------

H = "http://h/api/comments/"


@pytest.mark.parametrize(
    ("base_url", "query_string", "page", "expected"),
    [
        (H, "", 1, H),
        (H, "", 2, H + "?page=2"),
        (H, "", 3, H + "?page=3"),
        (
            H,
            "page=2&content_type=users.user&object_id=17",
            3,
            H + "?content_type=users.user&object_id=17&page=3",
        ),
        (
            H,
            "page=2&content_type=users.user&object_id=17",
            1,
            H + "?content_type=users.user&object_id=17",
        ),
        (
            BASE,
            "content_type=comics.comicpage&object_id=100&page=2&format=json",
            3,
            BASE + "?content_type=comics.comicpage&object_id=100&format=json&page=3",
        ),
        (H, "format=api&page=2&x=1", 1, H + "?format=api&x=1"),
        (H, "x=1&format=api", 2, H + "?x=1&format=api&page=2"),
        (H, "page_size=5&page=2", 3, H + "?page_size=5&page=3"),
        (H, "page=1&page=4", 1, H),
        (H, "page=1&a=b&page=4", 5, H + "?a=b&page=5"),
        (
            H,
            "page_size=5&pages=2&xpage=3&Page=4&PAGE=5",
            2,
            H + "?page_size=5&pages=2&xpage=3&Page=4&PAGE=5&page=2",
        ),
        (H, "%70age=2&a=1", 1, H + "?a=1"),
        (H, "pa%67e=2&a=1", 3, H + "?a=1&page=3"),
        (H, "%70%61%67%65=2", 1, H),
        (H, "page+=2&a=1", 1, H + "?page+=2&a=1"),
        (H, "page%20=2", 1, H + "?page%20=2"),
        (H, "page&a=1", 2, H + "?a=1&page=2"),
        (H, "page=&a=1", 1, H + "?a=1"),
        (H, "debug", 1, H + "?debug"),
        (H, "debug&page=2", 3, H + "?debug&page=3"),
        (H, "a=&b=2", 1, H + "?a=&b=2"),
        (H, "q=a%20b&x=%C3%A9", 1, H + "?q=a%20b&x=%C3%A9"),
        (H, "q=a+b&x=%c3%a9&y=%2F", 2, H + "?q=a+b&x=%c3%a9&y=%2F&page=2"),
        (H, "q=a=b", 1, H + "?q=a=b"),
        (H, "a=1&&b=2&", 1, H + "?a=1&b=2"),
        (H, "&&&", 1, H),
        (H, "&&page=2&&", 2, H + "?page=2"),
        (H, "b=2&a=1&b=1", 1, H + "?b=2&a=1&b=1"),
    ],
)
def test_page_url(base_url: str, query_string: str, page: int, expected: str) -> None:
    assert page_url(base_url, query_string, page) == expected


@pytest.mark.parametrize("page", [0, -1])
def test_page_url_rejects_non_pages(page: int) -> None:
    with pytest.raises(InvalidPage):
        page_url(H, "", page)


# --- build_p8n -------------------------------------------------------------------------------

P8N_KEYS = ["previous_url", "next_url", "page_links", "num_pages"]
LINK_KEYS = ["url", "number", "is_active", "is_break"]
BREAK = {"url": None, "number": None, "is_active": False, "is_break": True}


def link(url: str, number: int, is_active: bool = False) -> dict[str, object]:
    return {"url": url, "number": number, "is_active": is_active, "is_break": False}


Q = "content_type=users.user&object_id=17"

P8N_CASES = [
    (
        "",
        1,
        1,
        {
            "previous_url": None,
            "next_url": None,
            "page_links": [link(H, 1, True)],
            "num_pages": 1,
        },
    ),
    (
        "page=1&format=json",
        1,
        3,
        {
            "previous_url": None,
            "next_url": H + "?format=json&page=2",
            "page_links": [
                link(H + "?format=json", 1, True),
                link(H + "?format=json&page=2", 2),
                link(H + "?format=json&page=3", 3),
            ],
            "num_pages": 3,
        },
    ),
    (
        "page=2&" + Q,
        2,
        3,
        {
            "previous_url": H + "?" + Q,
            "next_url": H + "?" + Q + "&page=3",
            "page_links": [
                link(H + "?" + Q, 1),
                link(H + "?" + Q + "&page=2", 2, True),
                link(H + "?" + Q + "&page=3", 3),
            ],
            "num_pages": 3,
        },
    ),
    (
        Q + "&page=5",
        5,
        10,
        {
            "previous_url": H + "?" + Q + "&page=4",
            "next_url": H + "?" + Q + "&page=6",
            "page_links": [
                link(H + "?" + Q, 1),
                BREAK,
                link(H + "?" + Q + "&page=4", 4),
                link(H + "?" + Q + "&page=5", 5, True),
                link(H + "?" + Q + "&page=6", 6),
                BREAK,
                link(H + "?" + Q + "&page=10", 10),
            ],
            "num_pages": 10,
        },
    ),
    (
        "page=last",
        10,
        10,
        {
            "previous_url": H + "?page=9",
            "next_url": None,
            "page_links": [
                link(H, 1),
                BREAK,
                link(H + "?page=8", 8),
                link(H + "?page=9", 9),
                link(H + "?page=10", 10, True),
            ],
            "num_pages": 10,
        },
    ),
]


@pytest.mark.parametrize(("query_string", "page", "pages", "expected"), P8N_CASES)
def test_build_p8n(query_string: str, page: int, pages: int, expected: dict[str, object]) -> None:
    p8n = build_p8n(H, query_string, page, pages)
    assert p8n == expected
    assert list(p8n.keys()) == P8N_KEYS
    for page_link in p8n["page_links"]:
        assert list(page_link.keys()) == LINK_KEYS


@pytest.mark.parametrize(("page", "pages"), [(0, 3), (4, 3)])
def test_build_p8n_rejects_pages_outside_the_list(page: int, pages: int) -> None:
    with pytest.raises(InvalidPage):
        build_p8n(H, "", page, pages)
