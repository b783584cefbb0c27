"""Browser sign-in on the standalone service: a pasted key becomes a signed session
cookie, cookie-signed writes carry the session's CSRF token, and sign-out ends it."""

from __future__ import annotations

import os
import re
import stat

import pytest
from test_mounting import make_host

from commentsvc import settings
from commentsvc.standalone import signin
from commentsvc.standalone.secret_key import instance_secret
from commentsvc.storage import engine
from commentsvc.web import browser_session
from conftest import make_app, table_rows
from helpers import ALLOW

LIST = "/api/comments/"
LOGIN = "/api/auth/login/"
LOGOUT = "/api/auth/logout/"
BROWSER = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
TARGET = {"content_type": "comics.comicpage", "object_id": "10"}
MISSING = "CSRF Failed: CSRF token missing."
INCORRECT = "CSRF Failed: CSRF token incorrect."


def assert_error(response, status: int, detail: str, allow: str | None = ALLOW) -> None:
    """A JSON error of this status and detail (a request with the cookie also varies on
    it, so Vary is not compared here); ``allow`` None: a path no route serves."""
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.headers["Content-Type"] == "application/json"
    assert response.headers.get("Allow") == allow
    assert response.get_json() == {"detail": detail}


def form_token(page: bytes | str) -> str:
    text = page if isinstance(page, str) else page.decode("utf-8")
    return re.search(r'name="csrf_token" value="([^"]+)"', text).group(1)


def sign_in(client, key: str, next_url: str | None = None):
    """Paste ``key`` into the sign-in form as a browser would; the POST's response."""
    page = client.get(LOGIN if next_url is None else f"{LOGIN}?next={next_url}")
    return client.post(LOGIN, data={"csrf_token": form_token(page.data), "key": key,
                                    "next": next_url or ""})


def page_token(client) -> str:
    """The CSRF token the signed-in list page carries (its meta tag)."""
    page = client.get(LIST, headers=BROWSER).get_data(as_text=True)
    return re.search(r'<meta name="csrf-token" content="([^"]+)">', page).group(1)


@pytest.fixture
def ann(client, community):
    """The test client signed in as ann through the sign-in form."""
    assert sign_in(client, community.tokens["ann"]).status_code == 303
    return client


# --- the sign-in page ------------------------------------------------------------------

def test_the_sign_in_page_is_a_form_with_a_csrf_token(client):
    response = client.get(LOGIN)
    assert response.status_code == 200 and response.mimetype == "text/html"
    assert response.headers["Cache-Control"] == "no-store"
    assert "script-src 'self'" in response.headers["Content-Security-Policy"]
    text = response.get_data(as_text=True)
    assert 'name="key" type="password"' in text and len(form_token(text)) >= 40
    cookie = response.headers["Set-Cookie"]
    assert cookie.startswith("commentsvc_session=")
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Secure" not in cookie


def test_over_https_the_cookie_is_secure(client):
    response = client.get(LOGIN, base_url="https://localhost")
    assert "; Secure" in response.headers["Set-Cookie"]


def test_a_kept_key_signs_the_browser_in_and_goes_back(client, community):
    response = sign_in(client, community.tokens["ann"], "/api/comments/?format=api&page=1")
    assert response.status_code == 303
    assert response.headers["Location"] == "/api/comments/?format=api&page=1"
    page = client.get(LIST, headers=BROWSER).get_data(as_text=True)
    assert "Signed in as <strong>ann</strong>" in page
    assert 'class="sign-out"' in page and "Post a comment" in page
    listed = client.get(LIST).get_json()["results"]
    assert all(c["can_reply"] == (not c["is_deleted"]) for c in listed)


@pytest.mark.parametrize("next_url", ["//evil.example/", "https://evil.example/", "api/"])
def test_sign_in_never_sends_the_browser_elsewhere(client, community, next_url):
    response = sign_in(client, community.tokens["ann"], next_url)
    assert response.headers["Location"] == "/api/comments/?format=api"


