"""Deleting a comment removes its text; `erase-user` removes everything a user wrote.

Rows, positions and replies stay; the export shows both as deleted with no text, and it
imports back into an empty database as the same records.
"""

from __future__ import annotations

import doctest
import json

import sqlalchemy as sa

from commentsvc.storage import engine, erasure
from conftest import table_rows

COMMENT_ROWS = sa.text("SELECT id, body, is_deleted, site_pos, kind_pos, target_pos, parent_id "
                       "FROM commentsvc_comment ORDER BY id")


def comment_rows(app) -> dict[int, tuple]:
    with app.app_context(), engine.get_engine().connect() as conn:
        return {row.id: tuple(row) for row in conn.execute(COMMENT_ROWS)}


def user_row(app, user_id: int) -> tuple | None:
    with app.app_context(), engine.get_engine().connect() as conn:
        row = conn.execute(sa.text("SELECT username, avatar, is_staff FROM commentsvc_user "
                                   "WHERE id = :id"), {"id": user_id}).first()
        return tuple(row) if row else None


def export_records(runner, tmp_path, name: str = "export.ndjson") -> list[dict]:
    out = tmp_path / name
    result = runner.invoke(args=["export", str(out)])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in out.read_text(encoding="utf-8").split("\n") if line]


def round_trips(app, runner, tmp_path) -> None:
    """Export, import into an emptied database, export again: the same records."""
    first = export_records(runner, tmp_path, "first.ndjson")
    with app.app_context(), engine.get_engine().begin() as conn:
        engine.drop_schema(conn)
        engine.create_schema(conn)
    result = runner.invoke(args=["import", str(tmp_path / "first.ndjson")])
    assert result.exit_code == 0, result.output
    assert export_records(runner, tmp_path, "second.ndjson") == first


def test_docstring_examples_hold() -> None:
    assert doctest.testmod(erasure).failed == 0


def test_delete_removes_the_text_and_keeps_the_place(app, client, community, runner,
                                                     tmp_path):
    before = comment_rows(app)
    response = client.delete("/api/comments/100/", headers=community.auth("ann"))
    assert response.status_code == 204
    after = comment_rows(app)
    assert after[100] == (100, "", True, *before[100][3:])  # positions and thread kept
    assert {k: v for k, v in after.items() if k != 100} == {
        k: v for k, v in before.items() if k != 100}  # its reply (101) untouched
    listed = client.get("/api/comments/?content_type=comics.comicpage&object_id=10").get_json()
    root = next(entry for entry in listed["results"] if entry["id"] == 100)
    assert (root["is_deleted"], root["body"], [r["id"] for r in root["replies"]]) == (
        True, "", [101])
    exported = {r["id"]: r for r in export_records(runner, tmp_path) if r["type"] == "comment"}
    assert (exported[100]["is_deleted"], exported[100]["body"]) == (True, "")
    round_trips(app, runner, tmp_path)


def test_init_db_blanks_comments_deleted_before(app, community, runner):
    assert comment_rows(app)[103][1:3] == ("gone", True)  # deleted while text was kept
    result = runner.invoke(args=["init-db"])
    assert result.exit_code == 0, result.output
    assert result.output == ("Removed the text of 1 deleted comment(s).\n"
                             "Database schema ready.\n")
    assert comment_rows(app)[103][1:3] == ("", True)
    assert runner.invoke(args=["init-db"]).output == "Database schema ready.\n"


def test_erase_user_removes_texts_profile_and_keys(app, client, community, runner, tmp_path):
    before = comment_rows(app)
    etag = client.get("/api/comments/").headers["ETag"]
    result = runner.invoke(args=["erase-user", "2"])
    assert result.exit_code == 0, result.output
    assert result.output == ("User 2 erased: 3 comment(s) blanked, 1 key(s) revoked, "
                             "shown as 'erased-user-2'.\n")
    after = comment_rows(app)
    for comment_id in (101, 102, 103):  # bob's: a reply, a root, an already deleted one
        assert after[comment_id] == (comment_id, "", True, *before[comment_id][3:])
    assert after[100] == before[100]  # ann's, with bob's reply still under it
    assert user_row(app, 2) == ("erased-user-2", None, False)
    assert user_row(app, 1) == ("ann", None, False)

    listed = client.get("/api/comments/")
    assert listed.headers["ETag"] != etag
    shown = {entry["id"]: entry for entry in listed.get_json()["results"]}
    assert (shown[102]["is_deleted"], shown[102]["body"], shown[102]["author"]) == (
        True, "", "erased-user-2")
    assert shown[102]["author_avatar"] == "/static/img/default-avatar.png"
    assert client.delete("/api/comments/100/", headers=community.auth("bob")).status_code == 401
    exported = export_records(runner, tmp_path)
    assert {r["id"]: (r["is_deleted"], r["body"]) for r in exported
            if r["type"] == "comment" and r["author_id"] == 2} == {
        101: (True, ""), 102: (True, ""), 103: (True, "")}
    assert {"type": "user", "id": 2, "username": "erased-user-2", "avatar": None} in exported
    round_trips(app, runner, tmp_path)


def test_erasing_twice_changes_nothing_more(app, community, runner):
    assert runner.invoke(args=["erase-user", "2"]).exit_code == 0
    before = table_rows(app)
    result = runner.invoke(args=["erase-user", "2"])
    assert result.output == ("User 2 erased: 0 comment(s) blanked, 0 key(s) revoked, "
                             "shown as 'erased-user-2'.\n")
    assert table_rows(app) == before


def test_an_erased_users_name_is_one_no_other_user_has(app, community, runner):
    """OPERATIONS.md: "neutral, unique". Another user may already be named after the
    placeholder (an import, a host site's own users): the erased one's gets a number."""
    with app.app_context(), engine.get_engine().begin() as conn:
        conn.execute(sa.text("UPDATE commentsvc_user SET username = 'erased-user-2' "
                             "WHERE id = 3"))
    result = runner.invoke(args=["erase-user", "2"])
    assert result.exit_code == 0, result.output
    assert result.output.endswith("shown as 'erased-user-2-2'.\n")
    assert user_row(app, 2)[0] == "erased-user-2-2"
    assert user_row(app, 3)[0] == "erased-user-2"
    before = table_rows(app)
    again = runner.invoke(args=["erase-user", "2"])  # the same name again: nothing changes
    assert again.output.endswith("shown as 'erased-user-2-2'.\n")
    assert table_rows(app) == before
    with app.app_context(), engine.get_engine().begin() as conn:  # the first name freed
        conn.execute(sa.text("UPDATE commentsvc_user SET username = 'bea' WHERE id = 3"))
    before = table_rows(app)
    again = runner.invoke(args=["erase-user", "2"])  # still nothing changes
    assert again.output.endswith("shown as 'erased-user-2-2'.\n")
    assert table_rows(app) == before


def test_erase_unknown_user_changes_nothing(app, community, runner):
    before = table_rows(app)
    result = runner.invoke(args=["erase-user", "99"])
    assert result.exit_code == 1
    assert result.stderr == "No user has id 99.\n"
    assert table_rows(app) == before
