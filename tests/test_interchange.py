"""`flask import` / `flask export` through the CLI runner, on SQLite and PostgreSQL.

Every rejection is one row of a table; after each, a full export shows the database
unchanged. Positions are checked against an independent Python sort.
"""

from __future__ import annotations

import doctest
import json
import random
import uuid
from collections import defaultdict
from pathlib import Path

import pytest
import sqlalchemy as sa

from commentsvc.interchange import copy_rows, ndjson
from commentsvc.storage import engine
from conftest import insert_records, read_ndjson, sample_path

# --- helpers -----------------------------------------------------------------------------


def user(id: int, username: str = "someone", avatar: str | None = None) -> dict:
    return {"type": "user", "id": id, "username": username, "avatar": avatar}


def page(id: int, title: str = "A page") -> dict:
    return {"type": "comicpage", "id": id, "title": title}


def comment(id: int, *, content_type: str = "comics.comicpage", object_id: int = 10,
            parent_id: int | None = None, author_id: int = 1, body: str = "Hi",
            date_added: str = "2024-03-05T14:07:00Z", is_deleted: bool = False,
            is_anonymous: bool = False, is_read: bool = False, **extra) -> dict:
    """A comment record with the contract's key order; ``extra`` keys go last."""
    return {"type": "comment", "id": id, "content_type": content_type,
            "object_id": object_id, "parent_id": parent_id, "author_id": author_id,
            "body": body, "date_added": date_added, "is_deleted": is_deleted,
            "is_anonymous": is_anonymous, "is_read": is_read, **extra}


def line(record: dict) -> str:
    return json.dumps(record, ensure_ascii=False)


def write(tmp_path: Path, lines: list[str | bytes | dict]) -> Path:
    """An NDJSON file of these lines (dicts are serialised, bytes written as they are)."""
    path = tmp_path / f"import-{uuid.uuid4().hex[:8]}.ndjson"
    data = b"".join((item if isinstance(item, bytes)
                     else (line(item) if isinstance(item, dict) else item).encode())
                    + b"\n" for item in lines)
    path.write_bytes(data)
    return path


def invoke(runner, args: list[str]):
    """Run a CLI command as `flask` would (the commands push the app context themselves)."""
    return runner.invoke(args=args)


def import_file(runner, path: Path):
    return invoke(runner, ["import", str(path)])


def export_text(runner, tmp_path: Path) -> str:
    out = tmp_path / f"export-{uuid.uuid4().hex[:8]}.ndjson"
    result = invoke(runner, ["export", str(out)])
    assert result.exit_code == 0, result.output
    return out.read_text(encoding="utf-8")


def export_records(runner, tmp_path: Path) -> list[dict]:
    """The export parsed; split on "\\n" only, as NDJSON readers do."""
    text = export_text(runner, tmp_path)
    assert text == "" or text.endswith("\n")
    return [json.loads(item) for item in text.split("\n") if item]


def canonical(records: list[dict]) -> list[str]:
    """Records as comparable strings, in no particular order."""
    return sorted(json.dumps(record, sort_keys=True, ensure_ascii=False) for record in records)


def counts(app) -> dict[str, int]:
    with app.app_context(), engine.get_engine().connect() as conn:
        return {table: conn.execute(sa.text(f"SELECT COUNT(*) FROM {table}")).scalar()
                for table in ("commentsvc_user", "commentsvc_comicpage", "commentsvc_comment",
                              "commentsvc_list_count")}


