"""Conditional requests: a strong ETag per list response, and the one step that answers
a list request with a 304, a cached body, or a body built for it.

The tag is a digest of what the response is made of: the list's version (bumped by every
write that changes the list) and size, the URL asked for (which fixes the filter, page,
page size and the page URLs), and the display settings. So it is known from one counter
row, before any comment is read, and it changes whenever the response would.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from hashlib import blake2b

from flask import Request, Response
from werkzeug.http import parse_etags

from commentsvc.rules.comment_lists import CommentList
from commentsvc.settings import Settings
from commentsvc.storage.page_cache import PageCache, RecentlyCached
from commentsvc.storage.store import ListState
from commentsvc.web.auth import Viewer
from commentsvc.web.negotiation import HTML

# How a representation's body becomes a response: (body, status, headers).
Respond = Callable[[bytes, int, dict[str, str]], Response]

# Set by web.fast_lane on every request it sends to Flask: the view then offers it what
# an anonymous JSON list answer is made of.
IN_LANE = "commentsvc.fast_lane.in_lane"
# Set on a request whose answer web.fast_lane may remember (a Candidate).
CANDIDATE = "commentsvc.fast_lane.candidate"
# Set (True) on a request asked for again (answered from the cache, or with a tag): the
# lane remembers this very request, not only its shape.
AGAIN = "commentsvc.fast_lane.again"
# Set by web.fast_lane on a request it read the counter for and found no cached body: the
# view builds the page at once, without reading the counter a second time.
MISSED = "commentsvc.fast_lane.missed"


@dataclass(frozen=True, slots=True)
class Candidate:
    """What an anonymous JSON list answer is made of, for web.fast_lane: what its tag is
    computed from besides the list's state, the tag, its endpoint and path (for the log
    and the metrics), and what builds another page of it (the list, its page size, the
    URL its page links start with)."""

    url: str
    query: str
    shown_as: str
    tag: str
    endpoint: str
    path: str
    comments: CommentList
    page_size: int
    base_url: str


def list_etag(state: ListState, url: str, query: str, display_digest: str) -> str:
    """A strong ETag (quoted) for one list response; ``url`` is ``request_url(request)``."""
    material = f"{state.version}\x00{state.count}\x00{url}?{query}\x00{display_digest}"
    digest = blake2b(material.encode("utf-8", "surrogatepass"), digest_size=16)
    return f'"{digest.hexdigest()}"'


def request_url(request: Request) -> str:
    """What the page URLs of a response are built from (scheme, host, mount, path), cheaply.

    ``request.base_url`` is made of exactly these parts but spends most of its time turning
    them into an IRI; for telling responses apart the parts themselves serve.
    """
    return f"{request.scheme}://{request.host}{request.root_path}\x00{request.path}"


def page_identity(url: str, query_string: bytes, viewer_id: int | None,
                  representation: str) -> str:
    """What tells one list answer apart from others whatever the list's state (the
    response cache's recently cached pages are named by it); ``url`` is
    ``request_url(request)``, ``query_string`` the query as sent."""
    return f"{url}?{query_string!r}\x00{'' if viewer_id is None else viewer_id}\x00{representation}"


def matches(request: Request, tag: str) -> bool:
    """Whether If-None-Match names this response (weak comparison, as RFC 9110 says)."""
    return names_tag(request.headers.get("If-None-Match"), tag)


def names_tag(if_none_match: str | None, tag: str) -> bool:
    """Whether an If-None-Match value names ``tag`` (quoted): weak comparison, ``*`` names
    every tag (web.fast_lane compares the header as sent)."""
    return bool(if_none_match) and parse_etags(if_none_match).contains_weak(tag.strip('"'))


@dataclass(frozen=True, slots=True)
class Tagged:
    """A list response's tag and the headers that go with it, and the JSON answer's tag
    (which the browsable page shows; the same as ``tag`` for JSON), and what the JSON tag
    was computed from besides the list's state and the query (web.fast_lane computes it
    again from a new state)."""

    tag: str
    headers: dict[str, str]
    json_tag: str
    url: str
    shown_as: str


def tagged(request: Request, state: ListState, query: str, settings: Settings,
           viewer: Viewer | None, representation: str) -> Tagged:
    """The ETag and caching headers of one list response, known before any comment is read.

    What a signed-in user sees differs (``can_delete``, ``can_reply``), so their tag names
    them and their responses are private. The HTML page and the JSON of one URL are
    different responses, so they get different tags (and never each other's cached body
    or 304).
    """
    shown_as, cache_control = settings.display_digest, settings.cache_control
    if viewer is not None:
        shown_as = f"{shown_as}\x00{viewer.id}\x00{viewer.is_staff}"
        cache_control = "private, " + cache_control
    url = request_url(request)
    json_tag = list_etag(state, url, query, shown_as)
    tag = json_tag
    if representation == HTML:
        tag = list_etag(state, url, query, f"{shown_as}\x00{settings.page_digest}\x00{viewer!r}")
    return Tagged(tag, {"ETag": tag, "Cache-Control": cache_control}, json_tag, url, shown_as)


def answer(request: Request, tagged: Tagged, cache: PageCache | None, respond: Respond,
           build: Callable[[], Response]) -> Response:
    """The one decision: 304 when the client holds this response, its cached body when
    there is one, else ``build()`` (which caches what it builds)."""
    if matches(request, tagged.tag):
        return respond(b"", 304, tagged.headers)
    body = cache.get(tagged.tag) if cache is not None else None
    if body is not None:
        return respond(body, 200, tagged.headers)
    return build()


def counter_first(request: Request, cache: PageCache | None, recent: RecentlyCached,
                  identity: str) -> bool:
    """Whether to read the list's counter row alone before building: only when that may
    spare the build (the request names a tag, the cache is shared by every node, or this
    process cached this very response lately). Otherwise a response nobody asked for
    lately would miss the cache anyway, and the build's own read brings the row along."""
    return bool(request.if_none_match) or (cache is not None and (
        cache.shared or recent.holds(identity)))


def keep(cache: PageCache | None, recent: RecentlyCached, tag: str, body: bytes,
         identity: str) -> None:
    """Cache a built response under its tag, and remember this process cached it."""
    if cache is not None:
        cache.put(tag, body)
        recent.add(identity)
