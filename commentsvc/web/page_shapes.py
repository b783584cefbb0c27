"""A list request's shape: its query string without its page parameter, so that web.
fast_lane, having seen Flask answer one page of a list, can build the list's other pages.

Only a plainly spelled query has a shape: parameters of letters, digits and ``_.~-``
joined by ``&`` (no percent-encoding, no ``+``, nothing Werkzeug would read otherwise),
with at most one ``page``: a page number of up to 12 digits without leading zeros, or
``last``. Its page links keep the query as sent (rules.pagination.page_url), and the
rest of the answer is the same for every page of the shape (the page asked for, its tag
and its links are made from the request's own query). Any other query (a repeated
``page``, an encoded name, a page number with leading zeros) has no shape, and Flask
answers it.
"""

from __future__ import annotations

import re

_PLAIN = re.compile(r"[A-Za-z0-9_.~-]+=[A-Za-z0-9_.~-]*(?:&[A-Za-z0-9_.~-]+=[A-Za-z0-9_.~-]*)*")
_NUMBER = re.compile(r"[1-9][0-9]{0,11}")  # longer: no list has it (requested_page)
# The page number of ``page=last`` (rules.pagination.requested_page's).
LAST = 0


def shape(query: str) -> tuple[str, int] | None:
    """The shape of a query string and the page it asks for (LAST: the last page), or
    None when it has none.

    >>> shape(""), shape("page=12&page_size=5"), shape("page_size=5&page=last")
    (('', 1), ('page_size=5', 12), ('page_size=5', 0))
    >>> shape("page=02"), shape("page=2&page=3"), shape("%70age=2"), shape("page=")
    (None, None, None, None)
    """
    if query == "":
        return "", 1
    if _PLAIN.fullmatch(query) is None:
        return None
    segments = query.split("&")
    pages = [i for i, segment in enumerate(segments) if segment.startswith("page=")]
    if not pages:
        return query, 1
    if len(pages) > 1:
        return None
    number = segments[pages[0]][len("page="):]
    if number != "last" and _NUMBER.fullmatch(number) is None:
        return None
    del segments[pages[0]]
    return "&".join(segments), LAST if number == "last" else int(number)