def assert_positions(app) -> None:
    """Each list's positions are 1..n in (date_added, id) order, and its count is n."""
    query = sa.text("""
        SELECT id, content_type, object_id, date_added, site_pos, kind_pos, target_pos
        FROM commentsvc_comment
    """).columns(date_added=sa.DateTime())
    with app.app_context(), engine.get_engine().connect() as conn:
        rows = conn.execute(query).all()
        stored_counts = dict(conn.execute(
            sa.text("SELECT list_key, n FROM commentsvc_list_count")).all())
    lists: dict[str, list[tuple]] = defaultdict(list)
    for row in rows:
        lists["site"].append((row.date_added, row.id, row.site_pos))
        lists[f"kind:{row.content_type}"].append((row.date_added, row.id, row.kind_pos))
        lists[f"target:{row.content_type}:{row.object_id}"].append(
            (row.date_added, row.id, row.target_pos))
    for key, entries in lists.items():
        in_order = [position for _, _, position in sorted(entries)]
        assert in_order == list(range(1, len(entries) + 1)), key
    assert stored_counts == {key: len(entries) for key, entries in lists.items()}


def without_deleted_text(records: list[dict]) -> list[dict]:
    """The records as stored: a deleted comment keeps no text."""
    return [{**record, "body": ""} if record.get("is_deleted") else record
            for record in records]


def test_docstring_examples_hold() -> None:
    result = doctest.testmod(ndjson)
    assert result.attempted > 0
    assert result.failed == 0


# --- the sample ----------------------------------------------------------------------------


def test_sample_round_trip(app, runner, tmp_path):
    result = import_file(runner, sample_path())
    assert result.exit_code == 0, result.output
    assert result.stdout == "Imported 12 users, 4 comic pages, 60 comments (0 already present).\n"
    exported = export_records(runner, tmp_path)
    assert canonical(exported) == canonical(
        without_deleted_text(read_ndjson(sample_path())))
    # Users, then pages, then comments, each in id order, keys in the contract's order.
    kinds = [record["type"] for record in exported]
    assert kinds == sorted(kinds, key=["user", "comicpage", "comment"].index)
    for kind in ("user", "comicpage", "comment"):
        ids = [record["id"] for record in exported if record["type"] == kind]
        assert ids == sorted(ids)
    assert [list(record) for record in exported[:1] + exported[-1:]] == [
        ["type", "id", "username", "avatar"],
        ["type", "id", "content_type", "object_id", "parent_id", "author_id", "body",
         "date_added", "is_deleted", "is_anonymous", "is_read"],
    ]
    assert_positions(app)


def test_export_is_written_like_the_sample(app, runner, tmp_path):
    insert_records(app, read_ndjson(sample_path()))
    text = export_text(runner, tmp_path)
    sample_lines = sample_path().read_text(encoding="utf-8").splitlines()
    # Byte for byte the sample's own lines: separators, non-ASCII as itself, Z dates; a
    # deleted comment's text is never exported, even from a row that still holds it.
    expected = {ndjson._line({**json.loads(text_line), "body": ""}).rstrip("\n")
                if json.loads(text_line).get("is_deleted") else text_line
                for text_line in sample_lines}
    assert set(text.splitlines()) == expected


def test_importing_twice_changes_nothing(app, runner, tmp_path):
    assert import_file(runner, sample_path()).exit_code == 0
    before, exported = counts(app), export_text(runner, tmp_path)
    result = import_file(runner, sample_path())
    assert result.exit_code == 0, result.output
    assert result.stdout == "Imported 0 users, 0 comic pages, 0 comments (76 already present).\n"
    assert counts(app) == before
    assert export_text(runner, tmp_path) == exported


def test_importing_the_export_changes_nothing(app, runner, tmp_path):
    assert import_file(runner, sample_path()).exit_code == 0
    exported = tmp_path / "again.ndjson"
    exported.write_text(export_text(runner, tmp_path), encoding="utf-8")
    result = import_file(runner, exported)
    assert result.stdout.startswith("Imported 0 users, 0 comic pages, 0 comments")


@pytest.mark.parametrize("order", ["reversed", "shuffled"])
def test_records_in_any_order(app, runner, tmp_path, order):
    records = read_ndjson(sample_path())
    if order == "reversed":
        records.reverse()
    else:
        random.Random(7).shuffle(records)
    result = import_file(runner, write(tmp_path, records))
    assert result.exit_code == 0, result.output
    assert canonical(export_records(runner, tmp_path)) == canonical(
        without_deleted_text(read_ndjson(sample_path())))
    assert_positions(app)


