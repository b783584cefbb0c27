"""The HTTP resources /api/comments/ and /api/comments/<id>/: each method reads like the
sentence that describes it."""

from __future__ import annotations

from dataclasses import dataclass

import orjson
from flask import Request, Response, current_app, request, url_for
from flask.views import MethodView
from marshmallow import Schema, ValidationError
from sqlalchemy.engine import Connection, Engine

from commentsvc import settings
from commentsvc.rules import pagination, permissions
from commentsvc.rules.comment_lists import CommentList
from commentsvc.rules.schemas import Display, dump_comments
from commentsvc.storage import posting, replicas, store
from commentsvc.storage.counters import reader_for
from commentsvc.storage.engine import get_engine, read_snapshot, writing
from commentsvc.web import (
    auth,
    browsable,
    browser_session,
    conditional,
    idempotency,
    negotiation,
    options_description,
    request_args,
    request_body,
)
from commentsvc.web.errors import NotAuthenticated, NotFound, PermissionDenied, ValidationFailed
from commentsvc.web.negotiation import HTML, JSON
from commentsvc.web.responses import (
    ALLOW,
    DETAIL_ALLOW,
    DETAIL_ENDPOINT,
    api_response,
    encoded_response,
    html_response,
)

DETAIL_DESCRIPTION = (
    "One comment: GET shows it as lists do; PATCH {\"is_read\": true|false} marks it read "
    "or unread (the owner of the commented object); DELETE removes its text and keeps its "
    "place (its author or staff)."
)
DESCRIPTION = (
    "Comments attached to site objects (user profiles, comic pages), newest first, "
    "in numbered pages. Filter with content_type and object_id."
)


def page_response(body: bytes, status: int = 200, headers: dict[str, str] | None = None,
                  allow: str = ALLOW) -> Response:
    """A list page, its post form given a fresh idempotency key (browsable.with_form_key)."""
    return html_response(browsable.with_form_key(body), status, headers, allow)


# How each representation's body becomes a response: (body, status, headers, allow).
RESPONDERS = {JSON: encoded_response, HTML: page_response}


def display_options(viewer: auth.Viewer | None = None) -> Display:
    """How comments are shown to this request (time zone, default avatar, viewer)."""
    options = settings.current()
    return Display(tz=options["TZINFO"], default_avatar=options["DEFAULT_AVATAR"],
                   viewer=viewer)


def viewer_of(req: Request, options: dict) -> auth.Viewer | None:
    """The signed-in user, if any: by token, by the standalone sign-in cookie, or by the
    host site's function when mounted.

    A request with neither credentials nor a host function costs nothing here.
    """
    loader = options["CURRENT_USER"]
    cookie = (browser_session.signed_cookie(req, current_app) if options["BROWSER_SIGN_IN"]
              else None)
    if loader is None and cookie is None and "Authorization" not in req.headers:
        return None
    return auth.current_viewer(req, get_engine(), loader, cookie)


def signed_in(req: Request, options: dict) -> auth.Viewer:
    """The signed-in user; 401 with a WWW-Authenticate challenge when there is none."""
    viewer = viewer_of(req, options)
    if viewer is None:
        raise NotAuthenticated(headers={"WWW-Authenticate": auth.CHALLENGE})
    return viewer


def loaded(schema: Schema, fields: dict) -> dict:
    """A schema's load of the request's fields; 400 with field messages when it refuses."""
    try:
        return schema.load(fields)
    except ValidationError as exc:
        raise ValidationFailed(exc.messages) from exc


@dataclass(frozen=True, slots=True)
class PageAnswer:
    """What a list state fixes about one page request before any comment is read."""

    state: store.ListState
    page: int
    num_pages: int
    query: str
    tag: str
    headers: dict[str, str]
    viewer: auth.Viewer | None
    representation: str = JSON
    json_tag: str = ""  # the JSON answer's tag, which the browsable page shows


