"""Signing in: keys stored as digests, the Token header's rules, the CLI that makes keys
and staff, and a host's function for its own users."""

from __future__ import annotations

import doctest
from types import SimpleNamespace

import psycopg2.extensions
import pytest
import sqlalchemy as sa

from commentsvc.storage import engine as db
from commentsvc.web import auth
from conftest import table_rows
from helpers import assert_error

URL = "/api/comments/"
POST = {"content_type": "comics.comicpage", "object_id": 10, "body": "hi"}


def stored_digests(app) -> list[str]:
    with app.app_context(), db.get_engine().connect() as conn:
        return [row[0] for row in conn.execute(sa.text("SELECT digest FROM commentsvc_token"))]


def test_only_the_digest_of_a_key_is_stored(app, community):
    digests = stored_digests(app)
    for key in community.tokens.values():
        assert key not in digests and auth.hash_key(key) in digests
        assert len(key) == 40


def test_the_key_never_reaches_the_database_only_its_digest(app, client, community):
    """The secret is never compared: the database looks up the SHA-256 of what was sent,
    an input the client cannot steer byte by byte, so how long that comparison takes tells
    nothing about any stored key (what a constant-time comparison would guard against).

    Every statement is recorded as it is sent: through SQLAlchemy, and on PostgreSQL
    through every driver cursor of connections opened from here on (the sign-in read runs
    on the connection the list reads keep, past SQLAlchemy's events)."""
    sent: list = []

    def record(_conn, _cursor, _statement, parameters, _context, _many):
        sent.append(repr(parameters))

    class Recording(psycopg2.extensions.cursor):
        def execute(self, query, vars=None):  # noqa: A002  (psycopg2's name)
            sent.append(self.mogrify(query, vars).decode())
            return super().execute(query, vars)

    def recording(dbapi_connection, _record):
        if isinstance(dbapi_connection, psycopg2.extensions.connection):
            dbapi_connection.cursor_factory = Recording

    with app.app_context():
        engine = db.get_engine()
    engine.dispose()  # the connections opened next record what they send
    sa.event.listen(engine, "before_cursor_execute", record)
    sa.event.listen(engine, "connect", recording)
    try:
        key = community.tokens["ann"]
        assert client.get(URL, headers=community.auth("ann")).status_code == 200
        almost = key[:-1] + ("1" if key.endswith("0") else "0")  # one character off
        assert client.get(URL, headers={"Authorization": "Token " + almost}).status_code == 401
    finally:
        sa.event.remove(engine, "before_cursor_execute", record)
        sa.event.remove(engine, "connect", recording)
        engine.dispose()
    assert any(auth.hash_key(key) in params for params in sent)
    assert any(auth.hash_key(almost) in params for params in sent)
    assert not any(key in params or almost in params for params in sent)
    if engine.dialect.name == "postgresql":  # the kept connection's read was recorded too
        assert any("EXECUTE commentsvc_viewer" in params for params in sent)


@pytest.mark.parametrize(("header", "detail"), [
    ("Token", "Invalid token header. No credentials provided."),
    ("Token   ", "Invalid token header. No credentials provided."),
    ("Token a b", "Invalid token header. Token string should not contain spaces."),
    ("Token " + "f" * 40, "Invalid token."),
])
def test_token_header_errors(app, client, community, header, detail):
    before = table_rows(app)
    response = client.post(URL, json=POST, headers={"Authorization": header})
    assert_error(response, 401, detail)
    assert response.headers["WWW-Authenticate"] == 'Token realm="api"'
    assert table_rows(app) == before


@pytest.mark.parametrize("scheme", ["token", "TOKEN", "Token"])
def test_the_scheme_is_case_insensitive(client, community, scheme):
    response = client.post(URL, json=POST,
                           headers={"Authorization": f"{scheme} {community.tokens['ann']}"})
    assert response.status_code == 201


def test_other_schemes_are_not_credentials(client, community):
    headers = {"Authorization": "Basic YW5uOnNlY3JldA=="}
    assert client.get(URL, headers=headers).status_code == 200
    assert_error(client.post(URL, json=POST, headers=headers), 401,
                 "Authentication credentials were not provided.")