def test_identical_duplicates_are_one_record(app, runner, tmp_path):
    records = read_ndjson(sample_path())
    result = import_file(runner, write(tmp_path, records + records[::-1]))
    assert result.stdout == "Imported 12 users, 4 comic pages, 60 comments (0 already present).\n"
    assert canonical(export_records(runner, tmp_path)) == canonical(without_deleted_text(records))


def test_many_small_batches(app, runner, tmp_path, monkeypatch):
    """Batch boundaries (and several COPYs per table) lose and duplicate nothing."""
    monkeypatch.setattr(ndjson, "BATCH_SIZE", 7)
    result = import_file(runner, sample_path())
    assert result.exit_code == 0, result.output
    assert canonical(export_records(runner, tmp_path)) == canonical(
        without_deleted_text(read_ndjson(sample_path())))
    assert_positions(app)


@pytest.mark.parametrize("workers", [1, 2])
def test_chunks_on_worker_processes_load_the_same(app, runner, tmp_path, monkeypatch, workers):
    """Chunk boundaries and worker processes lose, duplicate and reorder nothing: the
    result is the file's records, numbered as one process numbers them."""
    monkeypatch.setattr(ndjson, "CHUNK_LINES", 5)
    records = read_ndjson(sample_path())
    random.Random(3).shuffle(records)  # replies before their roots, users after comments
    result = invoke(runner, ["import", "--workers", str(workers), str(write(tmp_path, records))])
    assert result.exit_code == 0, result.output
    assert result.stdout == "Imported 12 users, 4 comic pages, 60 comments (0 already present).\n"
    assert canonical(export_records(runner, tmp_path)) == canonical(without_deleted_text(records))
    assert_positions(app)


@pytest.mark.parametrize(("bad", "words"), [
    (b'{"type": "user", "id": 7, "username": "x"', "invalid JSON"),
    (b'{"type": "user", "id": 7, "username": "\xff", "avatar": null}', "invalid UTF-8"),
    (line(comment(500, date_added="2024-03-05T14:07:00")), "time zone"),
])
def test_worker_processes_report_the_first_bad_line(app, runner, tmp_path, monkeypatch,
                                                    bad, words):
    """With chunks parsed out of order on two processes, the earliest bad line is the one
    reported, and nothing is written."""
    monkeypatch.setattr(ndjson, "CHUNK_LINES", 4)
    insert_records(app, BASE)
    before = export_text(runner, tmp_path)
    good = [user(1000 + n, f"user {n}") for n in range(40)]
    later_bad = b'{"type": "user", "id": 9999}'  # missing fields, in a later chunk
    lines = [*good[:17], bad, *good[17:30], later_bad, *good[30:]]
    result = invoke(runner, ["import", "--workers", "2", str(write(tmp_path, lines))])
    assert result.exit_code == 1
    assert result.stderr.startswith("Import failed: line 18: "), result.stderr
    assert words in result.stderr
    assert export_text(runner, tmp_path) == before


def test_import_onto_existing_data_renumbers(app, runner, tmp_path):
    insert_records(app, BASE)
    result = import_file(runner, sample_path())
    assert result.exit_code == 0, result.output
    assert canonical(export_records(runner, tmp_path)) == canonical(
        without_deleted_text(BASE + read_ndjson(sample_path())))
    assert_positions(app)


def test_empty_file(app, runner, tmp_path):
    result = import_file(runner, write(tmp_path, []))
    assert result.stdout == "Imported 0 users, 0 comic pages, 0 comments (0 already present).\n"
    assert export_text(runner, tmp_path) == ""


# --- what is stored ------------------------------------------------------------------------