def page_answer(req: Request, state: store.ListState, page_size: int,
                options: dict, viewer: auth.Viewer | None,
                representation: str = JSON) -> PageAnswer:
    """The page asked for, the page count and the ETag, for a list in ``state``.

    An invalid page is 404, as today. What a signed-in user sees differs (``can_delete``,
    ``can_reply``), so their tag names them and their responses are private. The HTML page
    and the JSON of one URL are different responses, so they get different tags (and never
    each other's cached body or 304).
    """
    query = request_args.raw_query(req)
    num_pages = pagination.num_pages(state.count, page_size)
    try:
        page = pagination.parse_page(request_args.last(req, "page"), num_pages)
    except pagination.InvalidPage as exc:
        raise NotFound("Invalid page.") from exc
    shown_as = options["DISPLAY_DIGEST"]
    cache_control = options["CACHE_CONTROL"]
    if viewer is not None:
        shown_as = f"{shown_as}\x00{viewer.id}\x00{viewer.is_staff}"
        cache_control = "private, " + cache_control
    url = conditional.request_url(req)
    tag = conditional.list_etag(state, url, query, shown_as)
    if representation == HTML:
        page_tag = conditional.list_etag(
            state, url, query, f"{shown_as}\x00{options['PAGE_DIGEST']}\x00{viewer!r}")
        return PageAnswer(state, page, num_pages, query, page_tag,
                          {"ETag": page_tag, "Cache-Control": cache_control}, viewer,
                          HTML, tag)
    headers = {"ETag": tag, "Cache-Control": cache_control}
    return PageAnswer(state, page, num_pages, query, tag, headers, viewer)


def known_response(req: Request, answer: PageAnswer, options: dict) -> Response | None:
    """304 if the client holds this page, its cached body if this worker has it, else None."""
    respond = RESPONDERS[answer.representation]
    if conditional.matches(req, answer.tag):
        return respond(b"", 304, answer.headers)
    cache = options["RESPONSE_CACHE"]
    body = cache.get(answer.tag) if cache is not None else None
    return respond(body, headers=answer.headers) if body is not None else None


def built_response(req: Request, conn: Connection, comments: CommentList,
                   answer: PageAnswer, page_size: int, options: dict) -> Response:
    """The page read and rendered from ``conn``, whose snapshot ``answer`` was read in."""
    entries = store.page(conn, comments,
                         *pagination.position_range(answer.page, page_size, answer.state.count),
                         reply_cap=options["MAX_EMBEDDED_REPLIES"])
    data = {
        "results": dump_comments(entries, display_options(answer.viewer)),
        "p8n": pagination.build_p8n(req.base_url, answer.query, answer.page,
                                    answer.num_pages),
    }
    if answer.representation == JSON:
        body = orjson.dumps(data)
    else:
        shown_ids = [c.id for c in entries] + [r.id for c in entries for r in c.replies or []]
        body = browsable.list_page(
            req, data, page=answer.page, viewer=answer.viewer, options=options,
            json_headers=json_headers({"ETag": answer.json_tag,
                                       "Cache-Control": answer.headers["Cache-Control"]}),
            name="Comment List", summary=DESCRIPTION,
            targets=store.targets(conn, shown_ids) if answer.viewer is not None else None)
    if options["RESPONSE_CACHE"] is not None:
        options["RESPONSE_CACHE"].put(answer.tag, body)
    return RESPONDERS[answer.representation](body, headers=answer.headers)


def list_response(req: Request, engine: Engine, comments: CommentList, page_size: int,
                  options: dict, viewer: auth.Viewer | None, representation: str) -> Response:
    """A list page read from ``engine`` (the primary's or a replica's).

    A 304 or a cached page needs one read, the list's counter row (skipped when there is
    neither a cache nor a tag to compare); only a page to build opens a snapshot in which
    the count, the slice and the replies are read together.
    """
    if options["RESPONSE_CACHE"] is not None or req.if_none_match:
        answer = page_answer(req, reader_for(engine).read(comments.key), page_size,
                             options, viewer, representation)
        response = known_response(req, answer, options)
        if response is not None:
            return response

    def build(conn: Connection) -> Response:
        answer = page_answer(req, store.state(conn, comments), page_size, options, viewer,
                             representation)
        return known_response(req, answer, options) or built_response(
            req, conn, comments, answer, page_size, options)

    return read_snapshot(engine, build)


def json_headers(extra: dict[str, str] | None = None, allow: str = ALLOW) -> dict[str, str]:
    """The headers the JSON answer carries, as the browsable page lists them."""
    return {"Allow": allow, "Content-Type": "application/json", "Vary": "Accept",
            **(extra or {})}


