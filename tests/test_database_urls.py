"""Database URLs name their driver: postgresql:// and postgres:// mean psycopg2 whatever
SQLAlchemy's own default is, SQLite is kept, and anything else stops the service at
start-up with the URLs it takes (and without echoing a password)."""

from __future__ import annotations

import doctest

import pytest
import sqlalchemy as sa

from app import create_app
from commentsvc import settings
from commentsvc.storage import database_urls
from commentsvc.storage import engine as db
from commentsvc.storage.database_urls import UnsupportedDatabaseURL, libpq_url, normalise_url


@pytest.mark.parametrize(("url", "named"), [
    ("postgresql://u:p@db:5432/comments", "postgresql+psycopg2://u:p@db:5432/comments"),
    ("postgres://u@db/comments?sslmode=require",
     "postgresql+psycopg2://u@db/comments?sslmode=require"),
    ("PostgreSQL://db/comments", "postgresql+psycopg2://db/comments"),
    ("postgresql+psycopg2://db/comments", "postgresql+psycopg2://db/comments"),
    ("sqlite:///instance/commentsvc.sqlite3", "sqlite:///instance/commentsvc.sqlite3"),
    ("sqlite+pysqlite:///:memory:", "sqlite+pysqlite:///:memory:"),
])
def test_urls_get_their_driver_named(url, named):
    assert normalise_url(url) == named
    assert normalise_url(named) == named


@pytest.mark.parametrize("url", ["postgresql://u:p@db:5432/comments?sslmode=require",
                                 "postgres://u:p@db:5432/comments?sslmode=require",
                                 "postgresql+psycopg2://u:p@db:5432/comments?sslmode=require"])
def test_a_postgres_url_in_libpqs_form_names_no_driver(url):
    """What the bench scripts hand psycopg2.connect: libpq takes no driver in the scheme."""
    assert libpq_url(url) == "postgresql://u:p@db:5432/comments?sslmode=require"


@pytest.mark.parametrize("url", [
    "postgresql+psycopg://u:secret@db/comments",
    "postgresql+asyncpg://u:secret@db/comments",
    "mysql://u:secret@db/comments",
    "mysql+pymysql://u:secret@db/comments",
    "db/comments",
    "",
])
def test_other_databases_and_drivers_are_refused_naming_the_supported_urls(url):
    with pytest.raises(UnsupportedDatabaseURL) as refused:
        normalise_url(url)
    message = str(refused.value)
    assert "postgresql://" in message and "postgresql+psycopg2://" in message
    assert "sqlite:///" in message
    assert "secret" not in message


def test_the_examples_in_the_docstring_hold():
    assert doctest.testmod(database_urls).failed == 0


def test_database_url_is_normalised_when_read_from_the_environment():
    found = settings.from_environment({"DATABASE_URL": "postgres://db/comments"})
    assert found == {"COMMENTSVC_DATABASE_URL": "postgresql+psycopg2://db/comments"}
    assert settings.from_environment({"DATABASE_URL": ""}) == {"COMMENTSVC_DATABASE_URL": ""}


@pytest.mark.parametrize("url", ["mysql://u:secret@db/comments",
                                 "postgresql+psycopg://u:secret@db/comments"])
def test_an_unsupported_url_stops_the_start_naming_the_setting(url, tmp_path):
    with pytest.raises(settings.SettingsError, match="DATABASE_URL") as refused:
        settings.from_environment({"DATABASE_URL": url})
    assert "postgresql+psycopg2://" in str(refused.value)
    with pytest.raises(settings.SettingsError, match="DATABASE_URL"):
        create_app({"TESTING": True, "COMMENTSVC_DATABASE_URL": url})


def test_a_plain_postgresql_url_is_served_through_psycopg2(postgres_url):
    """The engine of a postgresql:// (or postgres://) URL uses psycopg2, the driver the
    package installs, also where SQLAlchemy's default for the dialect is psycopg 3."""
    plain = sa.make_url(postgres_url).set(drivername="postgres").render_as_string(
        hide_password=False)
    assert plain.startswith("postgres://")
    app = create_app({"TESTING": True, "COMMENTSVC_DATABASE_URL": plain,
                      "COMMENTSVC_DATABASE_REPLICA_URLS": plain})
    router = app.extensions["commentsvc"].replicas
    with app.app_context():
        engine = db.get_engine()
        try:
            assert engine.dialect.driver == "psycopg2"
            assert [replica.dialect.driver for replica in router.engines] == ["psycopg2"]
            with engine.connect() as conn:
                assert conn.exec_driver_sql("SELECT 1").scalar_one() == 1
        finally:
            router.close()
            engine.dispose()
