"""The standalone app's sign-in page: paste a key once, browse signed in; and sign-out.

    GET  /api/auth/login/?next=/api/comments/%3Fformat%3Dapi   the form
    POST /api/auth/login/    key, csrf_token, next    -> 303 to next, the cookie set
    POST /api/auth/logout/   csrf_token               -> 303 to the list, the session ended

Like Django REST Framework's browsable login, and registered by the standalone app only:
mounted, the host site's own login is in charge. Both forms carry the session's CSRF
token, so another site cannot sign a visitor in or out.
"""

from __future__ import annotations

from flask import Blueprint, Flask, Response, redirect, render_template, request, url_for
from werkzeug.wrappers import Response as BaseResponse

from commentsvc.standalone.secret_key import instance_secret
from commentsvc.storage.engine import get_engine
from commentsvc.web import auth, browser_session, current
from commentsvc.web.errors import to_response
from commentsvc.web.request_body import read_fields
from commentsvc.web.responses import LIST_ENDPOINT, NOSNIFF, PAGE_HEADERS

signin_api = Blueprint("commentsvc_signin", __name__)
signin_api.register_error_handler(Exception, to_response)  # {"detail": ...}, as the API

INVALID_KEY = "Invalid token."


def safe_next(target: str | None) -> str:
    """Where to go after signing in: a path of this site, else the browsable list.

    >>> safe_next("/api/comments/?format=api&page=2")
    '/api/comments/?format=api&page=2'
    >>> [safe_next(t) == safe_next(None) for t in ("//evil.example/", "/\\\\evil.example",
    ...                                            "https://evil.example/", "api/", "")]
    [True, True, True, True, True]
    """
    if (isinstance(target, str) and target.startswith("/")
            and not target.startswith(("//", "/\\")) and target.isprintable()):
        return target
    return url_for(LIST_ENDPOINT, format="api")


def page(next_url: str | None, error: str | None = None, status: int = 200) -> Response:
    """The sign-in form, with the session's CSRF token and where to go next."""
    body = render_template(
        "commentsvc/signin.html", error=error, csrf_token=browser_session.csrf_token(),
        next=safe_next(next_url),
        action=url_for("commentsvc_signin.login"),
        stylesheet=url_for("commentsvc.static", filename="browsable.css"),
        list_url=url_for(LIST_ENDPOINT, format="api"))
    response = Response(body, status=status, mimetype="text/html")
    response.headers.update({**PAGE_HEADERS, **NOSNIFF, "Cache-Control": "no-store"})
    return response


@signin_api.route("/api/auth/login/", methods=["GET", "POST"])
def login() -> BaseResponse:
    """GET shows the form; POST checks the CSRF token, then the key: a kept key starts a
    new session (303 to ``next``), another is the form again with "Invalid token." (400)."""
    if request.method == "GET":
        return page(request.args.get("next"))
    fields = read_fields(request, current.service().settings.max_request_bytes)
    browser_session.check_token(request, browser_session.csrf_token(), fields)
    key, next_url = fields.get("key"), fields.get("next")
    key = key.strip() if isinstance(key, str) else ""
    if not key:
        return page(next_url, "Paste a key (the create-token command makes one).", 400)
    digest = auth.hash_key(key)
    if auth.viewer_by_digest(get_engine(), digest) is None:
        return page(next_url, INVALID_KEY, 400)
    browser_session.sign_in(get_engine(), digest)
    return redirect(safe_next(next_url), 303)


@signin_api.post("/api/auth/logout/")
def logout() -> BaseResponse:
    """End the session (its CSRF token checked), in the database too, so a saved copy of
    the cookie signs in nobody; 303 to the browsable list."""
    fields = read_fields(request, current.service().settings.max_request_bytes)
    browser_session.check_token(request, browser_session.csrf_token(), fields)
    browser_session.sign_out(get_engine())
    return redirect(url_for(LIST_ENDPOINT, format="api"), 303)


def enable(app: Flask, secret_key: str) -> None:
    """Browser sign-in for the standalone ``app``: the sign-in page, and the cookie signed
    with ``secret_key`` (empty: a key generated once, kept in the instance folder)."""
    browser_session.enable(app, secret_key or instance_secret(app.instance_path))
    app.register_blueprint(signin_api)