class CommentListView(MethodView):
    """GET lists comments; POST adds one; OPTIONS describes the endpoint."""

    def get(self) -> Response:
        """List comments newest first (ties by id), one page, with the p8n navigation:
        from a replica when there are any (see replicas.reading), else from the primary."""
        req = request._get_current_object()  # read often: skip the proxy's lookup each time
        options = settings.current()
        comments, page_size = request_args.list_filters(
            req, options["QUERY_SCHEMA"], options["PAGE_SIZE"], options["MAX_PAGE_SIZE"])
        representation = negotiation.choose(req)
        viewer = viewer_of(req, options)
        if options["REPLICAS"] is None:  # one database: nothing to choose
            return list_response(req, get_engine(), comments, page_size, options, viewer,
                                 representation)
        return replicas.reading(
            options, viewer.id if viewer else None,
            lambda engine: list_response(req, engine, comments, page_size, options, viewer,
                                         representation))

    def post(self) -> Response:
        """Add a comment (or a reply) as the signed-in user: 201 with it as lists show it.

        Fields are checked first, then the target and parent inside the writers' lock,
        then the user's posting limit; any refusal writes nothing. How the answer is
        rendered is settled before anything is written (an unsatisfiable Accept is 406).
        With an Idempotency-Key, a retry gets the first answer instead (idempotency).
        """
        req = request._get_current_object()
        options = settings.current()
        representation = negotiation.choose(req)
        viewer = signed_in(req, options)
        raw = browser_session.checked_fields(
            req, viewer, request_body.read_fields(req, options["MAX_REQUEST_BYTES"]))
        key = idempotency.key_of(req, raw)
        fields = loaded(options["NEW_COMMENT_SCHEMA"], raw)
        write = idempotency.keyed(req, key, viewer.id, fields)
        with writing(get_engine()) as conn:
            replay = idempotency.find(conn, write, options["IDEMPOTENCY_RETENTION_HOURS"])
            if replay is None:
                auth.ensure_user(conn, viewer)
                posting.check(conn, fields)
                options["POST_LIMITER"].take(viewer.id)
                comment = store.one(conn, posting.write(conn, viewer.id, fields),
                                    options["MAX_EMBEDDED_REPLIES"])
                location = url_for(DETAIL_ENDPOINT, comment_id=comment.id, _external=True)
                payload = shown(comment, viewer)
                idempotency.remember(conn, write, 201, payload, location, comment.id)
        replicas.wrote(options, viewer.id)
        if replay is not None:
            payload, location = replay.payload(), replay.location
        headers = replay.headers() if replay else {"Location": location}
        if representation == HTML:
            response = html_response(browsable.comment_page(
                req, payload, method="POST", status=201, viewer=viewer,
                json_headers=json_headers(headers),
                name="Comment posted", summary=DETAIL_DESCRIPTION), 201, headers)
        elif replay is not None:
            response = encoded_response(replay.body, 201, headers)
        else:
            response = api_response(payload, 201, headers)
        return after_keyed_write(response, write, replay, options)

    def options(self) -> Response:
        """Describe the endpoint: its name, purpose, what it renders and parses, and for a
        signed-in user the fields POST takes."""
        req = request._get_current_object()
        options = settings.current()
        representation = negotiation.choose(req)
        viewer = viewer_of(req, options)
        described = options_description.describe(
            "Comment List", DESCRIPTION,
            options["NEW_COMMENT_SCHEMA"] if viewer is not None else None)
        return described_response(req, described, representation, viewer, ALLOW)


def described_response(req: Request, described: dict, representation: str,
                       viewer: auth.Viewer | None, allow: str) -> Response:
    """An OPTIONS answer: the description as JSON, or as the browsable page."""
    if representation == HTML:
        return html_response(browsable.options_page(
            req, described, json_headers=json_headers(allow=allow), viewer=viewer),
            allow=allow)
    return api_response(described, allow=allow)


def shown(comment: store.Comment, viewer: auth.Viewer | None) -> dict:
    """One comment as a list entry shows it to ``viewer``."""
    return dump_comments([comment], display_options(viewer))[0]