def test_reply_to_a_reply_is_stored_under_the_root(app, runner, tmp_path):
    insert_records(app, BASE)
    records = [
        comment(303, parent_id=302, date_added="2024-03-05T14:10:00Z"),
        comment(302, parent_id=301, date_added="2024-03-05T14:09:00Z"),
        comment(301, parent_id=300, date_added="2024-03-05T14:08:00Z"),
        comment(300),
        comment(304, parent_id=101),  # 101 is a stored reply to 100
    ]
    path = write(tmp_path, records)
    result = import_file(runner, path)
    assert result.exit_code == 0, result.output
    parents = {r["id"]: r["parent_id"] for r in export_records(runner, tmp_path)
               if r["type"] == "comment"}
    assert {id: parents[id] for id in (300, 301, 302, 303, 304)} == {
        300: None, 301: 300, 302: 300, 303: 300, 304: 100}
    again = import_file(runner, path)  # the flattened rows count as the same records
    assert again.stdout == "Imported 0 users, 0 comic pages, 0 comments (5 already present).\n"
    assert_positions(app)


NASTY_BODIES = ["\\N", " \\ ", "\\.", "tab\there", "back\\slash\\t", "cr\rlf\r\nlf\n",
                "NUL-free \x01\x1f controls", "U+2028\u2028U+2029\u2029NEL\x85",
                "emoji 🎉 ümlaut", "quote \" and ' and <b>"]


def test_nasty_strings_round_trip(app, runner, tmp_path):
    records = [user(1, "Tab\tName", ""), user(2, " ", None), user(3, "\\N", "\\N"), page(10, "")]
    records += [comment(20 + k, body=body, author_id=1 + k % 3)
                for k, body in enumerate(NASTY_BODIES)]
    result = import_file(runner, write(tmp_path, records))
    assert result.exit_code == 0, result.output
    text = export_text(runner, tmp_path)
    # One record per "\n"-line, and splitlines() (which also splits on U+2028) agrees.
    assert len(text.splitlines()) == len(text.split("\n")) - 1 == len(records)
    assert canonical(export_records(runner, tmp_path)) == canonical(records)


@pytest.mark.parametrize(("given", "stored"), [
    ("2024-03-05T15:07:00+01:00", "2024-03-05T14:07:00Z"),
    ("2024-03-05T09:07:00-05:00", "2024-03-05T14:07:00Z"),
    ("2024-03-05T14:07:00.250000Z", "2024-03-05T14:07:00.250000Z"),
    ("2024-03-05T14:07:00.000000+00:00", "2024-03-05T14:07:00Z"),
    ("2024-03-06T00:30:00+10:30", "2024-03-05T14:00:00Z"),
])
def test_dates_are_stored_in_utc(app, runner, tmp_path, given, stored):
    insert_records(app, BASE)
    result = import_file(runner, write(tmp_path, [comment(200, date_added=given)]))
    assert result.exit_code == 0, result.output
    (record,) = [r for r in export_records(runner, tmp_path) if r["id"] == 200]
    assert record["date_added"] == stored


def test_byte_order_mark_and_crlf_are_accepted(app, runner, tmp_path):
    records = [user(1), page(10), comment(20)]
    path = tmp_path / "windows.ndjson"
    path.write_bytes(b"\xef\xbb\xbf" + b"".join(line(r).encode() + b"\r\n" for r in records))
    result = import_file(runner, path)
    assert result.exit_code == 0, result.output
    assert canonical(export_records(runner, tmp_path)) == canonical(records)


def test_other_configured_content_types_are_not_checked_for_existence(app_factory, tmp_path):
    app = app_factory(COMMENTSVC_CONTENT_TYPES="users.user,blog.post")
    runner = app.test_cli_runner()
    ok = import_file(runner, write(tmp_path, [user(1), comment(5, content_type="blog.post",
                                                                object_id=123456)]))
    assert ok.exit_code == 0, ok.output
    refused = import_file(runner, write(tmp_path, [page(10), comment(6)]))
    assert refused.exit_code == 1
    assert "line 2: unknown content_type 'comics.comicpage'" in refused.stderr
    assert "blog.post, users.user" in refused.stderr


