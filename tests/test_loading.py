"""A first load into an empty comment table: indexes and foreign keys off, then rebuilt."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from commentsvc.interchange import empty_table
from commentsvc.operations import demo
from commentsvc.storage import engine
from commentsvc.storage.queries.loading import FOREIGN_KEYS, SECONDARY_INDEXES
from helpers import assert_positions_exact


def index_names(conn) -> set[str]:
    return {index["name"] for index in sa.inspect(conn).get_indexes("commentsvc_comment")}


def foreign_key_names(conn) -> set[str]:
    return {fk["name"] for fk in sa.inspect(conn).get_foreign_keys("commentsvc_comment")}


def test_schema_defines_the_indexes_the_load_drops(app):
    with app.app_context(), engine.get_engine().connect() as conn:
        assert index_names(conn) == set(SECONDARY_INDEXES)
        if conn.dialect.name == "postgresql":
            assert foreign_key_names(conn) == set(FOREIGN_KEYS)


def test_first_load_drops_and_rebuilds_indexes_and_foreign_keys(app):
    with app.app_context(), engine.get_engine().begin() as conn:
        with empty_table.deferred_indexes(conn) as first_load:
            assert first_load
            assert index_names(conn) == set()
            if conn.dialect.name == "postgresql":
                assert foreign_key_names(conn) == set()
            demo.seed(conn, comments=300, targets=5, seed=3, progress=False)
    with app.app_context(), engine.get_engine().connect() as conn:
        assert index_names(conn) == set(SECONDARY_INDEXES)
        if conn.dialect.name == "postgresql":
            assert foreign_key_names(conn) == set(FOREIGN_KEYS)
        assert_positions_exact(conn)


def test_rebuilt_foreign_keys_are_enforced(app):
    with app.app_context(), engine.get_engine().begin() as conn:
        demo.seed(conn, comments=50, targets=2, seed=1, progress=False)
    with app.app_context(), pytest.raises(sa.exc.IntegrityError):
        with engine.get_engine().begin() as conn:
            conn.execute(sa.text(
                "INSERT INTO commentsvc_comment (id, content_type, object_id, author_id, body,"
                " date_added) VALUES (999999, 'comics.comicpage', 1, 424242, 'x',"
                " '2024-01-01 00:00:00')"))


def test_failed_first_load_puts_everything_back(app):
    with app.app_context(), pytest.raises(RuntimeError):
        with engine.get_engine().begin() as conn, empty_table.deferred_indexes(conn):
            demo.seed(conn, comments=20, targets=2, seed=1, progress=False)
            raise RuntimeError("the load fails half way")
    with app.app_context(), engine.get_engine().connect() as conn:
        assert index_names(conn) == set(SECONDARY_INDEXES)
        if conn.dialect.name == "postgresql":
            assert foreign_key_names(conn) == set(FOREIGN_KEYS)
        assert conn.execute(sa.text("SELECT COUNT(*) FROM commentsvc_comment")).scalar() == 0


def test_load_onto_existing_comments_keeps_the_indexes(app):
    with app.app_context(), engine.get_engine().begin() as conn:
        demo.seed(conn, comments=30, targets=2, seed=1, progress=False)
        with empty_table.deferred_indexes(conn) as first_load:
            assert not first_load
            assert index_names(conn) == set(SECONDARY_INDEXES)
            demo.seed(conn, comments=30, targets=2, seed=2, progress=False)
        assert_positions_exact(conn)
