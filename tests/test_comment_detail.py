"""/api/comments/<id>/: show one comment, mark it read, soft-delete it; and the can_* fields
that tell each signed-in user what they may do."""

from __future__ import annotations

import pytest

from conftest import table_rows
from helpers import assert_error

DETAIL_ALLOW = "GET, PATCH, DELETE, HEAD, OPTIONS"
TARGET_LIST = "/api/comments/?content_type=comics.comicpage&object_id=10"


def url(comment_id) -> str:
    return f"/api/comments/{comment_id}/"


def entry(client, comment_id: int, headers=None) -> dict:
    """The comment as the list of its target shows it (roots and replies alike)."""
    for comment in client.get(TARGET_LIST, headers=headers or {}).get_json()["results"]:
        if comment["id"] == comment_id:
            return comment
    raise AssertionError(f"{comment_id} is not listed")


def test_get_shows_the_comment_as_its_list_does(client, community):
    response = client.get(url(100))
    assert response.status_code == 200
    assert response.headers["Allow"] == DETAIL_ALLOW
    assert response.headers["Vary"] == "Accept"
    assert response.get_json() == entry(client, 100)
    assert [r["id"] for r in response.get_json()["replies"]] == [101]
    assert client.get(url(101)).get_json()["replies"] is None


def test_get_shows_a_deleted_comment_without_its_text(client, community):
    assert client.get(url(103)).get_json()["body"] == ""


@pytest.mark.parametrize("path", [url(999), url(0), url(2**63), "/api/comments/-1/",
                                  "/api/comments/abc/"])
def test_no_such_comment_is_404(client, community, path):
    response = client.get(path)
    assert response.status_code == 404
    assert response.get_json() == {"detail": "Not found."}


# Other scripts' digits for 100 (fullwidth, Arabic-Indic, Devanagari), raw and encoded:
# Python's int() and Werkzeug's int converter read them as 100.
OTHER_DIGITS = ["\uff11\uff10\uff10", "\u0661\u0660\u0660", "\u0967\u0966\u0966",
                "%EF%BC%91%EF%BC%90%EF%BC%90", "1\u0660\u0660"]


@pytest.mark.parametrize("digits", OTHER_DIGITS)
def test_an_id_in_other_digits_names_no_comment(client, community, digits):
    before = table_rows(client.application)
    for method in ("get", "patch", "delete", "options"):
        response = getattr(client, method)(url(digits), headers=community.auth("ann"),
                                           json={"is_read": True} if method == "patch" else None)
        assert response.status_code == 404, method
        assert response.get_json() == {"detail": "Not found."}
    assert table_rows(client.application) == before
    assert client.get(url(100)).status_code == 200  # the same id in ASCII digits


@pytest.mark.parametrize("comment_id", [100, 99999])  # a comment's id, and one of none
def test_options_describes_the_comment_endpoint(client, community, comment_id):
    response = client.options(url(comment_id))
    assert response.status_code == 200
    assert response.headers["Allow"] == DETAIL_ALLOW
    assert response.get_json()["name"] == "Comment"


def test_post_and_put_on_a_comment_are_405(client, community):
    response = client.put(url(100), json={})
    assert response.status_code == 405
    assert response.headers["Allow"] == DETAIL_ALLOW
    assert response.get_json() == {"detail": 'Method "PUT" not allowed.'}


# --- DELETE ---------------------------------------------------------------------------

def test_the_author_deletes_their_comment(app, client, community):
    response = client.delete(url(100), headers=community.auth("ann"))
    assert response.status_code == 204 and response.data == b""
    shown = entry(client, 100)
    assert shown["is_deleted"] is True and shown["body"] == ""
    assert [r["id"] for r in shown["replies"]] == [101]  # it keeps its place and replies


def test_staff_delete_anyones_comment(client, community):
    assert client.delete(url(102), headers=community.auth("carol")).status_code == 204
    assert client.get(url(102)).get_json()["is_deleted"] is True


def test_others_get_403_and_nothing_changes(app, client, community):
    before = table_rows(app)
    assert_error(client.delete(url(100), headers=community.auth("bob")), 403,
                 "You do not have permission to perform this action.", allow=DETAIL_ALLOW)
    assert table_rows(app) == before


def test_delete_without_credentials_is_401(app, client, community):
    before = table_rows(app)
    response = client.delete(url(100))
    assert_error(response, 401, "Authentication credentials were not provided.",
                 allow=DETAIL_ALLOW)
    assert response.headers["WWW-Authenticate"] == 'Token realm="api"'
    assert table_rows(app) == before