def test_insert_rows_streams_batches_and_escapes(app):
    """copy_rows.insert_rows on its own: many batches from a generator, awkward text intact."""
    names = [f"{k} {body}" for k, body in enumerate(NASTY_BODIES * 3)]
    rows = ((k + 1, name, None if k % 2 else f"{name}.png") for k, name in enumerate(names))
    with app.app_context(), engine.get_engine().begin() as conn:
        added = copy_rows.insert_rows(conn, "commentsvc_user", ("id", "username", "avatar"), rows,
                                 batch_size=4)
        stored = conn.execute(sa.text(
            "SELECT id, username, avatar FROM commentsvc_user ORDER BY id")).all()
    assert added == len(names)
    assert [tuple(row) for row in stored] == [
        (k + 1, name, None if k % 2 else f"{name}.png") for k, name in enumerate(names)]


@pytest.mark.parametrize(("table", "columns"), [
    ("commentsvc_user; DROP TABLE commentsvc_user", ("id",)),
    ("commentsvc_user", ("id", "username) VALUES (1, 'x'); --")),
    ("commentsvc_user", ('"id"',)),
])
def test_insert_rows_takes_identifiers_only(app, table, columns):
    with app.app_context(), engine.get_engine().begin() as conn, pytest.raises(ValueError):
        copy_rows.insert_rows(conn, table, columns, [])


# --- rejections ----------------------------------------------------------------------------

# Stored before every rejection case, so "unchanged" means more than "still empty".
BASE = [
    user(1, "Ann Smith"),
    user(2, "Bob", "bob.png"),
    page(10, "Page 10"),
    comment(100, author_id=1, body="Root", date_added="2024-01-01T00:00:00Z"),
    comment(101, parent_id=100, author_id=2, body="Reply", date_added="2024-01-02T00:00:00Z",
            is_read=True),
]

GOOD_USER, GOOD_PAGE = user(5, "Eve"), page(11, "Page 11")

