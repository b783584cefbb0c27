"""Export reads one snapshot: a comment posted during an export, by a user the export has
already passed, is left out with its author, and the file imports into an empty database."""

from __future__ import annotations

import json

import sqlalchemy as sa

from commentsvc.interchange import ndjson
from commentsvc.storage import engine, store
from conftest import COMMUNITY, insert_records


def test_a_post_during_an_export_leaves_a_file_that_imports(app, runner, tmp_path,
                                                            monkeypatch):
    insert_records(app, COMMUNITY)
    real_dump = ndjson.dump
    written = []

    def dump_with_a_post_after_the_first_line(conn):
        """The export as it is, but after its first line (the users are being read) a new
        user posts a comment from another connection."""
        for number, line in enumerate(real_dump(conn)):
            yield line
            if number == 0:
                with engine.writing(engine.get_engine()) as other:
                    other.execute(sa.text("INSERT INTO commentsvc_user (id, username) "
                                          "VALUES (50, 'newcomer')"))
                    written.append(store.add_comment(other, store.NewComment(
                        content_type="comics.comicpage", object_id=10, author_id=50,
                        body="Posted mid-export")))

    monkeypatch.setattr(ndjson, "dump", dump_with_a_post_after_the_first_line)
    out = tmp_path / "during.ndjson"
    result = runner.invoke(args=["export", str(out)])
    assert result.exit_code == 0, result.output
    assert written, "the post ran"
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").split("\n") if line]
    assert {r["id"] for r in records if r["type"] == "comment"} == {100, 101, 102, 103}
    assert 50 not in {r["id"] for r in records if r["type"] == "user"}

    with app.app_context(), engine.get_engine().begin() as conn:  # an empty database
        engine.drop_schema(conn)
        engine.create_schema(conn)
    result = runner.invoke(args=["import", str(out)])
    assert result.exit_code == 0, result.output
    assert result.stdout == "Imported 3 users, 2 comic pages, 4 comments (0 already present).\n"
