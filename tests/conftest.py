"""Fixtures: every API test runs once on SQLite and once on PostgreSQL.

PostgreSQL tests use a fresh database made for this test session (dropped afterwards)
on the server named by COMMENTSVC_TEST_POSTGRES_URL. Without a server they skip, unless
COMMENTSVC_REQUIRE_POSTGRES=1 (CI), where they fail.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC
from pathlib import Path

import pytest
import sqlalchemy as sa

import hypothesis_profiles  # noqa: F401  (registers and loads the profiles)
from app import create_app
from commentsvc.storage import engine, node_writes, store
from commentsvc.storage.database_urls import normalise_url

ADMIN_URL = normalise_url(os.environ.get("COMMENTSVC_TEST_POSTGRES_URL",
                                        "postgresql://postgres@127.0.0.1:5432/postgres"))
REQUIRE_POSTGRES = os.environ.get("COMMENTSVC_REQUIRE_POSTGRES") == "1"
SAMPLE = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "sample.ndjson"
SAMPLE_COPY = Path(__file__).resolve().parent / "data" / "sample.ndjson"


@contextmanager
def own_database(prefix: str) -> Iterator[str]:
    """The URL of a new database on the PostgreSQL server, dropped afterwards. Without a
    server the test skips, unless COMMENTSVC_REQUIRE_POSTGRES=1 (CI), where it fails."""
    admin = sa.create_engine(ADMIN_URL, isolation_level="AUTOCOMMIT",
                             connect_args={"connect_timeout": 3})
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    except sa.exc.OperationalError as exc:
        admin.dispose()
        if REQUIRE_POSTGRES:
            pytest.fail(f"PostgreSQL is required but unreachable: {exc}")
        pytest.skip(f"no PostgreSQL server: {exc}")
    url = admin.url.set(database=name).render_as_string(hide_password=False)
    try:
        yield url
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()
        # the database's shared word (storage.node_writes), left by the apps that wrote
        node_writes.file_for(sa.engine.make_url(normalise_url(url))).unlink(missing_ok=True)


@pytest.fixture(scope="session")
def postgres_url():
    """A database of its own for this test session on the PostgreSQL server."""
    with own_database("commentsvc_test") as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path):
    """The URL of an empty database of each kind."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'test.sqlite3'}"
    return request.getfixturevalue("postgres_url")


def make_app(database_url: str, **config):
    """A test app on ``database_url`` with a freshly created schema."""
    app = create_app({"TESTING": True, "COMMENTSVC_DATABASE_URL": database_url, **config})
    with app.app_context(), engine.get_engine().begin() as conn:
        engine.drop_schema(conn)
        engine.create_schema(conn)
    return app


def apps_on(database_url: str):
    """Makes test apps on ``database_url`` with extra config while the generator runs;
    closes their pools after."""
    made = []

    def factory(**config):
        made.append(make_app(database_url, **config))
        return made[-1]

    yield factory
    for app in made:
        with app.app_context():
            engine.get_engine().dispose()


@pytest.fixture
def app_factory(database_url):
    """Makes test apps on this test's database with extra config; closes their pools after."""
    yield from apps_on(database_url)


@pytest.fixture
def pg_app_factory(postgres_url):
    """The same, on the session's PostgreSQL database only."""
    yield from apps_on(postgres_url)


@pytest.fixture
def app(app_factory):
    return app_factory()


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def runner(app):
    return app.test_cli_runner()


def sample_path() -> Path:
    """The shared sample fixture, or the copy kept beside the tests."""
    return SAMPLE if SAMPLE.exists() else SAMPLE_COPY


def read_ndjson(path: Path) -> list[dict]:
    # split on "\n" only: U+2028 and friends may stand inside a record
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line]


