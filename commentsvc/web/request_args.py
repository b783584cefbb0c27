"""Reading a list request's query string the way the current service does.

A repeated parameter counts by its last value. An empty one counts as missing, except
for the filters ``content_type`` and ``object_id``: given empty they are refused (400),
so a client that lost its id never gets the wider list.
"""

from __future__ import annotations

from functools import lru_cache
from urllib.parse import quote

from flask import Request
from marshmallow import ValidationError

from commentsvc.rules.comment_lists import CommentList
from commentsvc.rules.schemas import ListQuerySchema
from commentsvc.web.exceptions import ValidationFailed

# Bytes a page URL may repeat as sent; anything else (spaces, quotes, non-ASCII) is encoded.
_URL_SAFE = "!#$%&'()*+,/:;=?@[]~"


def last(request: Request, name: str) -> str | None:
    """The parameter's last value, or None when it is missing or empty."""
    values = request.args.getlist(name)
    return values[-1] if values and values[-1] != "" else None


def last_given(request: Request, name: str) -> str | None:
    """The parameter's last value, empty or not; None only when it is missing."""
    values = request.args.getlist(name)
    return values[-1] if values else None


def list_filters(request: Request, schema: ListQuerySchema,
                 default_size: int, max_size: int) -> tuple[CommentList, int]:
    """The list a request names and its page size; 400 with field messages if malformed.

    Any well-formed page size above ``max_size`` is served ``max_size``, whatever its length.
    """
    raw = (last_given(request, "content_type"), last_given(request, "object_id"),
           last(request, "page_size"))
    return _loaded_filters(schema, raw, default_size, max_size)


def list_named(request: Request, schema: ListQuerySchema) -> CommentList:
    """The list a request names, by its filters alone (``page`` and ``page_size`` are not
    read: the feed has neither); 400 with the list's field messages if malformed."""
    raw = (last_given(request, "content_type"), last_given(request, "object_id"), None)
    return _loaded_filters(schema, raw, 1, 1)[0]


_FILTERS = ("content_type", "object_id", "page_size")


@lru_cache(maxsize=4096)
def _loaded_filters(schema: ListQuerySchema, raw: tuple[str | None, ...],
                    default_size: int, max_size: int) -> tuple[CommentList, int]:
    """The schema's answer for one spelling of the filters, remembered: the same few
    spellings come back on nearly every request. Refusals are raised, never remembered."""
    try:
        args = schema.load({name: value for name, value in zip(_FILTERS, raw, strict=True)
                            if value is not None})
    except ValidationError as exc:
        raise ValidationFailed.of(schema, exc) from exc
    size = min(args["page_size"] or default_size, max_size)
    return CommentList(args["content_type"], args["object_id"]), size


def base_url(request: Request) -> str:
    """``request.base_url`` as a URI, remembered for the few (scheme, host, mount, path) a
    process sees: Werkzeug builds it anew for every request, as an IRI (the host decoded
    from punycode, which some valid names do not survive)."""
    return _base_url(request.scheme, request.host, request.root_path, request.path)


# What Werkzeug's get_current_url leaves unquoted in the mount point and the path.
_PATH_SAFE = "!$&'()*+,/:;=@%"


@lru_cache(maxsize=256)
def _base_url(scheme: str, host: str, root_path: str, path: str) -> str:
    """The URL as Werkzeug's ``get_current_url`` makes it, without turning it into an IRI:
    the host in lower case but otherwise as sent (an ``xn--`` name stays one, as a post's
    ``Location`` has it, whether or not it decodes), so that every page link starts with
    the address the client used."""
    return (f"{scheme}://{host.lower()}{quote(root_path.rstrip('/'), safe=_PATH_SAFE)}/"
            f"{quote(path.lstrip('/'), safe=_PATH_SAFE)}")


def raw_query(request: Request) -> str:
    """The query string as the client spelled it, made safe to repeat inside a URL."""
    return quoted(request.query_string)


def quoted(query_string: bytes) -> str:
    """A query string as sent (bytes), made safe to repeat inside a URL."""
    return quote(query_string, safe=_URL_SAFE)
