"""Page arithmetic and page links kept free of Flask so every rule can be tested alone."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote_plus

__all__ = [
    "InvalidPage",
    "build_p8n",
    "num_pages",
    "page_numbers_to_show",
    "page_url",
    "parse_page",
    "position_range",
    "requested_page",
]

_ASCII_DIGITS = re.compile(r"[0-9]+")


class InvalidPage(Exception):
    """Raised for a page that cannot be served, so the caller can answer with one error."""


def num_pages(count: int, page_size: int) -> int:
    """Count pages with integer arithmetic, so an empty list still has its one empty page.

    >>> num_pages(25, 10)
    3
    >>> num_pages(20, 10)
    2
    >>> num_pages(0, 10)
    1
    """
    if page_size < 1:
        raise ValueError(f"page_size must be at least 1, got {page_size}")
    if count < 0:
        raise ValueError(f"count must not be negative, got {count}")
    return max(1, -(-count // page_size))


def parse_page(raw: str | None, num_pages: int) -> int:
    """Turn the raw ``page`` parameter into a page number, refusing anything not plainly one.

    Missing or empty means the first page, ``last`` the final one, and otherwise only
    ASCII digits (leading zeros allowed) naming a page from 1 to ``num_pages``.
    The length is compared before converting, so a huge digit string costs nothing.

    >>> parse_page(None, 3), parse_page("", 3), parse_page("last", 3), parse_page("007", 9)
    (1, 1, 3, 7)
    >>> parse_page("4", 3)
    Traceback (most recent call last):
    ...
    commentsvc.rules.pagination.InvalidPage: page '4' is not a page from 1 to 3
    """
    if num_pages < 1:
        raise ValueError(f"num_pages must be at least 1, got {num_pages}")
    if raw is None or raw == "":
        return 1
    if raw == "last":
        return num_pages
    if _ASCII_DIGITS.fullmatch(raw) is None:
        raise InvalidPage(f"page {raw!r} is not a page number")
    digits = raw.lstrip("0")  # "000" leaves "", which is page 0
    if digits and len(digits) <= len(str(num_pages)) and int(digits) <= num_pages:
        return int(digits)
    shown = raw if len(raw) <= 20 else raw[:20] + "..."
    raise InvalidPage(f"page {shown!r} is not a page from 1 to {num_pages}")


# A page number no list reaches, for the page read of a ``page`` that names none: it then
# reads no comment, and the paginator answers 404 from the list's size.
BEYOND_ANY_LIST = 2**40


def requested_page(raw: str | None) -> int:
    """The page a one-statement page read asks for, before the list's size is known: the
    number, 0 for ``last``; ``parse_page`` then decides whether the list has that page.

    >>> requested_page(None), requested_page("last"), requested_page("007")
    (1, 0, 7)
    >>> requested_page("x") == requested_page("9" * 30) == BEYOND_ANY_LIST
    True
    """
    if raw is None or raw == "":
        return 1
    if raw == "last":
        return 0
    if _ASCII_DIGITS.fullmatch(raw) is None:
        return BEYOND_ANY_LIST
    digits = raw.lstrip("0")
    if len(digits) > 12:
        return BEYOND_ANY_LIST
    return min(int(digits or "0"), BEYOND_ANY_LIST) or BEYOND_ANY_LIST


def position_range(page: int, page_size: int, count: int) -> tuple[int, int]:
    """Give the inclusive positions of a page, since positions count from the oldest.

    Page ``p`` of size ``s`` holds positions ``N - (p-1)*s`` down to ``max(1, N - p*s + 1)``;
    an empty list gives the empty range ``(1, 0)``.

    >>> [position_range(p, 10, 25) for p in (1, 2, 3)]
    [(16, 25), (6, 15), (1, 5)]
    >>> position_range(1, 10, 0)
    (1, 0)
    """
    last = num_pages(count, page_size)
    if not 1 <= page <= last:
        raise InvalidPage(f"page {page} is not a page from 1 to {last}")
    hi = count - (page - 1) * page_size
    lo = max(1, count - page * page_size + 1)
    return lo, hi


def page_numbers_to_show(current: int, final: int) -> list[int | None]:
    """Pick the page numbers to link, as Django REST Framework does; ``None`` is a break.

    All pages when there are five or fewer; otherwise the first, the last, the current
    and its neighbours, pages 2 and 3 near the start, the last three near the end, and a
    break wherever pages are left out.

    >>> page_numbers_to_show(14, 16)
    [1, None, 13, 14, 15, 16]
    >>> page_numbers_to_show(1, 10)
    [1, 2, 3, None, 10]
    >>> page_numbers_to_show(5, 10)
    [1, None, 4, 5, 6, None, 10]
    >>> page_numbers_to_show(4, 7)
    [1, 2, 3, 4, 5, 6, 7]
    """
    if final < 1:
        raise ValueError(f"final must be at least 1, got {final}")
    if not 1 <= current <= final:
        raise InvalidPage(f"page {current} is not a page from 1 to {final}")
    if final <= 5:
        return list(range(1, final + 1))
    included = {1, current - 1, current, current + 1, final}
    if current <= 4:
        included.update((2, 3))
    if current >= final - 3:
        included.update((final - 1, final - 2))
    shown: list[int | None] = [n for n in sorted(included) if 1 <= n <= final]
    if current > 4:
        shown.insert(1, None)
    if current < final - 3:
        shown.insert(len(shown) - 1, None)
    return shown


def page_url(base_url: str, query_string: str, page: int) -> str:
    """Link another page, keeping the request's other parameters exactly as the client sent them.

    Parameters keep their order and raw spelling; empty segments and every parameter
    named ``page`` (after percent-decoding) are dropped; ``page=<n>`` goes last unless
    ``n`` is 1.

    >>> page_url("http://h/api/comments/", "", 1)
    'http://h/api/comments/'
    >>> page_url("http://h/api/comments/", "", 3)
    'http://h/api/comments/?page=3'
    >>> page_url("http://h/api/comments/", "page=2&content_type=users.user&object_id=17", 3)
    'http://h/api/comments/?content_type=users.user&object_id=17&page=3'
    >>> page_url("http://h/c/", "%70age=2&q=a%20b&&debug", 1)
    'http://h/c/?q=a%20b&debug'
    """
    return page_linker(base_url, query_string)(page)


def page_linker(base_url: str, query_string: str) -> Callable[[int], str]:
    """``page_url`` for one request's base URL and query, its query taken apart once for
    all the links of a pager."""
    kept = "&".join(
        segment
        for segment in query_string.split("&")
        if segment and unquote_plus(segment.partition("=")[0]) != "page"
    )
    first = f"{base_url}?{kept}" if kept else base_url
    others = f"{base_url}?{kept}&page=" if kept else f"{base_url}?page="

    def link(page: int) -> str:
        if page < 1:
            raise InvalidPage(f"page {page} is not a page number")
        return first if page == 1 else f"{others}{page}"
    return link


def build_p8n(base_url: str, query_string: str, page: int, num_pages: int) -> dict[str, Any]:
    """Describe the pager for a response, so clients need no page arithmetic of their own.

    >>> p8n = build_p8n("http://h/c/", "", 1, 2)
    >>> list(p8n)
    ['previous_url', 'next_url', 'page_links', 'num_pages']
    >>> p8n["previous_url"], p8n["next_url"], p8n["num_pages"]
    (None, 'http://h/c/?page=2', 2)
    >>> p8n["page_links"][0]
    {'url': 'http://h/c/', 'number': 1, 'is_active': True, 'is_break': False}
    """
    numbers = page_numbers_to_show(page, num_pages)
    link = page_linker(base_url, query_string)
    page_links: list[dict[str, Any]] = []
    for number in numbers:
        if number is None:
            page_links.append({"url": None, "number": None, "is_active": False, "is_break": True})
        else:
            page_links.append(
                {
                    "url": link(number),
                    "number": number,
                    "is_active": number == page,
                    "is_break": False,
                }
            )
    return {
        "previous_url": link(page - 1) if page > 1 else None,
        "next_url": link(page + 1) if page < num_pages else None,
        "page_links": page_links,
        "num_pages": num_pages,
    }