class CommentDetailView(MethodView):
    """One comment: GET shows it, PATCH marks it read or unread, DELETE soft-deletes it."""

    def get(self, comment_id: int) -> Response:
        """The comment as a list shows it (a root with its replies); 404 if there is none."""
        req = request._get_current_object()
        options = settings.current()
        representation = negotiation.choose(req)
        viewer = viewer_of(req, options)
        comment = replicas.reading(
            options, viewer.id if viewer else None,
            lambda engine: read_snapshot(engine, lambda conn: store.one(
                conn, comment_id, options["MAX_EMBEDDED_REPLIES"])))
        if comment is None:
            raise NotFound()
        if representation == HTML:
            return html_response(browsable.comment_page(
                req, shown(comment, viewer), method="GET", status=200, viewer=viewer,
                json_headers=json_headers(allow=DETAIL_ALLOW), name=f"Comment {comment.id}",
                summary=DETAIL_DESCRIPTION), allow=DETAIL_ALLOW)
        return api_response(shown(comment, viewer), allow=DETAIL_ALLOW)

    def patch(self, comment_id: int) -> Response:
        """Set ``is_read``: only the owner of what was commented on may (staff for pages).
        With an Idempotency-Key, a retry gets the first answer."""
        req = request._get_current_object()
        options = settings.current()
        viewer = signed_in(req, options)
        raw = browser_session.checked_fields(
            req, viewer, request_body.read_fields(req, options["MAX_REQUEST_BYTES"]))
        key = idempotency.key_of(req, raw)
        is_read = loaded(options["READ_FLAG_SCHEMA"], raw)["is_read"]
        write = idempotency.keyed(req, key, viewer.id, {"is_read": is_read})
        with writing(get_engine()) as conn:
            replay = idempotency.find(conn, write, options["IDEMPOTENCY_RETENTION_HOURS"])
            if replay is None:
                facts = existing(conn, comment_id)
                if not permissions.can_mark_read(viewer, facts.content_type, facts.object_id):
                    raise PermissionDenied()
                store.set_read(conn, comment_id, is_read)
                comment = store.one(conn, comment_id, options["MAX_EMBEDDED_REPLIES"])
                payload = shown(comment, viewer)
                idempotency.remember(conn, write, 200, payload, None, comment_id)
        replicas.wrote(options, viewer.id)
        if replay is not None:
            return encoded_response(replay.body, 200, replay.headers(), allow=DETAIL_ALLOW)
        return after_keyed_write(api_response(payload, allow=DETAIL_ALLOW), write, replay,
                                 options)

    def delete(self, comment_id: int) -> Response:
        """Soft-delete: the author or staff only; 204, also when it was already deleted.
        With an Idempotency-Key, a retry gets the first answer. Signed in by the browser's
        cookie, the request carries the X-CSRFToken header."""
        req = request._get_current_object()
        options = settings.current()
        viewer = signed_in(req, options)
        browser_session.checked_fields(req, viewer, {})  # the X-CSRFToken header
        write = idempotency.keyed(req, idempotency.key_of(req), viewer.id)
        with writing(get_engine()) as conn:
            replay = idempotency.find(conn, write, options["IDEMPOTENCY_RETENTION_HOURS"])
            if replay is None:
                facts = existing(conn, comment_id)
                if not permissions.can_delete(viewer, facts.author_id):
                    raise PermissionDenied()
                store.soft_delete(conn, comment_id)
                idempotency.forget_text(conn, [comment_id])
                idempotency.remember(conn, write, 204, None, None, comment_id)
        replicas.wrote(options, viewer.id)
        headers = replay.headers() if replay else None
        return after_keyed_write(api_response(None, 204, headers, allow=DETAIL_ALLOW), write,
                                 replay, options)

    def options(self, comment_id: int) -> Response:
        """Describe the endpoint, as the collection's OPTIONS does (no POST fields here)."""
        req = request._get_current_object()
        representation = negotiation.choose(req)
        viewer = viewer_of(req, settings.current())
        return described_response(req, options_description.describe("Comment", DETAIL_DESCRIPTION),
                                  representation, viewer, DETAIL_ALLOW)


def after_keyed_write(response: Response, write: idempotency.Keyed | None,
                      replay: idempotency.Stored | None, options: dict) -> Response:
    """A keyed write that was stored (not replayed) may be this process's turn to purge
    expired keys, after its response is sent (idempotency.PurgeSchedule)."""
    if write is None or replay is not None:
        return response
    return options["IDEMPOTENCY_PURGE"].after(response, get_engine())


def existing(conn: Connection, comment_id: int) -> store.CommentFacts:
    """The comment's facts, read in the writer's transaction; 404 if there is none."""
    facts = store.facts(conn, comment_id)
    if facts is None:
        raise NotFound()
    return facts