def test_deleting_twice_is_still_204(client, community):
    assert client.delete(url(103), headers=community.auth("bob")).status_code == 204


def test_deleting_a_missing_comment_is_404(client, community):
    assert_error(client.delete(url(999), headers=community.auth("carol")), 404, "Not found.",
                 allow=DETAIL_ALLOW)


def test_a_delete_changes_the_lists_etag(client, community):
    before = client.get(TARGET_LIST).headers["ETag"]
    client.delete(url(100), headers=community.auth("ann"))
    after = client.get(TARGET_LIST, headers={"If-None-Match": before})
    assert after.status_code == 200 and after.headers["ETag"] != before


# --- PATCH is_read ----------------------------------------------------------------------

def test_the_profile_owner_marks_a_comment_read_and_unread(client, community):
    response = client.patch(url(102), json={"is_read": True}, headers=community.auth("ann"))
    assert response.status_code == 200
    assert response.headers["Allow"] == DETAIL_ALLOW
    assert response.get_json()["is_read"] is True
    assert client.get(url(102)).get_json()["is_read"] is True
    response = client.patch(url(102), data={"is_read": "false"}, headers=community.auth("ann"))
    assert response.get_json()["is_read"] is False


def test_staff_mark_comic_page_comments_read(client, community):
    response = client.patch(url(100), json={"is_read": True}, headers=community.auth("carol"))
    assert response.status_code == 200 and response.get_json()["is_read"] is True


@pytest.mark.parametrize(("name", "comment_id"), [
    ("bob", 102),    # the author of a comment on ann's profile is not its owner
    ("carol", 102),  # staff do not own a user's profile
    ("ann", 100),    # comic pages belong to the site: staff only
])
def test_anyone_else_marking_read_is_403(app, client, community, name, comment_id):
    before = table_rows(app)
    response = client.patch(url(comment_id), json={"is_read": True},
                            headers=community.auth(name))
    assert_error(response, 403, "You do not have permission to perform this action.",
                 allow=DETAIL_ALLOW)
    assert table_rows(app) == before


@pytest.mark.parametrize(("fields", "errors"), [
    ({}, {"is_read": ["This field is required."]}),
    ({"is_read": "maybe"}, {"is_read": ["Must be a valid boolean."]}),
    ({"is_read": True, "body": "edited"}, {"body": ["This field cannot be changed."]}),
    ({"body": "edited"}, {"is_read": ["This field is required."]}),
])
def test_bad_patches_are_400_and_write_nothing(app, client, community, fields, errors):
    before = table_rows(app)
    response = client.patch(url(102), json=fields, headers=community.auth("ann"))
    assert_error(response, 400, errors, allow=DETAIL_ALLOW)
    assert table_rows(app) == before


# --- can_delete and can_reply ------------------------------------------------------------

def flags(client, headers=None) -> dict[int, tuple[bool, bool]]:
    found = {}
    for comment in client.get(TARGET_LIST, headers=headers or {}).get_json()["results"]:
        for shown in [comment, *(comment["replies"] or [])]:
            found[shown["id"]] = (shown["can_delete"], shown["can_reply"])
    return found


def test_without_a_user_nothing_may_be_done(client, community):
    assert set(flags(client).values()) == {(False, False)}


def test_a_user_may_delete_their_own_and_reply_to_what_is_not_deleted(client, community):
    assert flags(client, community.auth("bob")) == {
        100: (False, True), 101: (True, True), 103: (True, False)}


def test_staff_may_delete_everything(client, community):
    assert flags(client, community.auth("carol")) == {
        100: (True, True), 101: (True, True), 103: (True, False)}


def test_each_viewer_gets_their_own_tag_and_a_private_response(client, community):
    anonymous = client.get(TARGET_LIST)
    bob = client.get(TARGET_LIST, headers=community.auth("bob"))
    carol = client.get(TARGET_LIST, headers=community.auth("carol"))
    assert len({anonymous.headers["ETag"], bob.headers["ETag"], carol.headers["ETag"]}) == 3
    assert not anonymous.headers["Cache-Control"].startswith("private")
    assert bob.headers["Cache-Control"] == "private, max-age=0, must-revalidate"
    assert bob.headers["Vary"] == "Accept"
    again = client.get(TARGET_LIST, headers={**community.auth("bob"),
                                             "If-None-Match": anonymous.headers["ETag"]})
    assert again.status_code == 200 and again.get_json() == bob.get_json()