REJECTIONS = [
    # (file lines, line reported, words the reason contains)
    pytest.param([b'{"type": "user", "id": 5, "username": "\xff", "avatar": null}'], 1,
                 ["invalid UTF-8"], id="invalid-utf8"),
    pytest.param([GOOD_USER, b"\xc3\x28"], 2, ["invalid UTF-8"], id="invalid-utf8-later"),
    pytest.param(['{"type": "user", "id": 5,'], 1, ["invalid JSON"], id="truncated-json"),
    pytest.param([line(GOOD_USER) + " x"], 1, ["invalid JSON"], id="trailing-garbage"),
    pytest.param(["{'type': 'user'}"], 1, ["invalid JSON"], id="single-quotes"),
    pytest.param(['{"type": "user", "id": NaN, "username": "x", "avatar": null}'], 1,
                 ["NaN"], id="nan"),
    pytest.param(['{"type": "user", "id": 5, "id": 6, "username": "x", "avatar": null}'], 1,
                 ["duplicate key", "id"], id="duplicate-key"),
    pytest.param(["[1, 2]"], 1, ["not a JSON object", "array"], id="array"),
    pytest.param(['"user"'], 1, ["not a JSON object", "string"], id="string"),
    pytest.param(["null"], 1, ["not a JSON object", "null"], id="null"),
    pytest.param([user(5, "a\x00b")], 1, ["NUL", "username"], id="nul-escaped"),
    pytest.param([comment(200, body="x\x00")], 1, ["NUL", "body"], id="nul-in-body"),
    pytest.param([b'{"type": "user", "id": 5, "username": "a\x00", "avatar": null}'], 1,
                 ["NUL"], id="nul-raw-byte"),
    pytest.param(['{"type": "user", "id": 5, "username": "\\ud800", "avatar": null}'], 1,
                 ["surrogate", "username"], id="lone-surrogate"),
    pytest.param([{"id": 5, "username": "x", "avatar": None}], 1,
                 ["missing field 'type'"], id="no-type"),
    pytest.param([{**GOOD_USER, "type": "post"}], 1, ["unknown type 'post'"], id="bad-type"),
    pytest.param([{**GOOD_USER, "type": 1}], 1, ["unknown type 1"], id="type-not-string"),
    pytest.param([{"type": "user", "id": 5, "username": "x"}], 1,
                 ["missing field", "avatar"], id="missing-avatar"),
    pytest.param([{k: v for k, v in comment(200).items() if k not in ("body", "is_read")}], 1,
                 ["missing field", "body", "is_read"], id="missing-fields"),
    pytest.param([{**GOOD_USER, "email": "e@example.com"}], 1,
                 ["unknown field", "email"], id="extra-key"),
    pytest.param([{**GOOD_PAGE, "parent_id": None}], 1, ["unknown field", "parent_id"],
                 id="extra-key-page"),
    pytest.param([{**GOOD_USER, "id": "5"}], 1, ["'id' must be an integer", "string"],
                 id="id-string"),
    pytest.param([{**GOOD_USER, "id": True}], 1, ["'id' must be an integer", "boolean"],
                 id="id-bool"),
    pytest.param([{**GOOD_USER, "id": 5.0}], 1, ["'id' must be an integer", "number"],
                 id="id-float"),
    pytest.param([{**GOOD_USER, "id": 0}], 1, ["'id'", "from 1"], id="id-zero"),
    pytest.param([{**GOOD_USER, "id": 2**63}], 1, ["'id'", "9223372036854775807"],
                 id="id-too-big"),
    pytest.param([comment(200, object_id="10")], 1, ["'object_id' must be an integer"],
                 id="object-id-string"),
    pytest.param([comment(200, parent_id="100")], 1,
                 ["'parent_id' must be an integer or null"], id="parent-id-string"),
    pytest.param([comment(200, parent_id=False)], 1,
                 ["'parent_id' must be an integer or null", "boolean"], id="parent-id-bool"),
    pytest.param([comment(200, author_id=None)], 1, ["'author_id' must be an integer"],
                 id="author-null"),
    pytest.param([comment(200, is_read="true")], 1, ["'is_read' must be a boolean"],
                 id="bool-string"),
    pytest.param([comment(200, is_deleted=0)], 1, ["'is_deleted' must be a boolean"],
                 id="bool-int"),
    pytest.param([comment(200, is_anonymous=None)], 1, ["'is_anonymous' must be a boolean"],
                 id="bool-null"),
    pytest.param([user(5, "x", 5)], 1, ["'avatar' must be a string or null"],
                 id="avatar-int"),
    pytest.param([user(5, None)], 1, ["'username' must be a string"], id="username-null"),
    pytest.param([user(5, "")], 1, ["'username' must not be empty"], id="username-empty"),
    pytest.param([page(11, ["t"])], 1, ["'title' must be a string", "array"],
                 id="title-array"),
    pytest.param([comment(200, body=5)], 1, ["'body' must be a string"], id="body-int"),
    pytest.param([comment(200, date_added="2024-03-05T14:07:00")], 1,
                 ["date_added", "no time zone"], id="naive-date"),
    pytest.param([comment(200, date_added="2024-03-05")], 1,
                 ["date_added", "no time zone"], id="date-only"),
    pytest.param([comment(200, date_added="yesterday")], 1, ["date_added", "ISO 8601"],
                 id="not-a-date"),
    pytest.param([comment(200, date_added="2024-02-30T10:00:00Z")], 1,
                 ["date_added", "ISO 8601"], id="impossible-date"),
    pytest.param([comment(200, date_added=1709647620)], 1, ["date_added", "ISO 8601"],
                 id="epoch-date"),
    pytest.param([comment(200, content_type="blog.post")], 1,
                 ["unknown content_type 'blog.post'", "comics.comicpage, users.user"],
                 id="unknown-content-type"),
    pytest.param([GOOD_USER, "", comment(200, content_type=None)], 3,
                 ["'content_type' must be a string"], id="blank-lines-count"),
    # Cross-record checks report the offending record's line.
    pytest.param([GOOD_USER, comment(200, author_id=99)], 2,
                 ["comment 200", "author 99", "not a user"], id="author-nowhere"),
    pytest.param([comment(200, content_type="users.user", object_id=99)], 1,
                 ["target users.user 99", "does not exist", "user"], id="user-target-nowhere"),
    pytest.param([comment(200, object_id=12), page(13)], 1,
                 ["target comics.comicpage 12", "does not exist", "comic page"],
                 id="page-target-nowhere"),
    pytest.param([comment(200, content_type="users.user", object_id=10)], 1,
                 ["target users.user 10", "does not exist"], id="page-id-is-not-a-user"),
    pytest.param([comment(200, parent_id=999)], 1,
                 ["parent comment 999", "does not exist"], id="parent-nowhere"),
    pytest.param([comment(200, content_type="users.user", object_id=1, parent_id=100)], 1,
                 ["parent comment 100", "another target"], id="parent-in-db-elsewhere"),
    pytest.param([comment(201, parent_id=200), GOOD_PAGE, comment(200, object_id=11)], 1,
                 ["comment 201", "parent comment 200", "another target"],
                 id="parent-in-file-elsewhere"),
    pytest.param([GOOD_USER, comment(200, parent_id=999), comment(201, author_id=99)], 2,
                 ["parent comment 999"], id="earliest-line-wins"),
    pytest.param([GOOD_USER, user(6), {**GOOD_USER, "avatar": "eve.png"}], 3,
                 ["user 5", "appears again", "first on line 1"], id="user-twice-differs"),
    pytest.param([GOOD_PAGE, GOOD_PAGE, page(11, "Other")], 3,
                 ["comic page 11", "appears again", "first on line 1"],
                 id="page-twice-differs"),
    pytest.param([comment(200), comment(200, is_read=True)], 2,
                 ["comment 200", "appears again"], id="comment-twice-differs"),
    pytest.param([GOOD_USER, user(1, "Ann Smith", "new.png")], 2,
                 ["user 1", "already exists", "never overwrites"], id="user-changed"),
    pytest.param([page(10, "Renamed")], 1, ["comic page 10", "already exists"],
                 id="page-changed"),
    pytest.param([comment(100, author_id=1, body="Edited", date_added="2024-01-01T00:00:00Z")],
                 1, ["comment 100", "already exists"], id="comment-changed"),
    pytest.param([comment(101, author_id=2, body="Reply", date_added="2024-01-02T00:00:00Z",
                          is_read=True)], 1, ["comment 101", "already exists"],
                 id="reply-stored-as-root"),
    pytest.param([comment(101, parent_id=100, author_id=2, body="Reply",
                          date_added="2024-01-02T00:00:00+01:00", is_read=True)], 1,
                 ["comment 101", "already exists"], id="comment-other-time"),
    pytest.param([comment(200, parent_id=201), comment(201, parent_id=200)], 1,
                 ["comment 200", "parent cycle"], id="cycle"),
    pytest.param([comment(202, parent_id=200), comment(200, parent_id=201),
                  comment(201, parent_id=200), comment(203, parent_id=100)], 1,
                 ["comment 202", "parent cycle"], id="below-a-cycle"),
    pytest.param([GOOD_USER, comment(200, parent_id=200)], 2,
                 ["comment 200", "parent cycle"], id="own-parent"),
    # Dates every time zone can show, and the API's body rules.
    pytest.param([GOOD_USER, comment(200, date_added="9999-12-31T23:00:00Z")], 2,
                 ["field 'date_added' must be from 1900-01-01T00:00:00Z",
                  "9000-01-01T00:00:00Z"], id="date-year-9999"),
    pytest.param([comment(200, date_added="0001-01-01T05:00:00Z")], 1,
                 ["field 'date_added'", "every time zone"], id="date-year-1"),
    pytest.param([comment(200, date_added="1899-12-31T23:59:59Z")], 1,
                 ["field 'date_added'"], id="date-before-1900"),
    pytest.param([GOOD_PAGE, comment(200, body=" \n\t ")], 2,
                 ["field 'body' may not be blank"], id="body-blank"),
    pytest.param([comment(200, body="")], 1, ["field 'body' may not be blank"],
                 id="body-empty"),
    pytest.param([comment(200, body="x" * 5001)], 1,
                 ["field 'body' has 5001 characters; at most 5000"], id="body-too-long"),
]


