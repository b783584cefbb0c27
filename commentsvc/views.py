"""The HTTP resource /api/comments/: each method reads like the sentence that describes it."""

from __future__ import annotations

import orjson
from flask import Response, request
from flask.views import MethodView
from sqlalchemy.engine import Connection

from . import caching, pagination, request_args, settings, store
from .db import get_engine, single_statement, snapshot
from .errors import NotAuthenticated, NotFound
from .lists import CommentList
from .responses import api_response, encoded_response
from .schemas import Display, dump_comments

DESCRIPTION = (
    "Comments attached to site objects (user profiles, comic pages), newest first, "
    "in numbered pages. Filter with content_type and object_id."
)


def display_options() -> Display:
    """How comments are shown to this request (time zone, default avatar, viewer)."""
    options = settings.current()
    return Display(tz=options["TZINFO"], default_avatar=options["DEFAULT_AVATAR"])


def list_response(conn: Connection, comments: CommentList, page_size: int, options: dict,
                  build: bool) -> Response | None:
    """The answer for one page of a list: 304, the cached body, or (if ``build``) a new one.

    Without ``build``, None means the page is not cached and must be built.
    """
    query = request_args.raw_query(request)
    state = store.state(conn, comments)
    num_pages = pagination.num_pages(state.count, page_size)
    try:
        page = pagination.parse_page(request_args.last(request, "page"), num_pages)
    except pagination.InvalidPage as exc:
        raise NotFound("Invalid page.") from exc
    tag = caching.list_etag(state, request.base_url, query, options["DISPLAY_DIGEST"])
    headers = {"ETag": tag, "Cache-Control": options["CACHE_CONTROL"]}
    if caching.matches(request, tag):
        return api_response(None, 304, headers)
    cache = options["RESPONSE_CACHE"]
    body = cache.get(tag) if cache is not None else None
    if body is None and not build:
        return None
    if body is None:
        entries = store.page(conn, comments,
                             *pagination.position_range(page, page_size, state.count),
                             reply_cap=options["MAX_EMBEDDED_REPLIES"])
        body = orjson.dumps({
            "results": dump_comments(entries, display_options()),
            "p8n": pagination.build_p8n(request.base_url, query, page, num_pages),
        })
        if cache is not None:
            cache.put(tag, body)
    return encoded_response(body, headers=headers)


class CommentListView(MethodView):
    """GET lists comments; POST will add one; OPTIONS describes the endpoint."""

    def get(self):
        """List comments newest first (ties by id), one page, with the p8n navigation.

        A 304 or a cached page needs one statement; only a page to build opens a snapshot
        in which the count, the slice and the replies are read together.
        """
        options = settings.current()
        comments, page_size = request_args.list_filters(
            request, options["QUERY_SCHEMA"], options["PAGE_SIZE"], options["MAX_PAGE_SIZE"])
        request_args.response_format(request)
        engine = get_engine()
        if options["RESPONSE_CACHE"] is not None:
            with single_statement(engine) as conn:
                response = list_response(conn, comments, page_size, options, build=False)
            if response is not None:
                return response
        with snapshot(engine) as conn:
            return list_response(conn, comments, page_size, options, build=True)

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


