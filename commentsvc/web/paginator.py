"""The list's paginator, in the shape of Django REST Framework's ``PageNumberPagination``:
``paginate(request, comments, state) -> Page``, then ``get_paginated_response(page,
results)`` for the body. The rules themselves (page count, ``page`` parsing, positions,
links) are pure functions in ``rules.pagination``; this adds the request."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from flask import Request

from commentsvc.rules import pagination
from commentsvc.rules.comment_lists import CommentList
from commentsvc.rules.schemas import ListQuerySchema
from commentsvc.settings import Settings
from commentsvc.storage.counters import PageRead
from commentsvc.storage.store import ListState
from commentsvc.web import request_args
from commentsvc.web.exceptions import NotFound


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a list, fixed by the list's counter row before any comment is read."""

    comments: CommentList
    state: ListState
    number: int
    num_pages: int
    size: int
    query: str  # the request's raw query string, which page links keep as sent
    base_url: str  # the URL the page links start with

    @property
    def positions(self) -> tuple[int, int]:
        """The page's inclusive range of list positions (high to low is newest first)."""
        return pagination.position_range(self.number, self.size, self.state.count)


def list_page_read(comments: CommentList, page: int, page_size: int,
                   settings: Settings) -> PageRead:
    """The one-statement read of page ``page`` (0: the last) of a list."""
    kind = "site" if comments.content_type is None else (
        "kind" if comments.object_id is None else "target")
    return PageRead(kind, comments.key, page, page_size, settings.max_embedded_replies,
                    settings.render_display, comments.content_type, comments.object_id)


class PageNumberPagination:
    """Numbered pages of ``page_size`` comments (``?page_size=`` up to ``max_page_size``)."""

    def __init__(self, query_schema: ListQuerySchema, page_size: int, max_page_size: int):
        self.query_schema = query_schema
        self.page_size = page_size
        self.max_page_size = max_page_size

    def list_of(self, request: Request) -> tuple[CommentList, int]:
        """The list a request names and its page size; 400 when the filters are bad."""
        return request_args.list_filters(request, self.query_schema, self.page_size,
                                         self.max_page_size)

    def paginate(self, request: Request, comments: CommentList, state: ListState,
                 page_size: int) -> Page:
        """The page asked for (``?page=``, ``last`` allowed) of a list in ``state``; 404
        "Invalid page." for any other."""
        num_pages = pagination.num_pages(state.count, page_size)
        try:
            number = pagination.parse_page(request_args.last(request, "page"), num_pages)
        except pagination.InvalidPage as exc:
            raise NotFound("Invalid page.") from exc
        return Page(comments, state, number, num_pages, page_size,
                    request_args.raw_query(request), request_args.base_url(request))

    @staticmethod
    def page_read(request: Request, comments: CommentList, page_size: int, settings: Settings,
                  ) -> PageRead:
        """The one-statement read of the page asked for, before the list's size is known
        (a ``page`` the list turns out not to have reads no comment; ``paginate`` then
        answers 404)."""
        return list_page_read(comments, pagination.requested_page(
            request_args.last(request, "page")), page_size, settings)

    @staticmethod
    def get_paginated_response(request: Request, page: Page,
                               results: Sequence[object]) -> dict[str, object]:
        """The list response's body: the page's ``results`` and its ``p8n`` navigation."""
        return paginated(page.base_url, page.query, page.number, page.num_pages, results)


def paginated(base_url: str, query: str, number: int, num_pages: int,
              results: Sequence[object]) -> dict[str, object]:
    """The body of page ``number`` of ``num_pages``: its ``results`` and its ``p8n``
    navigation, the page links made of ``base_url`` and the ``query`` as sent."""
    return {"results": results,
            "p8n": pagination.build_p8n(base_url, query, number, num_pages)}
