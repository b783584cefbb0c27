"""The two reads: one comment, and a list's page.

A page to build is read in one statement, which brings the list's size and version, the
page's comments and their replies (storage.counters.ListStateReader.read_page: one round
trip, a prepared statement on PostgreSQL), and rendered from each comment's stored part
(rules.rendered). When a response cache or an If-None-Match could spare that work, the
list's counter row is read first, alone, and web.conditional decides: 304, the cached
body, or the page built (under the tag of the state its own read saw).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson
from flask import Request, Response
from sqlalchemy.engine import Engine

from commentsvc.rules.rendered import results, results_json
from commentsvc.storage import store
from commentsvc.storage.engine import read_snapshot
from commentsvc.web import browsable, conditional
from commentsvc.web.exceptions import NotFound
from commentsvc.web.negotiation import JSON
from commentsvc.web.paginator import Page, list_page_read, paginated
from commentsvc.web.rendering import DESCRIPTION, display_of, json_headers, list_responder

if TYPE_CHECKING:
    from commentsvc.rules.comment_lists import CommentList
    from commentsvc.service import CommentService
    from commentsvc.settings import Settings
    from commentsvc.storage.counters import ListStateReader
    from commentsvc.web.auth import Viewer


def one_comment(service: CommentService, viewer: Viewer | None, comment_id: int) -> store.Comment:
    """The comment as a list shows it (a root with its replies), read from a replica when
    there are any; 404 if there is none."""
    cap = service.settings.max_embedded_replies
    comment = service.reads.reading(
        viewer.id if viewer else None,
        lambda engine: read_snapshot(engine, lambda conn: store.one(conn, comment_id, cap)))
    if comment is None:
        raise NotFound()
    return comment


def json_page(settings: Settings, base_url: str, query: str, number: int, num_pages: int,
              rows: list[tuple[Any, ...]], viewer: Viewer | None) -> bytes:
    """A list page's JSON answer from its one-statement read's ``rows`` (ListPage builds
    it so, and web.fast_lane too)."""
    return orjson.dumps(paginated(base_url, query, number, num_pages,
                                  results_json(rows, display_of(settings), viewer)))


def read_page(service: CommentService, comments: CommentList, number: int,
              page_size: int, primary: Callable[[], Engine]
              ) -> tuple[store.ListState, list[tuple[Any, ...]]]:
    """Page ``number`` of an anonymous list read in one statement, from a replica when
    there are any (web.fast_lane; ``primary`` gives the primary's engine): the list's
    state and the page's rows."""
    read = list_page_read(comments, number, page_size, service.settings)
    return service.reads.reading(
        None, lambda engine: service.counter_readers.for_engine(engine).read_page(read),
        primary)


class ListPage:
    """One list request: which list, its page size, who asks, and in which representation."""

    def __init__(self, service: CommentService, req: Request, comments: CommentList,
                 page_size: int, viewer: Viewer | None, representation: str):
        self.service, self.req, self.comments = service, req, comments
        self.page_size, self.viewer, self.representation = page_size, viewer, representation
        self.paginator = service.paginator
        self.respond = list_responder(representation)
        self.again = False  # whether this request was asked for again (web.fast_lane)

    def response(self, engine: Engine) -> Response:
        """The page read from ``engine`` (the primary's or a replica's).

        The counter row is read first, alone, only when that may spare the page read: the
        request names a tag, the cache is shared by every node (Redis), or this process
        cached this very page lately (a page no one asked for lately, deep in a long list,
        would miss the cache anyway, and the page read brings the counter row with it).
        """
        reader = self.service.counter_readers.for_engine(engine)
        # web.fast_lane remembers the requests asked for again (those it remembers, their
        # cached body missing, and those this process cached lately), not only their shape.
        self.again = conditional.MISSED in self.req.environ
        if self.again or not conditional.counter_first(
                self.req, self.service.page_cache, self.service.cached_pages,
                self._identity()):
            return self._built(reader, engine, None)
        self.again = True
        tagged = self._tagged(reader.read(self.comments.key))[1]
        return conditional.answer(self.req, tagged, self.service.page_cache, self.respond,
                                  lambda: self._built(reader, engine, tagged))

    def _tagged(self, state: store.ListState) -> tuple[Page, conditional.Tagged]:
        """The page asked for of the list in ``state`` (404 if it has none) and its tag."""
        page = self.paginator.paginate(self.req, self.comments, state, self.page_size)
        tagged = conditional.tagged(self.req, state, page.query, self.service.settings,
                                    self.viewer, self.representation)
        if self.viewer is None and self.representation == JSON \
                and conditional.IN_LANE in self.req.environ:
            self._offer_fast_lane(page, tagged)
        return page, tagged

    def _offer_fast_lane(self, page: Page, tagged: conditional.Tagged) -> None:
        """Tell web.fast_lane what this anonymous JSON answer is made of, should it be
        the one sent (the last offer of a request is the answer's)."""
        req = self.req
        rule = req.url_rule
        req.environ[conditional.CANDIDATE] = conditional.Candidate(
            tagged.url, page.query, tagged.shown_as, tagged.tag,
            rule.endpoint if rule is not None else "", req.path, self.comments,
            self.page_size, page.base_url)
        req.environ[conditional.AGAIN] = self.again

    def _built(self, reader: ListStateReader, engine: Engine,
               tagged: conditional.Tagged | None) -> Response:
        """The page read in one statement, rendered, then cached under its tag.

        The read brings the list's state with it; when a write came in since ``tagged``
        was made, the page is the one this state gives, under its own tag.
        """
        settings = self.service.settings
        state, rows = reader.read_page(self.paginator.page_read(
            self.req, self.comments, self.page_size, settings))
        page, tagged = self._tagged(state)
        if self.representation == JSON:
            body = json_page(settings, page.base_url, page.query,
                             page.number, page.num_pages, rows, self.viewer)
        else:
            entries = results(rows, display_of(settings), self.viewer)
            body = self._page_html(engine, page, self.paginator.get_paginated_response(
                self.req, page, entries), entries, tagged)
        conditional.keep(self.service.page_cache, self.service.cached_pages, tagged.tag, body,
                         self._identity())
        return self.respond(body, 200, tagged.headers)

    def _identity(self) -> str:
        """What tells this page apart from others, whatever the list's state."""
        viewer = self.viewer
        return conditional.page_identity(conditional.request_url(self.req),
                                         self.req.query_string,
                                         viewer.id if viewer else None, self.representation)

    def _page_html(self, engine: Engine, page: Page, data: dict[str, object],
                   entries: list[dict[str, Any]], tagged: conditional.Tagged) -> bytes:
        """The browsable page of ``data``, with what the viewer may do to each comment."""
        targets = None
        if self.viewer is not None:
            shown_ids = [c["id"] for c in entries] + [
                r["id"] for c in entries for r in c["replies"] or []]
            targets = read_snapshot(engine, lambda conn: store.targets(conn, shown_ids))
        return browsable.list_page(
            self.req, data, page=page.number, listed=self.comments, viewer=self.viewer,
            content_types=self.service.settings.content_types,
            new_comment_schema=self.service.new_comment_schema,
            max_body_length=self.service.settings.max_body_length,
            json_headers=json_headers({"ETag": tagged.json_tag,
                                       "Cache-Control": tagged.headers["Cache-Control"]}),
            name="Comment List", summary=DESCRIPTION, targets=targets)

