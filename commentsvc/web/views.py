"""The HTTP resources /api/comments/ and /api/comments/<id>/: each method reads like the
sentence that describes it; the reads are in web.reads, the writes in web.writes, the
rendering in web.rendering."""

from __future__ import annotations

from typing import Any

from flask import Request, Response, request
from flask.typing import ResponseReturnValue
from flask.views import MethodView

from commentsvc.web import current, negotiation, writes
from commentsvc.web.exceptions import NotFound
from commentsvc.web.feed import ListFeed, requested_list
from commentsvc.web.negotiation import HTML
from commentsvc.web.reads import ListPage, one_comment
from commentsvc.web.rendering import (
    DESCRIPTION,
    DETAIL_DESCRIPTION,
    comment_response,
    described_response,
    shown,
)
from commentsvc.web.responses import ALLOW, DETAIL_ALLOW, api_response, encoded_response
from commentsvc.web.viewer import posted_as, signed_in, viewer_of


class CommentListView(MethodView):
    """GET lists comments; POST adds one; OPTIONS describes the endpoint."""

    def get(self) -> Response:
        """List comments newest first (ties by id), one page, with the p8n navigation:
        from a replica when there are any (see storage.replicas), else from the primary."""
        service = current.service()
        # The request itself, not the proxy: a page reads it a few dozen times, and each
        # read through the proxy looks the request up again.
        req: Request = request._get_current_object()  # type: ignore[attr-defined]
        comments, page_size = service.paginator.list_of(req)
        representation = negotiation.choose(req)
        viewer = viewer_of(req, service.settings, service.browser_sign_in)
        page = ListPage(service, req, comments, page_size, viewer, representation)
        return service.reads.reading(viewer.id if viewer else None, page.response)

    def post(self) -> Response:
        """Add a comment (or a reply) as the signed-in user: 201 with it as lists show it.

        How the answer is rendered is settled before anything is written (an
        unsatisfiable Accept is 406). With an Idempotency-Key, a retry gets the first
        answer instead (web.writes).
        """
        service = current.service()
        representation = negotiation.choose(request)
        viewer, written = posted_as(request, service, writes.post)
        if representation == HTML:
            response = comment_response(
                request, written.payload, HTML, method="POST", status=201, viewer=viewer,
                name="Comment posted", allow=ALLOW, headers=written.headers)
        elif written.replay is not None:
            response = encoded_response(written.replay.body, 201, written.headers)
        else:
            response = api_response(written.payload, 201, written.headers)
        return written.after(response, service)

    def options(self) -> Response:
        """Describe the endpoint: its name, purpose, what it renders and parses, and for a
        signed-in user the fields POST takes."""
        service = current.service()
        representation = negotiation.choose(request)
        viewer = viewer_of(request, service.settings, service.browser_sign_in)
        post_schema = service.new_comment_schema if viewer is not None else None
        return described_response(request, "Comment List", DESCRIPTION, post_schema,
                                  representation, viewer, ALLOW)


class CommentFeedView(MethodView):
    """GET: a list's newest comments as an Atom feed (HEAD: its headers)."""

    provide_automatic_options = False  # OPTIONS is 405, as on the other documents

    def get(self) -> Response:
        """The feed of the list the query names, read as the list is (a replica when there
        are any); a bad token is 401 as everywhere, though the feed is the same for all."""
        service = current.service()
        comments = requested_list(request, service)
        viewer = viewer_of(request, service.settings, service.browser_sign_in)
        feed = ListFeed(service, request, comments)
        return service.reads.reading(viewer.id if viewer else None, feed.response)


class CommentDetailView(MethodView):
    """One comment: GET shows it, PATCH marks it read or unread, DELETE soft-deletes it."""

    def dispatch_request(self, **kwargs: Any) -> ResponseReturnValue:
        """Every path of ASCII digits is this resource; one that can name no comment (0,
        past the largest id: the route gives None) is 404 for every method it takes."""
        if kwargs["comment_id"] is None:
            raise NotFound()
        return super().dispatch_request(**kwargs)

    def get(self, comment_id: int) -> Response:
        """The comment as a list shows it (a root with its replies); 404 if there is none."""
        service = current.service()
        representation = negotiation.choose(request)
        viewer = viewer_of(request, service.settings, service.browser_sign_in)
        comment = one_comment(service, viewer, comment_id)
        return comment_response(request, shown(comment, service.settings, viewer),
                                representation, method="GET", status=200, viewer=viewer,
                                name=f"Comment {comment.id}", allow=DETAIL_ALLOW)

    def patch(self, comment_id: int) -> Response:
        """Set ``is_read``: only the owner of what was commented on may (staff for pages).
        With an Idempotency-Key, a retry gets the first answer."""
        service = current.service()
        viewer = signed_in(request, service.settings, service.browser_sign_in)
        written = writes.mark_read(request, viewer, comment_id, service)
        if written.replay is not None:
            return encoded_response(written.replay.body, 200, written.headers,
                                    allow=DETAIL_ALLOW)
        return written.after(api_response(written.payload, allow=DETAIL_ALLOW), service)

    def delete(self, comment_id: int) -> Response:
        """Soft-delete: the author or staff only; 204, also when it was already deleted.
        With an Idempotency-Key, a retry gets the first answer. Signed in by the browser's
        cookie, the request carries the X-CSRFToken header."""
        service = current.service()
        viewer = signed_in(request, service.settings, service.browser_sign_in)
        written = writes.delete(request, viewer, comment_id, service)
        return written.after(api_response(None, 204, written.headers, allow=DETAIL_ALLOW),
                             service)

    def options(self, comment_id: int) -> Response:
        """Describe the endpoint, as the collection's OPTIONS does (no POST fields here)."""
        service = current.service()
        representation = negotiation.choose(request)
        viewer = viewer_of(request, service.settings, service.browser_sign_in)
        return described_response(request, "Comment", DETAIL_DESCRIPTION, None,
                                  representation, viewer, DETAIL_ALLOW)