def checkpoint(app) -> None:
    """A CHECKPOINT of ``app``'s PostgreSQL server, on a connection of its own: not under
    the service's response deadline, which a checkpoint of a busy shared server can pass."""
    with app.app_context():
        url = engine.get_engine().url
    plain = sa.create_engine(url)
    try:
        with plain.connect() as conn:
            conn.exec_driver_sql("CHECKPOINT")
    finally:
        plain.dispose()


def insert_records(app, records: list[dict]) -> None:
    """Put interchange records straight into the tables (independent of the importer)."""
    users = [r for r in records if r["type"] == "user"]
    pages = [r for r in records if r["type"] == "comicpage"]
    comments = [r for r in records if r["type"] == "comment"]
    with app.app_context(), engine.get_engine().begin() as conn:
        for user in users:
            conn.execute(sa.text("INSERT INTO commentsvc_user (id, username, avatar) "
                                 "VALUES (:id, :username, :avatar)"), user)
        for page in pages:
            conn.execute(sa.text("INSERT INTO commentsvc_comicpage (id, title) "
                                 "VALUES (:id, :title)"), page)
        insert = sa.text(
            "INSERT INTO commentsvc_comment (id, content_type, object_id, parent_id, "
            "author_id, body, date_added, is_deleted, is_anonymous, is_read) VALUES "
            "(:id, :content_type, :object_id, :parent_id, :author_id, :body, :date_added, "
            ":is_deleted, :is_anonymous, :is_read)"
        ).bindparams(sa.bindparam("date_added", type_=sa.DateTime()))
        roots = sorted(comments, key=lambda c: c["parent_id"] is not None)
        for comment in roots:
            conn.execute(insert, {**comment, "date_added": parse_utc(comment["date_added"])})
        store.renumber(conn)


def parse_utc(value: str):
    """An ISO 8601 date as the naive UTC datetime the tables store."""
    from datetime import datetime

    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return parsed.astimezone(UTC).replace(tzinfo=None)


@pytest.fixture
def sample(app):
    """The sample fixture's records, loaded into the test database."""
    records = read_ndjson(sample_path())
    insert_records(app, records)
    return records


@pytest.fixture
def sample_records():
    """The sample fixture's records, not loaded anywhere."""
    return read_ndjson(sample_path())


@pytest.fixture
def host_factory(database_url):
    """Host sites (test_mounting.make_host: the blueprint under /community) on this test's
    database, with extra config; their pools are closed after the test."""
    from test_mounting import make_host

    made = []

    def factory(**config):
        made.append(make_host(database_url, **config))
        return made[-1]

    yield factory
    for host in made:
        with host.app_context():
            engine.get_engine().dispose()


@pytest.fixture
def pg_app(postgres_url):
    """An app on the session's PostgreSQL database only, its connections closed after."""
    app = make_app(postgres_url)
    yield app
    with app.app_context():
        engine.get_engine().dispose()


def backends(app, state: str | None = None) -> int:
    """Connections to the app's database other than the admin one asking."""
    database = sa.engine.make_url(app.config["COMMENTSVC_DATABASE_URL"]).database
    admin = sa.create_engine(ADMIN_URL)
    try:
        with admin.connect() as conn:
            return conn.execute(sa.text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = :db"
                " AND pid <> pg_backend_pid() AND (:state IS NULL OR state = :state)"),
                {"db": database, "state": state}).scalar()
    finally:
        admin.dispose()


def terminate_backends(app) -> None:
    """Kill every server process of the app's database, as a restart or failover would."""
    database = sa.engine.make_url(app.config["COMMENTSVC_DATABASE_URL"]).database
    admin = sa.create_engine(ADMIN_URL)
    try:
        with admin.connect() as conn:
            conn.execute(sa.text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                                 " WHERE datname = :db AND pid <> pg_backend_pid()"),
                         {"db": database})
    finally:
        admin.dispose()