def test_bodies_up_to_the_configured_maximum_are_imported(app_factory, tmp_path):
    runner = app_factory(COMMENTSVC_MAX_BODY_LENGTH=10).test_cli_runner()
    records = [user(1), page(10), comment(200, body="x" * 10),
               comment(201, body="y" * 11, is_deleted=True)]
    assert import_file(runner, write(tmp_path, records[:3])).exit_code == 0
    result = import_file(runner, write(tmp_path, [comment(202, body="z" * 11)]))
    assert result.stderr == ("Import failed: line 1: field 'body' has 11 characters; "
                             "at most 10 are allowed (COMMENTSVC_MAX_BODY_LENGTH)\n")
    assert import_file(runner, write(tmp_path, records[3:])).exit_code == 0
    exported = {r["id"]: r["body"] for r in export_records(runner, tmp_path)
                if r["type"] == "comment"}
    assert exported == {200: "x" * 10, 201: ""}  # a deleted comment's text is not kept


@pytest.mark.parametrize(("lines", "line_number", "words"), REJECTIONS)
def test_rejected_file_changes_nothing(app, runner, tmp_path, lines, line_number, words):
    insert_records(app, BASE)
    before = export_text(runner, tmp_path)
    result = import_file(runner, write(tmp_path, lines))
    assert result.exit_code == 1
    assert result.stdout == ""
    prefix = f"Import failed: line {line_number}: "
    assert result.stderr.startswith(prefix), result.stderr
    for word in words:
        assert word in result.stderr, (word, result.stderr)
    assert export_text(runner, tmp_path) == before
    assert_positions(app)


