"""The request-body limit through a real gunicorn (sync workers), with bodies sent over a
raw socket: real chunked transfer coding, which gunicorn decodes before the app reads it,
and plain Content-Length bodies. Each kind of body is read at exactly the limit and
refused (413, nothing written) one byte over; a far larger chunked body is refused too.
Runs on SQLite and on PostgreSQL, one server for each."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from commentsvc.storage.database_urls import normalise_url
from harness.servers import Gunicorn, prepare
from sized_bodies import KINDS, send, sized

LIMIT = 1000
URL = "/api/comments/"
TOO_LARGE = {"detail": "The request body is too large."}
JSON = {"Accept": "application/json"}


class Served:
    """The service under gunicorn on a seeded database, with a staff user's token and a
    comment on a page (which staff may mark read)."""

    def __init__(self, database_url: str):
        self.url = database_url
        community = prepare(database_url, comments=20, targets=3, posters=1)
        self.auth = {"Authorization": f"Token {community.tokens[community.staff]}"}
        self.server = Gunicorn(database_url, workers=1,
                               env={"COMMENTSVC_MAX_REQUEST_BYTES": str(LIMIT)})
        self.port = self.server.port
        listed = send(self.port, "GET", URL + "?content_type=comics.comicpage", b"", JSON)
        self.comment = listed.json()["results"][0]["id"]
        page = self.query("SELECT min(id) FROM commentsvc_comicpage")[0][0]
        self.new = {"content_type": "comics.comicpage", "object_id": page, "body": "Sized"}

    def query(self, sql: str) -> list[tuple]:
        engine = sa.create_engine(normalise_url(self.url))
        try:
            with engine.connect() as conn:
                return [tuple(row) for row in conn.execute(sa.text(sql))]
        finally:
            engine.dispose()

    def rows(self) -> dict[str, list]:
        """Every row of the service's tables, to show a refusal wrote nothing."""
        return {table: sorted(self.query(f"SELECT * FROM {table}"), key=repr)
                for table in ("commentsvc_user", "commentsvc_token", "commentsvc_comicpage",
                              "commentsvc_comment", "commentsvc_list_count")}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def served(request, tmp_path_factory):
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('bodies') / 'served.sqlite3'}"
    else:
        url = request.getfixturevalue("postgres_url")
    site = Served(url)
    yield site
    site.server.stop()


def endpoint(served: Served, name: str):
    """(method, path, fields, status when read) of a write that reads a body."""
    if name == "post":
        return "POST", URL, served.new, 201
    return "PATCH", f"{URL}{served.comment}/", {"is_read": True}, 200


@pytest.mark.parametrize("chunk_size", [None, 97], ids=["length", "chunked"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", ["post", "mark-read"])
def test_exactly_the_limit_is_read_and_one_byte_more_is_413(served, name, kind, chunk_size):
    method, path, fields, accepted = endpoint(served, name)
    headers = {**served.auth, **JSON, "Content-Type": KINDS[kind]}
    before = served.rows()
    over = send(served.port, method, path, sized(kind, fields, LIMIT + 1), headers, chunk_size)
    assert (over.status, over.json()) == (413, TOO_LARGE)
    assert over.headers["content-type"] == "application/json"
    assert served.rows() == before
    at = send(served.port, method, path, sized(kind, fields, LIMIT), headers, chunk_size)
    assert at.status == accepted, at.body[:300]
    assert at.json()["is_read" if name == "mark-read" else "body"] == (
        True if name == "mark-read" else "Sized")


@pytest.mark.parametrize("kind", KINDS)
def test_a_chunked_body_a_thousand_times_the_limit_is_413(served, kind):
    before = served.rows()
    body = sized(kind, served.new, LIMIT * 1000)
    answer = send(served.port, "POST", URL, body,
                  {**served.auth, **JSON, "Content-Type": KINDS[kind]}, 4096)
    assert (answer.status, answer.json()) == (413, TOO_LARGE)
    assert served.rows() == before