@pytest.mark.parametrize("key", ["0" * 40, "not a key", "   "])
def test_a_bad_key_shows_the_form_again_and_signs_nobody_in(app, client, community, key):
    before = table_rows(app)
    response = sign_in(client, key)
    assert response.status_code == 400
    assert 'class="error" role="alert"' in response.get_data(as_text=True)
    assert "Not signed in" in client.get(LIST, headers=BROWSER).get_data(as_text=True)
    assert table_rows(app) == before


def test_an_invalid_key_is_named(client, community):
    assert "Invalid token." in sign_in(client, "0" * 40).get_data(as_text=True)


def test_signing_in_needs_the_forms_csrf_token(client, community):
    key = community.tokens["ann"]
    client.get(LOGIN)
    assert_error(client.post(LOGIN, data={"key": key}), 403, MISSING)
    assert_error(client.post(LOGIN, data={"key": key, "csrf_token": "x" * 43}), 403, INCORRECT)
    assert "Not signed in" in client.get(LIST, headers=BROWSER).get_data(as_text=True)


def test_signing_in_starts_a_new_csrf_token(client, community):
    before = form_token(client.get(LOGIN).data)
    sign_in(client, community.tokens["ann"])
    assert page_token(client) != before


# --- CSRF on cookie-signed writes --------------------------------------------------------

def test_a_cookie_signed_post_needs_the_token(app, ann):
    before = table_rows(app)
    assert_error(ann.post(LIST, json={**TARGET, "body": "hi"}), 403, MISSING)
    assert_error(ann.post(LIST, data={**TARGET, "body": "hi", "csrf_token": "nope"}),
                 403, INCORRECT)
    assert_error(ann.post(LIST, json={**TARGET, "body": "hi"},
                          headers={"X-CSRFToken": "nope"}), 403, INCORRECT)
    assert table_rows(app) == before


@pytest.mark.parametrize("how", ["header", "form field", "json field"])
def test_a_cookie_signed_post_with_the_token_is_written(ann, how):
    token = page_token(ann)
    if how == "header":
        response = ann.post(LIST, json={**TARGET, "body": "hi"},
                            headers={"X-CSRFToken": token})
    elif how == "form field":
        response = ann.post(LIST, data={**TARGET, "body": "hi", "csrf_token": token})
    else:
        response = ann.post(LIST, json={**TARGET, "body": "hi", "csrf_token": token})
    assert response.status_code == 201
    assert response.get_json()["author"] == "ann"


def test_cookie_signed_delete_and_mark_read_need_the_token(app, ann):
    before = table_rows(app)
    assert_error(ann.delete("/api/comments/100/"), 403, MISSING, allow=DETAIL)
    assert_error(ann.patch("/api/comments/102/", json={"is_read": True}), 403, MISSING,
                 allow=DETAIL)
    assert table_rows(app) == before
    token = {"X-CSRFToken": page_token(ann)}
    assert ann.patch("/api/comments/102/", json={"is_read": True}, headers=token
                     ).get_json()["is_read"] is True
    assert ann.delete("/api/comments/100/", headers=token).status_code == 204
    assert ann.get("/api/comments/100/").get_json()["is_deleted"] is True


DETAIL = "GET, PATCH, DELETE, HEAD, OPTIONS"


def test_a_token_header_needs_no_csrf_token_even_beside_the_cookie(ann, community):
    response = ann.post(LIST, json={**TARGET, "body": "by key"},
                        headers=community.auth("bob"))
    assert response.status_code == 201 and response.get_json()["author"] == "bob"


def test_a_revoked_key_signs_its_browsers_out(app, ann, community):
    with app.app_context(), engine.writing(engine.get_engine()) as conn:
        from commentsvc.web import auth

        assert auth.revoke_token(conn, community.tokens["ann"])
    assert "Not signed in" in ann.get(LIST, headers=BROWSER).get_data(as_text=True)
    assert_error(ann.post(LIST, json={**TARGET, "body": "hi"}), 401,
                 "Authentication credentials were not provided.")


