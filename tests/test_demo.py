"""`flask seed`: deterministic, realistic demo data, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime

import pytest
import sqlalchemy as sa
from test_interchange import (
    assert_positions,
    counts,
    export_records,
    export_text,
    import_file,
    invoke,
)

from commentsvc.operations import demo, progress
from commentsvc.storage import engine
from conftest import parse_utc


def seed(runner, *args: str):
    result = invoke(runner, ["seed", *args])
    assert result.exit_code == 0, result.output
    return result


def test_same_seed_same_data_different_seed_other_data(app, app_factory, tmp_path):
    seed(app.test_cli_runner(), "--comments", "300", "--targets", "12", "--seed", "5")
    first = export_text(app.test_cli_runner(), tmp_path)

    again = app_factory()  # drops and recreates the schema: a fresh database
    seed(again.test_cli_runner(), "--comments", "300", "--targets", "12", "--seed", "5")
    assert export_text(again.test_cli_runner(), tmp_path) == first

    other = app_factory()
    seed(other.test_cli_runner(), "--comments", "300", "--targets", "12", "--seed", "6")
    assert export_text(other.test_cli_runner(), tmp_path) != first


def test_row_counts_and_summary(app, runner, tmp_path):
    result = seed(runner, "--comments", "400", "--targets", "10", "--seed", "1")
    assert result.stdout == ("Seeded 60 users, 8 comic pages and 400 comments "
                             f"({count_replies(runner, tmp_path)} replies) on 10 targets "
                             "with seed 1.\n")
    assert counts(app)["commentsvc_user"] == 60
    assert counts(app)["commentsvc_comicpage"] == 8
    assert counts(app)["commentsvc_comment"] == 400
    records = export_records(runner, tmp_path)
    targets = {(r["content_type"], r["object_id"]) for r in records if r["type"] == "comment"}
    assert len(targets) <= 10
    users = {r["id"] for r in records if r["type"] == "user"}
    pages = {r["id"] for r in records if r["type"] == "comicpage"}
    for content_type, object_id in targets:
        assert object_id in (users if content_type == "users.user" else pages)
    assert_positions(app)


def count_replies(runner, tmp_path) -> int:
    return sum(1 for r in export_records(runner, tmp_path)
               if r["type"] == "comment" and r["parent_id"] is not None)


def test_seeded_data_looks_real(app, runner, tmp_path):
    seed(runner, "--comments", "2000", "--targets", "30", "--seed", "3")
    records = export_records(runner, tmp_path)
    users = [r for r in records if r["type"] == "user"]
    comments = {r["id"]: r for r in records if r["type"] == "comment"}
    replies = [c for c in comments.values() if c["parent_id"] is not None]

    assert 0.2 < len(replies) / len(comments) < 0.4
    for reply in replies:
        root = comments[reply["parent_id"]]
        assert root["parent_id"] is None
        assert (root["content_type"], root["object_id"]) == (
            reply["content_type"], reply["object_id"])
        assert parse_utc(root["date_added"]) <= parse_utc(reply["date_added"])
    assert Counter(c["content_type"] for c in comments.values()).keys() == {
        "users.user", "comics.comicpage"}

    flags = Counter((c["is_deleted"], c["is_anonymous"]) for c in comments.values())
    assert flags[(True, False)] and flags[(False, True)]
    assert 0.02 < sum(c["is_anonymous"] or c["is_deleted"] for c in comments.values()) / len(
        comments) < 0.1
    assert 0.2 < sum(c["is_read"] for c in comments.values()) / len(comments) < 0.8

    dates = [parse_utc(c["date_added"]) for c in comments.values()]
    assert datetime(2024, 1, 1) <= min(dates) and max(dates) <= datetime(2026, 1, 1)
    assert max(dates) - min(dates) > (datetime(2026, 1, 1) - datetime(2024, 7, 1))
    assert max(Counter(dates).values()) > 1, "no ties in time"

    bodies = [c["body"] for c in comments.values()]
    for marker in ("https://", "www.", "\n", "<", "&", '"', "🎉"):
        assert any(marker in body for body in bodies), marker
    names = [u["username"] for u in users]
    assert len(set(names)) == len(names)
    assert any(" " in name for name in names)
    assert any(not name.isascii() for name in names)
    assert any(u["avatar"] is None for u in users)
    assert sum(u["avatar"] is None for u in users) < len(users) / 4
    assert_positions(app)


def test_seeded_data_imports_back(app, app_factory, runner, tmp_path):
    """Demo data is valid interchange data: export, import elsewhere, export again."""
    seed(runner, "--comments", "500", "--targets", "8", "--seed", "9")
    path = tmp_path / "demo.ndjson"
    path.write_text(export_text(runner, tmp_path), encoding="utf-8")
    fresh = app_factory().test_cli_runner()
    result = import_file(fresh, path)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("Imported 72 users, 6 comic pages, 500 comments")
    assert export_text(fresh, tmp_path) == path.read_text(encoding="utf-8")
    assert_positions(fresh.app)


def test_seeding_twice_adds_after_the_largest_ids(app, runner, tmp_path):
    seed(runner, "--comments", "200", "--targets", "6", "--seed", "1")
    once = counts(app)
    seed(runner, "--comments", "200", "--targets", "6", "--seed", "1")
    twice = counts(app)
    for table in ("commentsvc_user", "commentsvc_comicpage", "commentsvc_comment"):
        assert twice[table] == 2 * once[table]
    assert_positions(app)


def test_a_seed_without_room_for_its_ids_says_so_and_adds_nothing(app, runner, tmp_path):
    """Ids go after the largest stored one: after a user with the largest id there is no
    room, which is one line and exit 1, not a traceback."""
    path = tmp_path / "last.ndjson"
    path.write_text(json.dumps({"type": "user", "id": 2**63 - 1, "username": "last",
                                "avatar": None}) + "\n", encoding="utf-8")
    assert import_file(runner, path).exit_code == 0
    before = counts(app)
    result = invoke(runner, ["seed", "--comments", "10", "--targets", "2"])
    assert result.exit_code == 1
    assert result.stderr == ("Error: seed adds ids after the largest stored ones, and there "
                             "is no room for them below 9223372036854775807: nothing "
                             "seeded\n")
    assert "Traceback" not in result.output
    assert counts(app) == before


def test_a_target_count_past_the_limit_is_refused_at_once(runner):
    result = invoke(runner, ["seed", "--comments", "10",
                             "--targets", "99999999999999999999"])
    assert result.exit_code == 2
    assert "--targets" in result.stderr and "1000000" in result.stderr


@pytest.mark.parametrize("share", ["nan", "NaN", "-0.1", "1.5"])
def test_a_hot_share_that_is_no_share_is_a_usage_error(app, runner, share):
    before = counts(app)
    result = invoke(runner, ["seed", "--comments", "10", "--hot-share", share])
    assert result.exit_code == 2 and "--hot-share" in result.stderr
    assert "Traceback" not in result.output
    assert counts(app) == before


def test_if_empty_leaves_existing_comments_alone(app, runner, tmp_path):
    seed(runner, "--comments", "50", "--targets", "3", "--seed", "1", "--if-empty")
    before = export_text(runner, tmp_path)
    result = seed(runner, "--comments", "50", "--targets", "3", "--seed", "2", "--if-empty")
    assert result.stdout == "Comments already exist; nothing seeded.\n"
    assert export_text(runner, tmp_path) == before


def test_single_target_is_a_comic_page(app, runner, tmp_path):
    seed(runner, "--comments", "20", "--targets", "1", "--seed", "1")
    records = export_records(runner, tmp_path)
    assert {(r["content_type"], r["object_id"]) for r in records if r["type"] == "comment"} == {
        ("comics.comicpage", next(r["id"] for r in records if r["type"] == "comicpage"))}


def test_progress_bar_on_stderr_for_big_seeds_on_a_terminal(app, runner, monkeypatch):
    monkeypatch.setattr(demo, "PROGRESS_THRESHOLD", 10)
    monkeypatch.setattr(progress, "on_terminal", lambda: True)
    result = seed(runner, "--comments", "30", "--targets", "2", "--seed", "1")
    assert "Seeding comments" in result.stderr
    assert "Building indexes and counting lists..." in result.stderr  # a first load
    assert result.stdout.startswith("Seeded ")
    again = seed(runner, "--comments", "30", "--targets", "2", "--seed", "2")
    assert "Building indexes" not in again.stderr  # onto comments: the indexes stay
    assert "Numbering the lists again (the indexes were kept)..." in again.stderr
    quiet = seed(runner, "--comments", "5", "--targets", "2", "--seed", "1")
    assert quiet.stderr == ""


def test_off_a_terminal_seed_prints_only_its_summary(app, runner, monkeypatch):
    monkeypatch.setattr(demo, "PROGRESS_THRESHOLD", 10)
    result = seed(runner, "--comments", "30", "--targets", "2", "--seed", "1")
    assert result.stderr == ""
    assert result.stdout.count("\n") == 1 and result.stdout.startswith("Seeded ")


def test_seeding_again_never_repeats_a_username(app, runner, tmp_path):
    for seed_value in ("1", "1", "2"):  # the same seed draws the same names again
        seed(runner, "--comments", "400", "--targets", "10", "--seed", seed_value)
    names = [r["username"] for r in export_records(runner, tmp_path) if r["type"] == "user"]
    assert len(names) == 3 * 60
    assert len(set(names)) == len(names)


def test_seeding_after_an_import_avoids_its_names(app, runner, tmp_path):
    path = tmp_path / "users.ndjson"
    taken = [demo_user["username"] for demo_user in _first_seeded_users(app, tmp_path)]
    path.write_text("".join(
        json.dumps({"type": "user", "id": 1000 + k, "username": name, "avatar": None}) + "\n"
        for k, name in enumerate(taken)), encoding="utf-8")
    assert import_file(runner, path).exit_code == 0
    seed(runner, "--comments", "400", "--targets", "10", "--seed", "1")
    names = [r["username"] for r in export_records(runner, tmp_path) if r["type"] == "user"]
    assert len(names) == len(taken) + 60 and len(set(names)) == len(names)


def _first_seeded_users(app, tmp_path) -> list[dict]:
    """The users seed 1 makes on an empty database (seeded on a database of its own)."""
    other = tmp_path / "other.sqlite3"
    from app import create_app

    fresh = create_app({"TESTING": True, "COMMENTSVC_DATABASE_URL": f"sqlite:///{other}"})
    with fresh.app_context(), engine.get_engine().begin() as conn:
        engine.create_schema(conn)
    runner = fresh.test_cli_runner()
    seed(runner, "--comments", "400", "--targets", "10", "--seed", "1")
    users = [r for r in export_records(runner, tmp_path) if r["type"] == "user"]
    with fresh.app_context():
        engine.get_engine().dispose()
    return users


def test_has_comments(app):
    with app.app_context(), engine.get_engine().begin() as conn:
        assert demo.has_comments(conn) is False
        demo.seed(conn, comments=1, targets=1, seed=1)
        assert demo.has_comments(conn) is True
        stored = conn.execute(sa.text("SELECT COUNT(*) FROM commentsvc_comment")).scalar()
    assert stored == 1
