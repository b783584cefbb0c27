"""Mounted in a host site, the blueprint trusts the host's login: the host hands it a
function returning the signed-in user, here from a plain Flask session."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import sqlalchemy as sa
from flask import Flask, session

from commentsvc import comments_api
from commentsvc.storage import engine
from conftest import COMMUNITY, insert_records

URL = "/community/api/comments/"
POST = {"content_type": "comics.comicpage", "object_id": 10, "body": "From the site"}
# The host's own user records; dave (7) has never been seen by the comment service.
HOST_USERS = {1: ("ann", None, False), 3: ("carol", None, True), 7: ("dave", "d.png", False),
              # users the service cannot record: no name, a NUL, ids no comment can name
              8: ("", None, False), 9: ("e\x00f", None, False), 0: ("zero", None, False),
              -5: ("minus", None, False), 2**63: ("big", None, False)}


def current_user():
    """The host's function: its user for the session, or None (as Flask-Login would)."""
    user_id = session.get("user_id")
    if user_id is None:
        return None
    username, avatar, is_staff = HOST_USERS[user_id]
    return SimpleNamespace(id=user_id, username=username, avatar=avatar, is_staff=is_staff,
                           is_authenticated=True)


def make_site(database_url: str) -> Flask:
    site = Flask("site_with_login")
    site.config.update(SQLALCHEMY_DATABASE_URI=database_url, SECRET_KEY="test only",
                       COMMENTSVC_CURRENT_USER=current_user)
    from flask_sqlalchemy import SQLAlchemy

    SQLAlchemy().init_app(site)

    @site.post("/login/<int(signed=True):user_id>")
    def login(user_id):
        session["user_id"] = user_id
        return "ok"

    site.register_blueprint(comments_api, url_prefix="/community")
    with site.app_context(), engine.get_engine().begin() as conn:
        engine.drop_schema(conn)
        engine.create_schema(conn)
    insert_records(site, COMMUNITY)
    return site


@pytest.fixture
def site(database_url):
    site = make_site(database_url)
    yield site
    with site.app_context():
        engine.get_engine().dispose()


def test_a_signed_in_host_user_posts_and_sees_their_rights(site):
    client = site.test_client()
    assert client.post(URL, json=POST).status_code == 401
    client.post("/login/1")
    response = client.post(URL, json=POST)
    assert response.status_code == 201
    assert response.get_json()["author"] == "ann"
    listed = client.get(URL + "?content_type=comics.comicpage&object_id=10").get_json()
    mine = {c["id"]: c["can_delete"] for c in listed["results"]}
    assert mine[response.get_json()["id"]] is True and mine[103] is False


def test_a_user_new_to_the_service_is_recorded_on_their_first_post(site):
    client = site.test_client()
    client.post("/login/7")
    response = client.post(URL, json=POST)
    assert response.status_code == 201
    assert response.get_json()["author_avatar"] == "/media/users/dave/thumb/d.png"
    with site.app_context(), engine.get_engine().connect() as conn:
        row = conn.execute(sa.text(
            "SELECT username, avatar FROM commentsvc_user WHERE id = 7")).one()
    assert tuple(row) == ("dave", "d.png")


def test_the_hosts_staff_flag_is_trusted(site):
    client = site.test_client()
    client.post("/login/3")
    assert client.delete("/community/api/comments/102/").status_code == 204
    client.post("/login/1")
    response = client.delete("/community/api/comments/101/")
    assert response.status_code == 403


@pytest.mark.parametrize("user_id", [8, 9, 0, -5, 2**63])
def test_a_host_user_the_service_cannot_record_may_not_write(site, user_id):
    """An empty name would give the author address /user//, a NUL cannot be stored, and
    an id outside 1..2**63-1 names no user: 403, nothing written, the reads unchanged."""
    client = site.test_client()
    client.post(f"/login/{user_id}")
    before = client.get(URL).get_json()
    response = client.post(URL, json=POST)
    assert response.status_code == 403
    assert response.get_json() == {"detail": "Your account is not known to the comment service."}
    assert client.get(URL).get_json() == before
