"""Which database URLs the service accepts, and the driver each one means: the one home
of that rule, for DATABASE_URL, DATABASE_REPLICA_URLS, the tests and the bench scripts.

``postgresql://`` and ``postgres://`` mean psycopg2, the driver the package installs, so
they become ``postgresql+psycopg2://`` before SQLAlchemy sees them: SQLAlchemy 2.1 took
psycopg (version 3) as the default for a bare ``postgresql://``, which an installed
package then failed to import. Any other driver or database is refused by name at
start-up rather than on the first request.
"""

from __future__ import annotations

POSTGRES_SCHEME = "postgresql+psycopg2"
POSTGRES_SPELLINGS = ("postgresql", "postgres", POSTGRES_SCHEME)
SQLITE_SPELLINGS = ("sqlite", "sqlite+pysqlite")
SUPPORTED = ("sqlite:///PATH, postgresql://..., postgres://... or "
             "postgresql+psycopg2://... (PostgreSQL through psycopg2)")


class UnsupportedDatabaseURL(ValueError):
    """A database URL naming a database or driver the service does not run on."""


def normalise_url(url: str) -> str:
    """``url`` with its driver named; SQLite URLs and ``postgresql+psycopg2://`` as given.

    >>> normalise_url("postgres://u:p@db:5432/comments")
    'postgresql+psycopg2://u:p@db:5432/comments'
    >>> normalise_url("sqlite:///instance/commentsvc.sqlite3")
    'sqlite:///instance/commentsvc.sqlite3'
    """
    scheme, separator, rest = str(url).partition("://")
    if separator and scheme.lower() in POSTGRES_SPELLINGS:
        return f"{POSTGRES_SCHEME}://{rest}"
    if separator and scheme.lower() in SQLITE_SPELLINGS:
        return url
    # Only the scheme is named: the rest of a URL may hold a password.
    named = f'"{scheme}://"' if separator else "a URL without a scheme"
    raise UnsupportedDatabaseURL(f"{named} is not a supported database URL; use {SUPPORTED}")


def is_postgres(url: str) -> bool:
    """Whether ``url`` (normalised) names a PostgreSQL database."""
    return url.startswith(f"{POSTGRES_SCHEME}://")


def libpq_url(url: str) -> str:
    """A PostgreSQL ``url`` as libpq takes it (``psycopg2.connect``), for a script that
    opens a connection of its own beside the service's.

    >>> libpq_url("postgres://u:p@db:5432/comments")
    'postgresql://u:p@db:5432/comments'
    """
    return "postgresql://" + normalise_url(url).partition("://")[2]
