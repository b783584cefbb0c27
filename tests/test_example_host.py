"""examples/host_site: a host site with its own database, login and content types, with the
comments mounted under /community, run as its authors would run it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from commentsvc import db as comments_db

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "host_site" / "hostsite.py"
URL = "/community/api/comments/"
ON_POST = {"content_type": "blog.post", "object_id": 1}


def load_example():
    """The example's module, imported by path as `flask --app` would."""
    spec = importlib.util.spec_from_file_location("hostsite", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules["hostsite"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def example(database_url):
    module = load_example()
    app = module.create_app({"TESTING": True, "SECRET_KEY": "test only",
                             "SQLALCHEMY_DATABASE_URI": database_url})
    with app.app_context(), comments_db.get_engine().begin() as conn:
        comments_db.drop_schema(conn)
        module.db.drop_all()
    result = app.test_cli_runner().invoke(args=["init-site"])
    assert result.exit_code == 0, result.output
    assert "Site ready" in result.output
    yield module, app
    with app.app_context():
        module.db.drop_all()
        module.db.engine.dispose()


def sign_in(client, name: str, password: str):
    return client.post("/login", data={"name": name, "password": password})


def test_the_site_keeps_its_own_pages_and_login(example):
    _, app = example
    client = app.test_client()
    home = client.get("/")
    assert b"Hello, world" in home.data and b"Sign in" in home.data
    assert sign_in(client, "ann", "wrong").status_code == 200  # the form again
    assert b"Signed in" not in client.get("/").data
    assert sign_in(client, "ann", "ann-secret").status_code == 302
    assert b"Signed in as ann" in client.get("/").data
    page = client.get("/posts/1").data
    assert b"/community/api/comments/?content_type=blog.post&amp;object_id=1" in page
    assert client.get("/nowhere").status_code == 404
    assert b"<!doctype html>" in client.get("/nowhere").data.lower()  # Flask's own page


def test_a_signed_in_site_user_comments_on_a_site_post(example):
    _, app = example
    client = app.test_client()
    sign_in(client, "ann", "ann-secret")
    created = client.post(URL, json={**ON_POST, "body": "First!"})
    assert created.status_code == 201, created.get_json()
    assert created.headers["Location"].startswith("http://localhost/community/api/comments/")
    reply = client.post(URL, data={**ON_POST, "body": "And a reply",
                                   "parent": str(created.get_json()["id"])})
    assert reply.status_code == 201, reply.get_json()
    listed = client.get(URL + "?content_type=blog.post&object_id=1").get_json()
    assert [c["body"] for c in listed["results"]] == ["And a reply", "First!"]
    assert listed["results"][1]["author"] == "ann"
    assert listed["results"][1]["can_delete"] is True
    assert listed["p8n"]["num_pages"] == 1


def test_the_hosts_content_types_and_objects_are_the_ones_checked(example):
    _, app = example
    client = app.test_client()
    assert client.post(URL, json={**ON_POST, "body": "hi"}).status_code == 401
    sign_in(client, "admin", "admin-secret")
    missing = client.post(URL, json={**ON_POST, "object_id": 99, "body": "hi"})
    assert missing.get_json() == {"object_id": ['Invalid pk "99" - object does not exist.']}
    unknown = client.post(URL, json={"content_type": "comics.comicpage", "object_id": 1,
                                     "body": "hi"})
    assert unknown.status_code == 400
    assert unknown.get_json() == {"content_type": [
        'Unknown content type "comics.comicpage". Allowed values: blog.post, users.user.']}
    # Staff of the site (its admin) may mark comments on its posts read.
    comment = client.post(URL, json={**ON_POST, "body": "Welcome"}).get_json()
    marked = client.patch(f"{URL}{comment['id']}/", json={"is_read": True})
    assert marked.status_code == 200 and marked.get_json()["is_read"] is True


def test_the_hosts_tables_live_beside_the_services(example):
    _, app = example
    client = app.test_client()
    sign_in(client, "ann", "ann-secret")
    assert client.post(URL, json={**ON_POST, "body": "hello"}).status_code == 201
    with app.app_context(), comments_db.get_engine().connect() as conn:
        tables = set(sa.inspect(conn).get_table_names())
        users = conn.execute(sa.text("SELECT id, username FROM commentsvc_user")).all()
        site_users = conn.execute(sa.text("SELECT name FROM host_user ORDER BY id")).all()
    assert {"host_user", "blog_post"} <= tables
    assert {name for name in tables - {"host_user", "blog_post"}
            if not name.startswith("commentsvc_")} == set()
    assert "commentsvc_comment" in tables
    assert [tuple(row) for row in users] == [(1, "ann")]  # added on her first write
    assert [row[0] for row in site_users] == ["ann", "admin"]


def test_the_api_and_its_document_follow_the_prefix(example):
    _, app = example
    client = app.test_client()
    doc = client.get("/community/api/schema/").get_json()
    assert "/community/api/comments/" in doc["paths"]
    enum = doc["components"]["schemas"]["NewComment"]["properties"]["content_type"]["enum"]
    assert enum == ["blog.post", "users.user"]
    assert client.get("/community/api/nothing/").get_json() == {"detail": "Not found."}
    assert client.get("/api/comments/").status_code == 404  # nothing outside the prefix