# A small community for the write tests: ann and bob post, carol is staff; ann's profile
# and comic page 10 carry a thread each. Ids are chosen apart from each other on purpose.
COMMUNITY = [
    {"type": "user", "id": 1, "username": "ann", "avatar": None},
    {"type": "user", "id": 2, "username": "bob", "avatar": "bob.png"},
    {"type": "user", "id": 3, "username": "carol", "avatar": None},
    {"type": "comicpage", "id": 10, "title": "Page ten"},
    {"type": "comicpage", "id": 11, "title": "Page eleven"},
    {"type": "comment", "id": 100, "content_type": "comics.comicpage", "object_id": 10,
     "parent_id": None, "author_id": 1, "body": "First!", "date_added": "2024-01-01T10:00:00Z",
     "is_deleted": False, "is_anonymous": False, "is_read": False},
    {"type": "comment", "id": 101, "content_type": "comics.comicpage", "object_id": 10,
     "parent_id": 100, "author_id": 2, "body": "Second.", "date_added": "2024-01-01T11:00:00Z",
     "is_deleted": False, "is_anonymous": False, "is_read": False},
    {"type": "comment", "id": 102, "content_type": "users.user", "object_id": 1,
     "parent_id": None, "author_id": 2, "body": "Hi ann", "date_added": "2024-01-02T10:00:00Z",
     "is_deleted": False, "is_anonymous": False, "is_read": False},
    {"type": "comment", "id": 103, "content_type": "comics.comicpage", "object_id": 10,
     "parent_id": None, "author_id": 2, "body": "gone", "date_added": "2024-01-03T10:00:00Z",
     "is_deleted": True, "is_anonymous": False, "is_read": False},
]


class Community:
    """The community's data loaded into an app, with a token for each user."""

    def __init__(self, app):
        from commentsvc.web import auth

        insert_records(app, COMMUNITY)
        with app.app_context(), engine.writing(engine.get_engine()) as conn:
            self.tokens = {name: auth.create_token(conn, user_id)
                           for name, user_id in (("ann", 1), ("bob", 2), ("carol", 3))}
            auth.set_staff(conn, 3, True)

    def auth(self, name: str) -> dict[str, str]:
        """The request headers that sign ``name`` in."""
        return {"Authorization": f"Token {self.tokens[name]}"}


@pytest.fixture
def community(app):
    return Community(app)


def table_rows(app) -> dict[str, list[tuple]]:
    """Every row of every table of the service, for checking that a refusal wrote nothing."""
    with app.app_context(), engine.get_engine().connect() as conn:
        tables = [name for name in sa.inspect(conn).get_table_names()
                  if name.startswith("commentsvc_")]
        return {name: sorted(map(tuple, conn.execute(sa.text(f"SELECT * FROM {name}"))),
                             key=repr) for name in tables}


REDIS_TEST_URL = os.environ.get("COMMENTSVC_TEST_REDIS_URL", "redis://127.0.0.1:6379/14")


def require_redis(url: str, empty: bool = True) -> None:
    """Empty the Redis database at ``url`` (or only reach it); skip without a Redis server,
    except in CI (CI=true), where that fails."""
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=1)
    try:
        client.flushdb() if empty else client.ping()
    except redis.RedisError as exc:
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(f"Redis is required in CI but unreachable: {exc}")
        pytest.skip(f"no Redis server: {exc}")
    finally:
        client.close()


@pytest.fixture
def redis_url():
    """An emptied Redis database for this test (emptied again after)."""
    import redis

    require_redis(REDIS_TEST_URL)
    yield REDIS_TEST_URL
    redis.Redis.from_url(REDIS_TEST_URL).flushdb()


@pytest.fixture
def runtime_dir():
    """A directory for nginx's runtime files made in the test's process, which nginx's
    workers (as root, user nobody) can reach; removed after."""
    made = Path(tempfile.mkdtemp(prefix="commentsvc-runtime-test-"))
    made.chmod(0o711)
    yield made
    shutil.rmtree(made, ignore_errors=True)