def test_a_host_user_object_becomes_a_viewer(app):
    with app.test_request_context():
        engine = None  # no Token header: the database is not asked
        assert auth.current_viewer(_request(), engine, None) is None
        assert auth.current_viewer(_request(), engine, lambda: None) is None
        assert auth.current_viewer(_request(), engine, lambda: SimpleNamespace(
            id=4, is_authenticated=False)) is None
        assert auth.current_viewer(_request(), engine, lambda: SimpleNamespace(
            id="4", username="dee", is_staff=1)) == auth.Viewer(4, True, "dee", None)


def _request():
    from flask import request

    return request._get_current_object()


def test_a_host_user_unknown_and_without_a_name_is_403(app, community):
    with app.app_context(), db.writing(db.get_engine()) as conn:
        with pytest.raises(auth.PermissionDenied):
            auth.ensure_user(conn, auth.Viewer(77))
        auth.ensure_user(conn, auth.Viewer(1, username="renamed"))  # known: left alone
        assert conn.execute(sa.text(
            "SELECT username FROM commentsvc_user WHERE id = 1")).scalar() == "ann"


def test_cli_creates_and_revokes_keys(app, runner, community, client):
    result = runner.invoke(args=["create-token", "2"])
    assert result.exit_code == 0
    key = result.output.strip()
    headers = {"Authorization": f"Token {key}"}
    assert client.post(URL, json=POST, headers=headers).get_json()["author"] == "bob"
    assert runner.invoke(args=["revoke-token", key]).exit_code == 0
    assert_error(client.post(URL, json=POST, headers=headers), 401, "Invalid token.")
    result = runner.invoke(args=["revoke-token", key])
    assert result.exit_code == 1 and "No such key." in result.output


def test_cli_refuses_unknown_users_and_writes_nothing(app, runner, community):
    before = table_rows(app)
    for args in (["create-token", "999"], ["staff", "999"]):
        result = runner.invoke(args=args)
        assert result.exit_code == 1 and "No user has id 999." in result.output
    assert table_rows(app) == before


def test_cli_says_no_user_has_an_id_beyond_the_id_column_on_either_database(app, runner,
                                                                           community):
    """SQLite's driver cannot convert 2**63: a traceback, where PostgreSQL found no user."""
    before = table_rows(app)
    for user_id in (2**63, 10**30, 0):
        for args in (["create-token", str(user_id)], ["staff", str(user_id)],
                     ["erase-user", str(user_id)], ["rerender", "--user", str(user_id)]):
            result = runner.invoke(args=args)
            assert (result.exit_code, result.output) == (1, f"No user has id {user_id}.\n")
    assert table_rows(app) == before


def test_the_ids_docstring_examples_hold():
    """rules.identifiers.id_of_digits, which the comment URL's converter and the user
    commands share."""
    from commentsvc.rules import identifiers

    result = doctest.testmod(identifiers)
    assert result.attempted and not result.failed


def test_cli_user_ids_are_ascii_digits_as_the_apis_ids(app, runner, community):
    """int() would read each of these as a user (٥ and ５ as 5, 1_0 as 10): erase-user
    erased one. A usage error now, nothing changed; leading zeros stay allowed."""
    before = table_rows(app)
    for written in ("+1", " 1", "1 ", "١", "１", "1_0", "-1", "0x1", "1.0", ""):
        for args in (["create-token", "--", written], ["staff", "--", written],
                     ["erase-user", "--", written], ["rerender", "--user", written]):
            result = runner.invoke(args=args)
            assert result.exit_code == 2, (args, result.output)
            assert "is not a user id (digits 0 to 9 only)" in result.output
    assert table_rows(app) == before
    assert runner.invoke(args=["staff", "001"]).output == "User 1 is staff.\n"


def test_cli_grants_and_removes_staff(app, runner, client, community):
    assert client.delete("/api/comments/102/", headers=community.auth("ann")).status_code == 403
    assert runner.invoke(args=["staff", "1"]).exit_code == 0
    assert client.delete("/api/comments/102/", headers=community.auth("ann")).status_code == 204
    assert runner.invoke(args=["staff", "1", "--remove"]).exit_code == 0
    assert client.delete("/api/comments/101/", headers=community.auth("ann")).status_code == 403
