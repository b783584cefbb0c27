"""Sign-in keys a process knows (web.known_keys): a post by a known key is not read first,
its batch confirms the key, and a revoked key is refused with the same 401 as ever, at
its next write, whatever else is wrong with the request."""

from __future__ import annotations

import pytest
from test_write_batches import request_of, write_batch

from commentsvc.storage import engine as db
from commentsvc.web import auth, known_keys, write_batches
from commentsvc.web.known_keys import KnownKeys
from conftest import table_rows
from helpers import assert_error

URL = "/api/comments/"
POST = {"content_type": "comics.comicpage", "object_id": 10, "body": "hi"}
ANN = auth.Viewer(1, username="ann")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_known_key_gives_its_viewer_unconfirmed_until_its_time_is_up():
    clock = Clock()
    known = KnownKeys(ttl=60, clock=clock)
    assert known.get("d1") is None
    known.keep("d1", ANN)
    assert known.get("d1") == auth.Viewer(1, username="ann", unconfirmed_key="d1")
    clock.now += 59.9
    assert known.get("d1") is not None
    clock.now += 0.1
    assert known.get("d1") is None and len(known) == 0


def test_known_keys_are_bounded_the_oldest_forgotten_first():
    known = KnownKeys(size=2)
    for digest in ("d1", "d2", "d3"):
        known.keep(digest, ANN)
    assert known.get("d1") is None
    assert known.get("d2") is not None and known.get("d3") is not None
    known.forget("d2")
    assert known.get("d2") is None and len(known) == 1


def reads_of_keys(monkeypatch) -> list[str]:
    """The key digests read from the database from now on."""
    digests: list[str] = []
    real = auth.viewer_by_digest

    def counted(engine, digest):
        digests.append(digest)
        return real(engine, digest)

    monkeypatch.setattr(auth, "viewer_by_digest", counted)
    return digests


def revoke(app, key: str) -> None:
    with app.app_context(), db.writing(db.get_engine()) as conn:
        assert auth.revoke_token(conn, key)


def test_a_second_post_by_a_key_does_not_read_the_key_first(app, client, community,
                                                            monkeypatch):
    reads = reads_of_keys(monkeypatch)
    first = client.post(URL, json=POST, headers=community.auth("ann"))
    second = client.post(URL, json={**POST, "body": "again"}, headers=community.auth("ann"))
    assert (first.status_code, second.status_code) == (201, 201)
    assert second.get_json()["author"] == "ann" and second.get_json()["can_delete"] is True
    assert reads == [auth.hash_key(community.tokens["ann"])]
    # reads still read the key every time
    client.get(URL, headers=community.auth("ann"))
    assert len(reads) == 2


def test_a_key_revoked_after_it_was_known_is_refused_at_its_next_post(app, client, community,
                                                                      monkeypatch):
    key = community.tokens["ann"]
    assert client.post(URL, json=POST, headers=community.auth("ann")).status_code == 201
    revoke(app, key)
    before = table_rows(app)
    response = client.post(URL, json=POST, headers=community.auth("ann"))
    assert_error(response, 401, "Invalid token.")
    assert response.headers["WWW-Authenticate"] == auth.CHALLENGE
    assert table_rows(app) == before
    assert known_keys.of(app).get(auth.hash_key(key)) is None


@pytest.mark.parametrize("body", [{"content_type": "comics.comicpage", "object_id": 10},
                                  {**POST, "object_id": 999}])
def test_a_revoked_known_key_is_401_before_any_other_refusal(app, client, community, body):
    """A missing field (refused before the batch) and a missing page (in the batch)."""
    assert client.post(URL, json=POST, headers=community.auth("ann")).status_code == 201
    revoke(app, community.tokens["ann"])
    response = client.post(URL, json=body, headers=community.auth("ann"))
    assert_error(response, 401, "Invalid token.")


def test_a_known_key_still_kept_gets_the_refusal_it_earned(app, client, community):
    assert client.post(URL, json=POST, headers=community.auth("ann")).status_code == 201
    response = client.post(URL, json={**POST, "object_id": 999}, headers=community.auth("ann"))
    assert_error(response, 400, {"object_id": ['Invalid pk "999" - object does not exist.']})


def test_a_post_with_an_idempotency_key_reads_its_sign_in_key_first(app, client, community,
                                                                    monkeypatch):
    """A replay is found before the batch reads its facts, so the key is read before."""
    headers = {**community.auth("ann"), "Idempotency-Key": "k-1"}
    assert client.post(URL, json=POST, headers=community.auth("ann")).status_code == 201
    reads = reads_of_keys(monkeypatch)
    assert client.post(URL, json=POST, headers=headers).status_code == 201
    assert len(reads) == 1
    revoke(app, community.tokens["ann"])
    assert_error(client.post(URL, json=POST, headers=headers), 401, "Invalid token.")


def test_a_form_post_reads_its_sign_in_key_first(app, client, community, monkeypatch):
    """A form may name its Idempotency-Key in a field."""
    assert client.post(URL, json=POST, headers=community.auth("ann")).status_code == 201
    reads = reads_of_keys(monkeypatch)
    response = client.post(URL, data=POST, headers={**community.auth("ann"),
                                                    "Accept": "application/json"})
    assert response.status_code == 201 and len(reads) == 1


def test_a_batch_refuses_only_the_post_whose_key_was_revoked(app, community):
    ann_key = auth.hash_key(community.tokens["ann"])
    bob_key = auth.hash_key(community.tokens["bob"])
    revoke(app, community.tokens["ann"])
    outcomes = write_batch(app, lambda: [
        request_of(auth.Viewer(1, username="ann", unconfirmed_key=ann_key), body="revoked"),
        request_of(auth.Viewer(2, username="bob", unconfirmed_key=bob_key), body="kept"),
        request_of(auth.Viewer(1, username="ann", unconfirmed_key=bob_key), body="not hers"),
    ])
    assert isinstance(outcomes[0], auth.AuthenticationFailed)
    assert isinstance(outcomes[1], write_batches.Posted)
    assert outcomes[1].comment.body == "kept"
    assert isinstance(outcomes[2], auth.AuthenticationFailed)
