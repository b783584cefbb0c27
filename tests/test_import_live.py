"""An import onto a live service: readers keep being served, writers get 503 at once.

The import is a real `flask import`; once it has merged its rows (it holds the writers'
lock and its uncommitted writes), the test reads and writes through the API.
"""

from __future__ import annotations

import json

import pytest

from commentsvc.storage import bulk_lock, store
from commentsvc.storage import engine as db
from conftest import COMMUNITY

NEW = [{"type": "user", "id": 40, "username": "dee", "avatar": None}] + [
    {"type": "comment", "id": 400 + n, "content_type": "comics.comicpage", "object_id": 10,
     "parent_id": None, "author_id": 40, "body": f"imported {n}",
     "date_added": f"2023-06-01T10:{n:02d}:00Z", "is_deleted": False,
     "is_anonymous": False, "is_read": False} for n in range(20)]
PAUSED = {"detail": "An import is in progress; writes resume when it ends. "
                    "Try again shortly."}


def test_reads_go_on_and_writes_answer_503_during_an_import(app, client, community, runner,
                                                            tmp_path, monkeypatch):
    path = tmp_path / "new.ndjson"
    path.write_text("".join(json.dumps(record) + "\n" for record in NEW), encoding="utf-8")
    listed_before = client.get("/api/comments/").get_json()
    seen = {}
    real_renumber = store.renumber

    def renumber_then_use_the_api(conn):
        real_renumber(conn)
        seen["list"] = client.get("/api/comments/")
        seen["detail"] = client.get("/api/comments/100/")
        seen["post"] = client.post("/api/comments/", headers=community.auth("ann"), json={
            "content_type": "comics.comicpage", "object_id": 10, "body": "During"})
        seen["delete"] = client.delete("/api/comments/102/", headers=community.auth("bob"))

    monkeypatch.setattr(store, "renumber", renumber_then_use_the_api)
    result = runner.invoke(args=["import", str(path)])
    assert result.exit_code == 0, result.output
    # Readers: the data as it was before the import, served as usual.
    assert seen["list"].status_code == 200
    assert seen["list"].get_json() == listed_before
    assert seen["detail"].status_code == 200
    # Writers: refused without being attempted, with a time to come back.
    for name in ("post", "delete"):
        response = seen[name]
        assert response.status_code == 503, (name, response.get_data(as_text=True))
        assert response.get_json() == PAUSED
        assert response.headers["Retry-After"] == "5"
    # After the import: its rows, none of the refused writes, and writing works again.
    after = client.get("/api/comments/?page_size=100").get_json()["results"]
    assert len(after) == len(COMMUNITY) - 5 + 20  # the community's 4 comments, and 20
    assert "During" not in json.dumps(after)
    assert client.post("/api/comments/", headers=community.auth("ann"), json={
        "content_type": "comics.comicpage", "object_id": 10, "body": "After"}).status_code == 201


def test_the_flag_is_up_only_while_a_bulk_writer_holds_it(app):
    with app.app_context():
        engine = db.get_engine()
        with db.writing(engine, bulk=True):
            with pytest.raises(bulk_lock.WritesPaused), db.writing(engine):
                pass
        with db.writing(engine) as conn:
            assert conn.exec_driver_sql("SELECT 1").scalar() == 1


def test_a_command_that_meets_an_import_says_so_in_one_line(app, community, runner):
    """create-token, staff, erase-user...: while an import holds the writers' lock they
    stop at once with one line and change nothing (no traceback, no wait)."""
    with app.app_context():
        with db.writing(db.get_engine(), bulk=True):
            for args in (["create-token", "1"], ["staff", "2"], ["erase-user", "2"]):
                result = runner.invoke(args=args)
                assert result.exit_code == 1, (args, result.output)
                assert result.output == (f"Error: {PAUSED['detail']} (the command changed "
                                         "nothing)\n"), args
                assert result.exception is not None and "Traceback" not in result.output
    assert runner.invoke(args=["create-token", "1"]).exit_code == 0  # after it, as usual
