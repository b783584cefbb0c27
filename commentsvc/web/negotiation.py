"""Which representation a request gets: JSON, the browsable HTML page, or a 406.

The ``format`` parameter wins over ``Accept`` (as Django REST Framework's URL format
override does): ``format=json`` is JSON and ``format=api`` the HTML page whatever the
client accepts. Without it, ``Accept`` decides by quality, then by how exactly a range
names the type (``text/html`` over ``text/*`` over ``*/*``), and a full tie goes to JSON,
so ``*/*``, ``application/*`` and no header at all are JSON while a browser's header
(which names ``text/html`` above ``*/*``) gets the page. An ``Accept`` naming neither is
406.
Werkzeug parses the header and weighs the ranges; only their parameters are set aside.
"""

from __future__ import annotations

from flask import Request
from werkzeug.datastructures import MIMEAccept

from commentsvc.web.exceptions import NotAcceptable, NotFound
from commentsvc.web.request_args import last

JSON = "json"
HTML = "html"

FORMATS = {"json": JSON, "api": HTML}
# In order of preference: on equal quality the first one wins.
MEDIA_TYPES = {"application/json": JSON, "text/html": HTML}
RENDERS = list(MEDIA_TYPES)
# Accept headers that cannot prefer HTML, answered without parsing them.
_PLAINLY_JSON = frozenset(("", "*/*", "application/json"))


def choose(req: Request) -> str:
    """JSON or HTML for this request; 404 for an unknown ``format``, 406 for an ``Accept``
    that names neither representation."""
    fmt = last(req, "format")
    if fmt is not None:
        if fmt not in FORMATS:
            raise NotFound()
        return FORMATS[fmt]
    if req.headers.get("Accept", "") in _PLAINLY_JSON:
        return JSON
    accept = req.accept_mimetypes
    if not accept:  # a header of white space or commas names nothing: as if absent
        return JSON
    # A range's parameters (charset=utf-8, level=1) do not narrow it here: our media
    # types have none, and Django REST Framework reads them the same way.
    ranges = MIMEAccept([(value.partition(";")[0].strip(), quality) for value, quality in accept])
    best = ranges.best_match(RENDERS)
    if best is None:
        raise NotAcceptable()
    return MEDIA_TYPES[best]
