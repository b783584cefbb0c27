"""examples/host_site: a host site with its own database, login and content types, with the
comments mounted under /community, run as its authors would run it."""

from __future__ import annotations

import http.cookiejar
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import sqlalchemy as sa

from commentsvc.storage import engine as comments_db

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "host_site" / "hostsite.py"
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
    assert {"host_user", "blog_post", "host_notification"} <= tables
    assert {name for name in tables - {"host_user", "blog_post", "host_notification"}
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


@pytest.fixture
def served(example):
    """The example site on a real server (a thread), where webhooks can reach it."""
    from werkzeug.serving import make_server

    module, app = example
    server = make_server("127.0.0.1", 0, app, threaded=True)
    app.config["COMMENTSVC_WEBHOOK_URLS"] = f"http://127.0.0.1:{server.port}/hooks/comments"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield module, app, server.port
    server.shutdown()


def test_a_comment_on_a_profile_reaches_its_owner_as_a_notification(served):
    module, app, port = served
    reader = app.test_client()
    sign_in(reader, "ann", "ann-secret")  # her first write makes her known to comments
    assert reader.post(URL, json={**ON_POST, "body": "Hello"}).status_code == 201
    client = app.test_client()
    sign_in(client, "admin", "admin-secret")
    on_ann = client.post(URL, json={"content_type": "users.user", "object_id": 1,
                                    "body": "Nice profile"})
    assert on_ann.status_code == 201
    assert client.post(URL, json={**ON_POST, "body": "on a post"}).status_code == 201
    own = reader.post(URL, json={"content_type": "users.user", "object_id": 1,
                                 "body": "my own profile"})
    assert own.status_code == 201
    # A fresh app reads the webhook URL the server got (settings are read once per app).
    host = module.create_app({**app.config})
    delivered = host.test_cli_runner().invoke(args=["deliver", "--once"])
    assert delivered.exit_code == 0, delivered.output
    assert "Delivered 4 event(s)." in delivered.output
    home = reader.get("/").get_data(as_text=True)
    assert "New comment on <a href=\"/community/api/comments/?content_type=users.user&amp;" \
           "object_id=1\">your profile</a> by admin" in home
    assert home.count("New comment on") == 1  # posts' comments and her own tell nobody
    with app.app_context():
        assert [(n.user_id, n.comment_id) for n in module.db.session.scalars(
            module.db.select(module.Notification))] == [(1, on_ann.get_json()["id"])]


def test_the_hook_refuses_forgeries_and_tells_a_repeat_once(served):
    from commentsvc.webhooks import headers_for

    module, app, _port = served
    secret = app.config["COMMENTSVC_WEBHOOK_SECRET"]
    event = {"id": "evt-1", "type": "comment.created", "created": "2026-11-25T10:00:00Z",
             "data": {"comment_id": 7, "content_type": "users.user", "object_id": 1,
                      "parent_id": None, "comment": {"author": "bob"}}}
    body = json.dumps(event).encode()
    client = app.test_client()
    forged = headers_for("another-secret-0123456789abcdef", "evt-1", "comment.created",
                         body, 1)
    assert client.post("/hooks/comments", data=body, headers=forged).status_code == 400
    signed = headers_for(secret, "evt-1", "comment.created", body, 1)
    for _attempt in (1, 2):
        assert client.post("/hooks/comments", data=body, headers=signed).status_code == 204
    with app.app_context():
        assert module.db.session.query(module.Notification).count() == 1


def test_signing_out_is_a_form_that_posts_to_logout(example):
    _, app = example
    client = app.test_client()
    sign_in(client, "ann", "ann-secret")
    page = client.get("/").get_data(as_text=True)
    assert '<form method="post" action="/logout"' in page and "<button>Sign out</button>" in page
    assert client.post("/logout").status_code == 302
    assert "Signed in" not in client.get("/").get_data(as_text=True)


README_STEPS = re.compile(r"```sh\n(make install\n.*?)```", re.S)


def test_the_readme_steps_run_as_written(tmp_path):
    """The README's mounting steps, in a folder of their own: `make install` has installed
    the package (no PYTHONPATH), `init-site` makes the site, and its pages answer."""
    steps = README_STEPS.search((ROOT / "README.md").read_text(encoding="utf-8"))[1]
    lines = [line for line in steps.splitlines() if line and not line.startswith("#")]
    assert lines[0] == "make install"
    assert lines[1] == ".venv/bin/flask --app examples/host_site/hostsite.py init-site"
    assert lines[2] == ".venv/bin/flask --app examples/host_site/hostsite.py run"
    environ = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "DATABASE_URL") and not k.startswith("COMMENTSVC_")}
    found = subprocess.run([sys.executable, "-c", "import commentsvc"], cwd=tmp_path,
                           env=environ, capture_output=True, text=True, timeout=60)
    if found.returncode != 0 and os.environ.get("CI") != "true":
        pytest.skip("commentsvc is not installed in this environment: run make install")
    assert found.returncode == 0, found.stderr
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    made = subprocess.run(["bash", "-c", lines[1].replace(".venv/bin/flask",
                                                          ".venv/bin/python -m flask")],
                          cwd=tmp_path, env=environ, capture_output=True, text=True,
                          timeout=120)
    assert made.returncode == 0, made.stderr
    assert "Site ready: sign in as ann / ann-secret" in made.stdout
    assert (tmp_path / "examples" / "host_site" / "instance" / "host_site.db").is_file()
    port = free_port()
    served = subprocess.Popen(["bash", "-c", lines[2].replace(
        ".venv/bin/flask", ".venv/bin/python -m flask") + f" --port {port}"],
        cwd=tmp_path, env=environ, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for(base + "/", served)
        jar = http.cookiejar.CookieJar()
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        browser.open(base + "/login", data=b"name=ann&password=ann-secret", timeout=10)
        assert b"Signed in as ann" in browser.open(base + "/", timeout=10).read()
        posted = browser.open(urllib.request.Request(
            base + URL, data=json.dumps({**ON_POST, "body": "From the README"}).encode(),
            headers={"Content-Type": "application/json"}), timeout=10)
        assert posted.status == 201
        after = browser.open(base + "/logout", data=b"", timeout=10).read()  # the form's POST
        assert b"Sign in" in after and b"Signed in" not in after
    finally:
        os.killpg(served.pid, signal.SIGTERM)
        served.wait(timeout=30)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for(url: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except OSError:
            assert process.poll() is None and time.monotonic() < deadline, "did not start"
            time.sleep(0.2)
