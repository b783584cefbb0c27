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
    other = app.test_client()
    sign_in(other, community.tokens["ann"])
    with app.app_context(), engine.writing(engine.get_engine()) as conn:
        from commentsvc.web import auth

        assert auth.revoke_token(conn, community.tokens["ann"])
    for browser in (ann, other):  # every session of the key
        assert "Not signed in" in browser.get(LIST, headers=BROWSER).get_data(as_text=True)
        assert_error(browser.post(LIST, json={**TARGET, "body": "hi"},
                                  headers={"X-CSRFToken": "any"}), 401,
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


COOKIE = browser_session.COOKIE_NAME
NOT_SIGNED_IN = "Authentication credentials were not provided."


def with_cookie(app, value: str):
    """Another browser, given a copy of a sign-in cookie."""
    other = app.test_client()
    other.set_cookie(COOKIE, value)
    return other


def sessions(app) -> list[tuple]:
    with app.app_context(), engine.get_engine().connect() as conn:
        return [tuple(row) for row in conn.exec_driver_sql(
            "SELECT digest, key_digest FROM commentsvc_browser_session")]


def test_a_cookie_saved_before_sign_out_signs_in_nobody(app, ann):
    """The attack: a copy of the cookie, taken while signed in, used after sign-out."""
    saved, token = ann.get_cookie(COOKIE).value, page_token(ann)
    assert with_cookie(app, saved).post(
        LIST, json={**TARGET, "body": "copy"}, headers={"X-CSRFToken": token}
    ).status_code == 201  # the copy works while the session lasts
    assert ann.post(LOGOUT, data={"csrf_token": token}).status_code == 303
    assert sessions(app) == []
    copy = with_cookie(app, saved)
    before = table_rows(app)
    for body in ({**TARGET, "body": "after"}, {**TARGET, "body": "after", "csrf_token": token}):
        assert_error(copy.post(LIST, json=body, headers={"X-CSRFToken": token}), 401,
                     NOT_SIGNED_IN)
    assert_error(copy.delete("/api/comments/100/", headers={"X-CSRFToken": token}), 401,
                 NOT_SIGNED_IN, allow=DETAIL)
    assert table_rows(app) == before
    assert "Not signed in" in copy.get(LIST, headers=BROWSER).get_data(as_text=True)
    assert not any(entry["can_delete"] for entry in copy.get(LIST).get_json()["results"])


def test_sign_out_reaches_every_worker(app, ann, database_url):
    """The session is kept in the database: another app on it (another worker, process
    or machine) refuses the saved cookie as soon as this one signed out."""
    from app import create_app

    other = create_app({"TESTING": True, "COMMENTSVC_DATABASE_URL": database_url})
    try:
        saved, token = ann.get_cookie(COOKIE).value, page_token(ann)
        there = with_cookie(other, saved)
        assert "Signed in as" in there.get(LIST, headers=BROWSER).get_data(as_text=True)
        ann.post(LOGOUT, data={"csrf_token": token})
        assert "Not signed in" in there.get(LIST, headers=BROWSER).get_data(as_text=True)
        assert_error(there.post(LIST, json={**TARGET, "body": "x"},
                                headers={"X-CSRFToken": token}), 401, NOT_SIGNED_IN)
    finally:
        with other.app_context():
            engine.get_engine().dispose()


def test_signing_in_again_after_sign_out_works(app, ann, community):
    saved = ann.get_cookie(COOKIE).value
    ann.post(LOGOUT, data={"csrf_token": page_token(ann)})
    assert sign_in(ann, community.tokens["ann"]).status_code == 303
    token = page_token(ann)
    assert ann.post(LIST, json={**TARGET, "body": "back"}, headers={"X-CSRFToken": token}
                    ).status_code == 201
    assert "Not signed in" in with_cookie(app, saved).get(LIST, headers=BROWSER).get_data(
        as_text=True)  # the old session stays ended


def test_signing_in_again_ends_the_browsers_previous_session(app, ann, community):
    saved = ann.get_cookie(COOKIE).value
    assert sign_in(ann, community.tokens["bob"]).status_code == 303
    assert "Signed in as <strong>bob</strong>" in ann.get(LIST, headers=BROWSER).get_data(
        as_text=True)
    assert "Not signed in" in with_cookie(app, saved).get(LIST, headers=BROWSER).get_data(
        as_text=True)
    assert len(sessions(app)) == 1


def test_the_table_holds_digests_of_session_ids_never_the_ids(app, ann, community):
    [(digest, key_digest)] = sessions(app)
    with app.test_request_context(LIST, headers={"Cookie": f"{COOKIE}="
                                                 f"{ann.get_cookie(COOKIE).value}"}) as ctx:
        session_id, _ = browser_session.signed_cookie(ctx.request, app)
    from commentsvc.web.auth import hash_key

    assert digest == hash_key(session_id) != session_id
    assert key_digest == hash_key(community.tokens["ann"])


def test_sessions_older_than_a_cookie_may_live_are_deleted_at_sign_in(app, ann, community):
    """The table cannot grow without bound: a cookie's signature is refused after
    PERMANENT_SESSION_LIFETIME (31 days), and so long after their start rows are gone."""
    from datetime import UTC, datetime, timedelta

    import sqlalchemy as sa

    lifetime = app.permanent_session_lifetime
    assert lifetime == timedelta(days=31)
    now = datetime.now(UTC).replace(tzinfo=None)
    with app.app_context(), engine.get_engine().begin() as conn:
        conn.execute(sa.text("UPDATE commentsvc_browser_session SET created = :old"),
                     {"old": now - lifetime - timedelta(minutes=1)})  # ann's
        conn.execute(sa.text("INSERT INTO commentsvc_browser_session VALUES ('young', 'k', "
                             ":young)"), {"young": now - timedelta(days=30)})
    sign_in(app.test_client(), community.tokens["bob"])
    assert len(sessions(app)) == 2 and ("young", "k") in sessions(app)


def test_a_cookie_made_before_sessions_were_kept_signs_in_nobody(app, community):
    """Cookies issued before sign-out reached the database hold the key's digest and no
    session id: refused, their browsers sign in once more."""
    from commentsvc.web.auth import hash_key

    serializer = app.session_interface.get_signing_serializer(app)
    old = serializer.dumps({"commentsvc_key_digest": hash_key(community.tokens["ann"]),
                            "commentsvc_csrf": "old-token"})
    browser = with_cookie(app, old)
    assert "Not signed in" in browser.get(LIST, headers=BROWSER).get_data(as_text=True)
    assert_error(browser.post(LIST, json={**TARGET, "body": "x"},
                              headers={"X-CSRFToken": "old-token"}), 401, NOT_SIGNED_IN)
    assert sign_in(browser, community.tokens["ann"]).status_code == 303
    assert "Signed in as <strong>ann</strong>" in browser.get(LIST, headers=BROWSER).get_data(
        as_text=True)


def test_during_an_import_signing_in_and_out_answer_503_and_change_nothing(app, ann,
                                                                           community):
    token, before = page_token(ann), sessions(app)
    with app.app_context(), engine.writing(engine.get_engine(), bulk=True):
        for response in (ann.post(LOGOUT, data={"csrf_token": token}),
                         ann.post(LOGIN, data={"csrf_token": token,
                                               "key": community.tokens["bob"]})):
            assert response.status_code == 503, response.get_data(as_text=True)
            assert response.get_json()["detail"].startswith("An import is in progress")
    assert sessions(app) == before
    assert "Signed in as <strong>ann</strong>" in ann.get(LIST, headers=BROWSER).get_data(
        as_text=True)
    assert ann.post(LOGOUT, data={"csrf_token": token}).status_code == 303  # after it
    assert sessions(app) == []


def test_requests_without_the_cookie_never_read_a_session(app, community, monkeypatch):
    """Anonymous and token-signed requests cost what they did: no session read."""
    from commentsvc.storage.counters import ListStateReader

    def refuse(*_args):
        raise AssertionError("a session was read")

    monkeypatch.setattr(ListStateReader, "read_session_viewer", refuse)
    bare = app.test_client()
    assert bare.get(LIST).status_code == 200
    assert bare.get(LIST, headers=community.auth("ann")).status_code == 200
    assert bare.post(LIST, json={**TARGET, "body": "by key"},
                     headers=community.auth("ann")).status_code == 201


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
