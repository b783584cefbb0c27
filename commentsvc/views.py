"""The HTTP resource /api/comments/: each method reads like the sentence that describes it."""

from __future__ import annotations

from dataclasses import dataclass

import orjson
from flask import Request, Response, request
from flask.views import MethodView
from sqlalchemy.engine import Connection

from . import caching, pagination, request_args, settings, store
from .db import get_engine, read_snapshot
from .errors import NotAuthenticated, NotFound
from .lists import CommentList
from .responses import api_response, encoded_response
from .schemas import Display, dump_comments
from .state_reader import reader_for

DESCRIPTION = (
    "Comments attached to site objects (user profiles, comic pages), newest first, "
    "in numbered pages. Filter with content_type and object_id."
)


def display_options() -> Display:
    """How comments are shown to this request (time zone, default avatar, viewer)."""
    options = settings.current()
    return Display(tz=options["TZINFO"], default_avatar=options["DEFAULT_AVATAR"])


@dataclass(frozen=True, slots=True)
class PageAnswer:
    """What a list state fixes about one page request before any comment is read."""

    state: store.ListState
    page: int
    num_pages: int
    query: str
    tag: str
    headers: dict[str, str]


def page_answer(req: Request, state: store.ListState, page_size: int,
                options: dict) -> PageAnswer:
    """The page asked for, the page count and the ETag, for a list in ``state``.

    An invalid page is 404, as today.
    """
    query = request_args.raw_query(req)
    num_pages = pagination.num_pages(state.count, page_size)
    try:
        page = pagination.parse_page(request_args.last(req, "page"), num_pages)
    except pagination.InvalidPage as exc:
        raise NotFound("Invalid page.") from exc
    tag = caching.list_etag(state, caching.request_url(req), query, options["DISPLAY_DIGEST"])
    headers = {"ETag": tag, "Cache-Control": options["CACHE_CONTROL"]}
    return PageAnswer(state, page, num_pages, query, tag, headers)


def known_response(req: Request, answer: PageAnswer, options: dict) -> Response | None:
    """304 if the client holds this page, its cached body if this worker has it, else None."""
    if caching.matches(req, answer.tag):
        return api_response(None, 304, answer.headers)
    cache = options["RESPONSE_CACHE"]
    body = cache.get(answer.tag) if cache is not None else None
    return encoded_response(body, headers=answer.headers) if body is not None else None


def built_response(req: Request, conn: Connection, comments: CommentList,
                   answer: PageAnswer, page_size: int, options: dict) -> Response:
    """The page read and rendered from ``conn``, whose snapshot ``answer`` was read in."""
    entries = store.page(conn, comments,
                         *pagination.position_range(answer.page, page_size, answer.state.count),
                         reply_cap=options["MAX_EMBEDDED_REPLIES"])
    body = orjson.dumps({
        "results": dump_comments(entries, display_options()),
        "p8n": pagination.build_p8n(req.base_url, answer.query, answer.page,
                                    answer.num_pages),
    })
    if options["RESPONSE_CACHE"] is not None:
        options["RESPONSE_CACHE"].put(answer.tag, body)
    return encoded_response(body, headers=answer.headers)


class CommentListView(MethodView):
    """GET lists comments; POST will add one; OPTIONS describes the endpoint."""

    def get(self):
        """List comments newest first (ties by id), one page, with the p8n navigation.

        A 304 or a cached page needs one read, the list's counter row (skipped when there
        is neither a cache nor a tag to compare); only a page to build opens a snapshot in
        which the count, the slice and the replies are read together.
        """
        req = request._get_current_object()  # read often: skip the proxy's lookup each time
        options = settings.current()
        comments, page_size = request_args.list_filters(
            req, options["QUERY_SCHEMA"], options["PAGE_SIZE"], options["MAX_PAGE_SIZE"])
        request_args.response_format(req)
        engine = get_engine()
        if options["RESPONSE_CACHE"] is not None or req.if_none_match:
            answer = page_answer(req, reader_for(engine).read(comments.key), page_size, options)
            response = known_response(req, answer, options)
            if response is not None:
                return response

        def build(conn: Connection) -> Response:
            answer = page_answer(req, store.state(conn, comments), page_size, options)
            return known_response(req, answer, options) or built_response(
                req, conn, comments, answer, page_size, options)

        return read_snapshot(engine, build)

    def post(self):
        """Adding comments needs a signed-in user; no credentials means 401."""
        raise NotAuthenticated(headers={"WWW-Authenticate": 'Token realm="api"'})

    def options(self):
        """Describe the endpoint: its name, purpose, and what it renders and parses."""
        return api_response({
            "name": "Comment List",
            "description": DESCRIPTION,
            "renders": ["application/json"],
            "parses": ["application/json", "application/x-www-form-urlencoded",
                       "multipart/form-data"],
        })