# --- the page of a signed-in browser ------------------------------------------------------

def test_two_sessions_of_one_user_get_their_own_pages(app, community):
    first, second = app.test_client(), app.test_client()
    for client in (first, second):
        sign_in(client, community.tokens["ann"])
    one, two = (c.get(LIST, headers=BROWSER) for c in (first, second))
    assert one.headers["ETag"] != two.headers["ETag"]
    assert form_token(one.data) != form_token(two.data)
    assert form_token(first.get(LIST, headers=BROWSER).data) == form_token(one.data)


def test_without_the_cookie_answers_vary_on_accept_only(client, ann):
    from flask.testing import FlaskClient

    bare = FlaskClient(client.application, use_cookies=False)
    assert bare.get(LIST).headers["Vary"] == "Accept"
    assert set(ann.get(LIST).headers["Vary"].replace(" ", "").split(",")) == {
        "Accept", "Cookie"}


def test_the_page_offers_reply_delete_and_mark_read(ann):
    page = ann.get(LIST + "?format=api").get_data(as_text=True)
    token = form_token(page)
    card = page.split('id="comment-100"', 1)[1].split("</article>", 1)[0]  # ann's root
    assert 'data-method="DELETE" data-url="/api/comments/100/"' in card
    assert re.search(r'<input type="hidden" name="content_type" value="comics.comicpage">\s*'
                     r'<input type="hidden" name="object_id" value="10">\s*'
                     r'<input type="hidden" name="parent" value="100">', card)
    assert f'name="csrf_token" value="{token}"' in card
    bobs = page.split('id="comment-102"', 1)[1].split("</article>", 1)[0]  # on ann's profile
    assert "DELETE" not in bobs  # bob's comment
    assert """data-method="PATCH" data-url="/api/comments/102/" data-body='{"is_read": true}'""" \
        in bobs  # ann owns the profile it is on
    assert "PATCH" not in card  # a comic page's comments are staff's to mark
    assert "Reply" not in page.split('id="comment-103"', 1)[1].split("</article>", 1)[0]


def test_a_token_signed_page_names_the_user_and_has_no_sign_out(client, community):
    page = client.get(LIST, headers={**BROWSER, **community.auth("carol")}).get_data(
        as_text=True)
    assert "Signed in as <strong>carol</strong>" in page
    assert "sign-out" not in page and "csrf-token" not in page
    assert 'data-method="PATCH" data-url="/api/comments/100/"' in page  # staff


def test_a_browser_that_is_not_signed_in_gets_a_link_back_here(client):
    page = client.get(LIST + "?format=api&page_size=5").get_data(as_text=True)
    assert ('<a class="sign-in" href="/api/auth/login/?next=/api/comments/?format%3Dapi'
            '%26page_size%3D5">Sign in</a>') in page


# --- sign-out ------------------------------------------------------------------------------

def test_sign_out_ends_the_session(ann):
    token = page_token(ann)
    assert_error(ann.post(LOGOUT), 403, MISSING, allow="POST, OPTIONS")
    assert "Signed in as" in ann.get(LIST, headers=BROWSER).get_data(as_text=True)
    response = ann.post(LOGOUT, data={"csrf_token": token})
    assert response.status_code == 303
    assert response.headers["Location"] == "/api/comments/?format=api"
    assert "Not signed in" in ann.get(LIST, headers=BROWSER).get_data(as_text=True)
    assert_error(ann.post(LIST, json={**TARGET, "body": "hi"}, headers={"X-CSRFToken": token}),
                 401, "Authentication credentials were not provided.")


def test_sign_out_is_a_post(client):
    assert_error(client.get(LOGOUT), 405, 'Method "GET" not allowed.', allow="POST, OPTIONS")


# --- where sign-in exists -----------------------------------------------------------------

