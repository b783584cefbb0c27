"""What one request costs inside the process, without HTTP: the bare Flask view against
the service's page 1 with its response cache on and off (and, given ``--token``, read
signed in, a new comment posted by that key's user, and one of that user's comments
deleted), called as WSGI applications.

    DATABASE_URL=postgresql://... python bench/in_process.py [--requests 3000] [--token KEY]
        [--checkout DIR]

``--checkout DIR`` serves another checkout's service (an earlier commit) with this file's
cases, for a comparison run by run (the cases of one run take turns, not the two runs).

Each is called ``--requests`` times after a warm-up, the cases taking turns for
``--rounds`` rounds; the median microseconds a request are reported, of wall time and of
this process's CPU time. The service's request log goes to a discarded stream meanwhile,
as the bare view writes none.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import itertools
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

if TYPE_CHECKING:
    from flask import Flask


def environ(path: str = "/api/comments/", token: str | None = None,
            json_body: bytes | None = None) -> dict:
    """A request as gunicorn hands it over: a GET, or a POST of ``json_body``."""
    signed_in = {"HTTP_AUTHORIZATION": f"Token {token}"} if token else {}
    posted = {} if json_body is None else {
        "REQUEST_METHOD": "POST", "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(json_body)), "HTTP_ACCEPT": "application/json"}
    return {**signed_in, "REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": "",
            "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "8000", "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(json_body or b""), "wsgi.errors": sys.stderr, **posted,
            "HTTP_HOST": "127.0.0.1:8000", "SERVER_PROTOCOL": "HTTP/1.1",
            "REMOTE_ADDR": "127.0.0.1", "wsgi.version": (1, 0), "wsgi.multithread": False,
            "wsgi.multiprocess": True, "wsgi.run_once": False}


def answered(app: Callable, request: dict, expected: str) -> bytes:
    """The body ``app`` answers ``request`` with, called as a WSGI server would. Anything
    but the ``expected`` status stops the run: a timing of error answers would say
    nothing about the request timed."""
    statuses: list[str] = []
    body = app(request, lambda status, headers, exc_info=None: statuses.append(status))
    try:
        content = b"".join(body)
    finally:
        getattr(body, "close", lambda: None)()
    if not statuses[0].startswith(expected):
        raise SystemExit(f"the app answered {statuses[0]}: {content[:200]!r}")
    return content


def caller(app: Callable, token: str | None = None, query: str = "") -> Callable[[], bytes]:
    """The app's page 1 (or the page ``query`` asks for), as a WSGI server would call it;
    its body (each a 200)."""
    def call() -> bytes:
        request = environ(token=token)
        request["QUERY_STRING"] = query
        return answered(app, request, "200")
    return call


def random_pager(app: Callable, seed: int = 7) -> Callable[[], bytes]:
    """The app's random pages of the whole site's list (each a 200), page numbers drawn
    from a generator seeded with ``seed``, so that two runs ask for the same pages: the
    long tail, where the response cache rarely helps."""
    pages = json.loads(caller(app)())["p8n"]["num_pages"]
    rng = random.Random(seed)

    def call() -> bytes:
        request = environ()
        request["QUERY_STRING"] = f"page={rng.randint(1, pages)}"
        return answered(app, request, "200")
    return call


def poster(app: Flask, token: str) -> Callable[[], bytes]:
    """The app answering posts of new comments by ``token``'s user, on the database's
    first comic page, called as a WSGI server would; the body of each (each a 201)."""
    import sqlalchemy as sa

    from commentsvc.storage import engine

    with app.app_context(), engine.get_engine().connect() as conn:
        page = conn.execute(sa.text("SELECT MIN(id) FROM commentsvc_comicpage")).scalar()
    if page is None:
        raise SystemExit("the database has no comic page to post on")
    posts = itertools.count()

    def call() -> bytes:
        body = json.dumps({"content_type": "comics.comicpage", "object_id": page,
                           "body": f"in-process post {next(posts)}"}).encode()
        return answered(app, environ(token=token, json_body=body), "201")
    return call


def deleter(app: Flask, token: str, comments: int) -> Callable[[], bytes]:
    """The app answering deletes by ``token``'s user of ``comments`` comments that user
    posted first (``poster``), one each call, newest first; the body of each (each a 204).
    """
    post = poster(app, token)
    waiting = [json.loads(post())["id"] for _ in range(comments)]

    def call() -> bytes:
        request = environ(path=f"/api/comments/{waiting.pop()}/", token=token)
        request["REQUEST_METHOD"] = "DELETE"
        return answered(app, request, "204")
    return call


def service_app(cache_mb: int) -> Flask:
    """The standalone service as the environment configures it (DATABASE_URL among the
    settings), with a response cache of ``cache_mb`` and no posting limit (the post case
    posts hundreds of times as one user)."""
    from commentsvc import settings
    from commentsvc.standalone import create_app

    return create_app({**settings.from_environment(), "COMMENTSVC_RESPONSE_CACHE_MB": cache_mb,
                       "COMMENTSVC_POST_RATE_LIMIT": ""})


def bare_app(body: bytes, database_read: str | None = None) -> Flask:
    """bench/bare_app.py (the one beside this file) serving ``body``, running the one
    statement ``database_read`` names ("counter" or "page") first, if any."""
    with tempfile.NamedTemporaryFile(suffix=".json") as body_file:
        body_file.write(body)
        body_file.flush()
        os.environ["BENCH_BODY_FILE"] = body_file.name  # read once, as the module loads
        if database_read:
            os.environ["BENCH_DB_READ"] = database_read
        spec = importlib.util.spec_from_file_location(
            "bench_bare_app", Path(__file__).with_name("bare_app.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    app: Flask = module.app
    return app


def microseconds(call: Callable[[], bytes], requests: int) -> tuple[float, float]:
    """Microseconds a request: wall time, and this process's CPU time (the database's
    own work and the waits for it left out)."""
    for _ in range(requests // 10):
        call()
    started, cpu = time.perf_counter(), time.process_time()
    for _ in range(requests):
        call()
    return ((time.perf_counter() - started) / requests * 1e6,
            (time.process_time() - cpu) / requests * 1e6)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--token", help="a sign-in key (flask create-token): page 1 is also "
                                        "read signed in, with the cache on; a comment "
                                        "posted, and one deleted")
    parser.add_argument("--checkout", type=Path,
                        help="serve this checkout's service instead of this one's")
    args = parser.parse_args()
    if args.checkout:  # before anything imports the service
        sys.path.insert(0, str(args.checkout.resolve()))
    if not os.environ.get("DATABASE_URL"):
        print("set DATABASE_URL to the database to serve", file=sys.stderr)
        return 2
    apps = {label: service_app(cache_mb)
            for label, cache_mb in (("service page 1, cache on", 64),
                                    ("service page 1, cache off", 0))}
    calls = {label: caller(app) for label, app in apps.items()}
    if args.token:
        calls["service page 1, signed in"] = caller(apps["service page 1, cache on"],
                                                    args.token)
        calls["service post, signed in"] = poster(apps["service page 1, cache on"],
                                                  args.token)
        calls["service delete, signed in"] = deleter(
            apps["service page 1, cache on"], args.token,
            (args.requests + args.requests // 10) * args.rounds)
    bare = bare_app(calls["service page 1, cache on"]())
    calls = {"bare Flask view, same body": caller(bare), **calls}
    timings: dict[str, list[tuple[float, float]]] = {name: [] for name in calls}
    stderr, sys.stderr = sys.stderr, open(os.devnull, "w")  # noqa: SIM115
    try:
        for _ in range(args.rounds):
            for name, call in calls.items():
                timings[name].append(microseconds(call, args.requests))
    finally:
        sys.stderr.close()
        sys.stderr = stderr
    for name, values in timings.items():
        walls, cpus = [wall for wall, _ in values], [cpu for _, cpu in values]
        print(f"{name:<30} {statistics.median(walls):>8.1f} µs a request, "
              f"{statistics.median(cpus):>7.1f} µs of CPU "
              f"(rounds: {', '.join(f'{w:.1f}/{c:.1f}' for w, c in values)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
