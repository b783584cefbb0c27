"""The yardsticks for the service's own overhead: a bare Flask view returning a fixed body.

http_bench.py serves it under the same gunicorn settings as the service, with the body of
the service's page 1, so the two differ only in what the service does per request.

    BENCH_BODY_FILE=page1.json gunicorn bench.bare_app:app

With BENCH_DB_READ=counter or page (and DATABASE_URL, PostgreSQL) the view first runs the
one statement the service cannot do without, exactly as the service runs it (prepared, on
a connection the process keeps, in autocommit): a cached page's counter row read, or a
built page's one-statement read (page 1 of the whole site's list, rows fetched, not
rendered). These are the ceilings of the service's two paths on the machine: no code
around those statements can be faster than a view that does nothing else.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from flask import Flask, Response

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

BODY = Path(os.environ["BENCH_BODY_FILE"]).read_bytes()

app = Flask(__name__)


def database_read(kind: str) -> Callable[[], object]:
    """The statement of ``kind`` ("counter" or "page") on a kept connection."""
    import psycopg2

    from commentsvc.settings import Settings
    from commentsvc.storage.database_urls import libpq_url
    from commentsvc.storage.queries import listing

    settings = Settings.from_config({})
    url = libpq_url(os.environ["DATABASE_URL"])
    kept: list = []

    def cursor():
        if not kept:
            connection = psycopg2.connect(url)
            connection.autocommit = True
            with connection.cursor() as setup:
                setup.execute(listing.PREPARE_LIST_STATE)
                setup.execute(listing.PREPARE_PAGE_READS)
            kept.append(connection)
        return kept[0].cursor()

    def read() -> object:
        with cursor() as statement:
            if kind == "counter":
                statement.execute(listing.EXECUTE_LIST_STATE, ("site",))
            else:
                statement.execute(listing.EXECUTE_PAGE_READ["site"], (
                    "site", 1, settings.page_size, settings.max_embedded_replies,
                    settings.render_display))
            return statement.fetchall()

    return read


READ = database_read(os.environ["BENCH_DB_READ"]) if os.environ.get("BENCH_DB_READ") else None


@app.get("/api/comments/")
def fixed_body() -> Response:
    if READ is not None:
        READ()
    return Response(BODY, mimetype="application/json")
