"""The two reads: one comment, and a list's page.

GET on a list reads the list's counter row once, then makes one decision (304, a cached
body, or a page built and cached) in web.conditional.

A 304 or a cached page needs that one read only, made without a transaction
(storage.counters). A page to build is read in a snapshot: when neither a cache nor an
If-None-Match could spare the work, the counter row is read in that snapshot itself;
otherwise the page's rows carry the list's version, and a snapshot that sees another
version (a write came in between) answers from its own state instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import orjson
from flask import Request, Response
from sqlalchemy.engine import Connection, Engine

from commentsvc.storage import store
from commentsvc.storage.engine import read_snapshot
from commentsvc.web import browsable, conditional
from commentsvc.web.exceptions import NotFound
from commentsvc.web.negotiation import JSON
from commentsvc.web.paginator import Page
from commentsvc.web.rendering import DESCRIPTION, json_headers, list_responder, results

if TYPE_CHECKING:
    from commentsvc.rules.comment_lists import CommentList
    from commentsvc.service import CommentService
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


class ListPage:
    """One list request: which list, its page size, who asks, and in which representation."""

    def __init__(self, service: CommentService, req: Request, comments: CommentList,
                 page_size: int, viewer: Viewer | None, representation: str):
        self.service, self.req, self.comments = service, req, comments
        self.page_size, self.viewer, self.representation = page_size, viewer, representation
        self.paginator = service.paginator
        self.respond = list_responder(representation)

    def response(self, engine: Engine) -> Response:
        """The page read from ``engine`` (the primary's or a replica's)."""
        if self.service.page_cache is None and not self.req.if_none_match:
            return read_snapshot(engine, lambda conn: self._answer(
                store.state(conn, self.comments), conn, engine))
        reader = self.service.counter_readers.for_engine(engine)
        return self._answer(reader.read(self.comments.key), None, engine)

    def _answer(self, state: store.ListState, conn: Connection | None,
                engine: Engine) -> Response:
        """304, the cached body or the built page, for the list in ``state``; ``conn`` is
        the snapshot ``state`` was read in, if it was."""
        page = self.paginator.paginate(self.req, self.comments, state, self.page_size)
        tagged = conditional.tagged(self.req, state, page.query, self.service.settings,
                                    self.viewer, self.representation)
        return conditional.answer(self.req, tagged, self.service.page_cache, self.respond,
                                  lambda: self._built(page, tagged, conn, engine))

    def _built(self, page: Page, tagged: conditional.Tagged, conn: Connection | None,
               engine: Engine) -> Response:
        if conn is not None:
            return self._render(conn, page, tagged, version=None)

        def in_snapshot(snapshot: Connection) -> Response:
            try:
                return self._render(snapshot, page, tagged, version=page.state.version)
            except store.ListMoved:  # a write came in between: answer as this snapshot
                return self._answer(store.state(snapshot, self.comments), snapshot, engine)

        return read_snapshot(engine, in_snapshot)

    def _render(self, conn: Connection, page: Page, tagged: conditional.Tagged,
                version: int | None) -> Response:
        """The page read from ``conn`` and rendered, then cached under its tag."""
        settings = self.service.settings
        entries = store.page(conn, self.comments, *page.positions,
                             reply_cap=settings.max_embedded_replies, version=version)
        data = self.paginator.get_paginated_response(
            self.req, page, results(entries, settings, self.viewer))
        body = orjson.dumps(data) if self.representation == JSON else self._page_html(
            conn, page, data, entries, tagged)
        if self.service.page_cache is not None:
            self.service.page_cache.put(tagged.tag, body)
        return self.respond(body, 200, tagged.headers)

    def _page_html(self, conn: Connection, page: Page, data: dict[str, object],
                   entries: list[store.Comment], tagged: conditional.Tagged) -> bytes:
        """The browsable page of ``data``, with what the viewer may do to each comment."""
        shown_ids = [c.id for c in entries] + [r.id for c in entries for r in c.replies or []]
        return browsable.list_page(
            self.req, data, page=page.number, viewer=self.viewer,
            content_types=self.service.settings.content_types,
            new_comment_schema=self.service.new_comment_schema,
            max_body_length=self.service.settings.max_body_length,
            json_headers=json_headers({"ETag": tagged.json_tag,
                                       "Cache-Control": tagged.headers["Cache-Control"]}),
            name="Comment List", summary=DESCRIPTION,
            targets=store.targets(conn, shown_ids) if self.viewer is not None else None)