def test_import_failed_carries_line_and_reason():
    failure = ndjson.ImportFailed(7, "bad thing")
    assert (failure.line, failure.reason, str(failure)) == (7, "bad thing", "line 7: bad thing")


def test_failed_import_leaves_nothing_behind_for_the_next(app, runner, tmp_path):
    """A refused file must not leave staged rows that a later import would pick up."""
    refused = import_file(runner, write(tmp_path, [GOOD_USER, comment(200, author_id=99)]))
    assert refused.exit_code == 1
    result = import_file(runner, write(tmp_path, [user(1), page(10)]))
    assert result.stdout == "Imported 1 user, 1 comic page, 0 comments (0 already present).\n"
    assert canonical(export_records(runner, tmp_path)) == canonical([user(1), page(10)])


def test_the_line_named_is_the_first_to_fail_the_first_check_any_line_fails(runner,
                                                                          tmp_path):
    """OPERATIONS.md: the checks in turn, each line's own form first. Line 2's author is
    on line 3, which cannot be read: naming line 2 ("no such author") would be wrong."""
    bad_json = import_file(runner, write(tmp_path, [
        user(1), comment(200, author_id=5), '{"type": "user", "id": 5, "username": ']))
    assert bad_json.stderr.startswith("Import failed: line 3: "), bad_json.stderr
    references_then_cycles = import_file(runner, write(tmp_path, [
        user(1), page(10), comment(200, parent_id=201), comment(201, parent_id=200),
        comment(202, parent_id=999)]))
    assert references_then_cycles.stderr.startswith(
        "Import failed: line 5: comment 202: parent comment 999 does not exist"), \
        references_then_cycles.stderr