def test_mounted_the_hosts_login_is_in_charge(database_url):
    host = make_host(database_url)
    try:
        assert host.extensions["commentsvc"].browser_sign_in is False
        assert_error(host.test_client().get("/community" + LOGIN), 404, "Not found.",
                     allow=None)  # no such route: no methods to name
        assert "commentsvc_signin" not in host.blueprints
    finally:
        with host.app_context():
            engine.get_engine().dispose()


def test_standalone_with_a_current_user_function_has_no_sign_in(app_factory):
    app = app_factory(COMMENTSVC_CURRENT_USER=lambda: None)
    assert_error(app.test_client().get(LOGIN), 404, "Not found.", allow=None)
    page = app.test_client().get(LIST, headers=BROWSER).get_data(as_text=True)
    assert "sign-in" not in page


# --- the secret key ---------------------------------------------------------------------------

def test_a_missing_key_is_made_once_and_kept_private(tmp_path):
    key = instance_secret(tmp_path)
    assert len(key) == 64 and instance_secret(tmp_path) == key
    assert stat.S_IMODE(os.stat(tmp_path / "secret_key").st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["secret_key"]


def test_the_app_signs_with_the_instance_key_unless_one_is_set(database_url):
    made = make_app(database_url)
    configured = make_app(database_url, COMMENTSVC_SECRET_KEY="k" * 32)
    try:
        assert made.secret_key == instance_secret(made.instance_path)
        assert configured.secret_key == "k" * 32
    finally:
        for app in (made, configured):
            with app.app_context():
                engine.get_engine().dispose()


def test_a_short_key_stops_the_service_without_showing_it():
    with pytest.raises(settings.SettingsError) as raised:
        settings.validate({"COMMENTSVC_SECRET_KEY": "hunter2"})
    assert "hunter2" not in str(raised.value)
    assert "COMMENTSVC_SECRET_KEY=(hidden): must be at least 32 characters" in str(raised.value)


def test_the_examples_in_the_docstrings_hold():
    import doctest

    with make_app("sqlite://").test_request_context():
        result = doctest.testmod(signin)
    assert result.attempted > 0 and result.failed == 0
    assert browser_session.COOKIE_NAME == "commentsvc_session"


# --- the OpenAPI document ------------------------------------------------------------------

def test_the_openapi_document_names_the_cookie_standalone_only(client, database_url):
    doc = client.get("/api/schema/").get_json()
    cookie = doc["components"]["securitySchemes"]["SessionCookie"]
    assert cookie == {**cookie, "type": "apiKey", "in": "cookie", "name": "commentsvc_session"}
    post = doc["paths"]["/api/comments/"]["post"]
    assert post["security"] == [{"TokenAuth": []}, {"SessionCookie": []}]
    host = make_host(database_url)
    try:
        mounted = host.test_client().get("/community/api/schema/").get_json()
        assert "SessionCookie" not in mounted["components"]["securitySchemes"]
        assert mounted["paths"]["/community/api/comments/"]["post"]["security"] == [
            {"TokenAuth": []}]
    finally:
        with host.app_context():
            engine.get_engine().dispose()


def test_without_a_cookie_header_no_cookie_is_parsed(app):
    """A request that sent no Cookie header opens an empty session without parsing one
    (``request.cookies`` is cached on the request once asked for)."""
    interface = app.session_interface
    with app.test_request_context(LIST) as ctx:
        opened = interface.open_session(app, ctx.request)
        assert opened is not None and dict(opened) == {}
        assert browser_session.signed_cookie(ctx.request, app) is None
        assert "cookies" not in ctx.request.__dict__


def test_other_cookies_alone_open_an_empty_session(app):
    interface = app.session_interface
    with app.test_request_context(LIST, headers={"Cookie": "theme=dark; lang=en"}) as ctx:
        opened = interface.open_session(app, ctx.request)
        assert opened is not None and dict(opened) == {}
        assert browser_session.signed_cookie(ctx.request, app) is None
        assert ctx.request.cookies["theme"] == "dark"
