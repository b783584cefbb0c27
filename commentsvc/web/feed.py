"""A list's Atom feed: its newest ``atom.FEED_SIZE`` comments, the entries the JSON list gives
on page 1 with that ``page_size``.

They are read and rendered the JSON list's way: the same one-statement page read
(storage.counters), the same stored renders, escaping and anonymous and deleted rules
(rules.rendered), shown to nobody in particular (no viewer: a feed is the same for every
reader). Only the dates are read again, in full (a stored render shows them to the
minute, in the display zone). rules.atom writes the document.

The ETag is made as a list's is (web.conditional): from the list's version and size, the
URL, and the display settings, plus what only the feed depends on. So a 304 or a cached
feed costs the counter row's read, as a list page does.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from flask import Request, Response, url_for

from commentsvc.rules import atom
from commentsvc.rules.rendered import results
from commentsvc.storage import store
from commentsvc.storage.engine import read_snapshot
from commentsvc.web import conditional
from commentsvc.web.paginator import list_page_read
from commentsvc.web.rendering import display_of
from commentsvc.web.request_args import list_named
from commentsvc.web.responses import (
    DETAIL_ENDPOINT,
    FEED_ENDPOINT,
    LIST_ENDPOINT,
    atom_response,
)

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from commentsvc.rules.comment_lists import CommentList
    from commentsvc.service import CommentService
    from commentsvc.storage.counters import ListStateReader

# What shapes a feed besides its list, URL and display settings: a tag of its own (never
# a JSON list's or a page's), changed with the feed's size or layout.
_FEED_DIGEST = f"{atom.ATOM_TYPE}\x00{atom.FEED_SIZE}\x001"


def requested_list(req: Request, service: CommentService) -> CommentList:
    """The list a feed request names: the list's filters, with its 400s."""
    return list_named(req, service.query_schema)


def title_of(comments: CommentList) -> str:
    """The feed's title, naming its list.

    >>> from commentsvc.rules.comment_lists import CommentList
    >>> [title_of(CommentList(*f)) for f in ((), ("users.user",), ("users.user", 7))]
    ['Comments', 'Comments on users.user', 'Comments on users.user 7']
    """
    named = " ".join(str(value) for value in comments.filters.values())
    return f"Comments on {named}" if named else "Comments"


class ListFeed:
    """One feed request: which list, asked how."""

    def __init__(self, service: CommentService, req: Request, comments: CommentList):
        self.service, self.req, self.comments = service, req, comments

    def response(self, engine: Engine) -> Response:
        """The feed read from ``engine`` (the primary's or a replica's): 304, the cached
        feed, or the feed built, as a list page is (web.reads.ListPage.response)."""
        reader = self.service.counter_readers.for_engine(engine)
        cache = self.service.page_cache
        if not conditional.counter_first(self.req, cache, self.service.cached_pages,
                                         self._identity()):
            return self._built(reader, engine)
        tagged = self._tagged(reader.read(self.comments.key))
        return conditional.answer(self.req, tagged, cache, atom_response,
                                  lambda: self._built(reader, engine))

    def _tagged(self, state: store.ListState) -> conditional.Tagged:
        """The feed's tag in ``state`` and its caching headers (a list's, never private:
        no one sees another feed)."""
        settings = self.service.settings
        url = conditional.request_url(self.req)
        shown_as = f"{settings.display_digest}\x00{_FEED_DIGEST}"
        tag = conditional.list_etag(state, url, urlencode(self.comments.filters), shown_as)
        return conditional.Tagged(tag, {"ETag": tag, "Cache-Control": settings.cache_control},
                                  tag, url, shown_as)

    def _built(self, reader: ListStateReader, engine: Engine) -> Response:
        """The feed read (the page read, then the entries' dates), written, then cached
        under the tag of the state its own read saw."""
        settings = self.service.settings
        state, rows = reader.read_page(
            list_page_read(self.comments, 1, atom.FEED_SIZE, settings))
        entries = results(rows, display_of(settings), None)
        ids = [entry["id"] for entry in entries]
        dates = read_snapshot(engine, lambda conn: store.dates(conn, ids))
        body = atom.render(self._feed(entries, dates))
        tagged = self._tagged(state)
        conditional.keep(self.service.page_cache, self.service.cached_pages, tagged.tag, body,
                         self._identity())
        return atom_response(body, 200, tagged.headers)

    def _feed(self, entries: list[dict[str, Any]], dates: dict[int, datetime]) -> atom.Feed:
        """The list's entries as the feed shows them, linked under this request's host."""
        filters = self.comments.filters
        return atom.Feed(
            url=url_for(FEED_ENDPOINT, **filters, _external=True),
            title=title_of(self.comments),
            list_url=url_for(LIST_ENDPOINT, **filters, _external=True),
            entries=[atom.Entry(
                url=url_for(DETAIL_ENDPOINT, comment_id=entry["id"], _external=True),
                author=entry["author"], html=entry["body"],
                date=dates[entry["id"]].replace(tzinfo=UTC),
                is_reply=entry["replies"] is None) for entry in entries])

    def _identity(self) -> str:
        """What tells this feed apart from other responses, whatever the list's state."""
        return (f"{conditional.request_url(self.req)}?{urlencode(self.comments.filters)}"
                "\x00feed")
