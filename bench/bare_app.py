"""The yardstick for the service's own overhead: a bare Flask view returning a fixed body.

http_bench.py serves it under the same gunicorn settings as the service, with the body of
the service's page 1, so the two differ only in what the service does per request.

    BENCH_BODY_FILE=page1.json gunicorn bench.bare_app:app
"""

from __future__ import annotations

import os
from pathlib import Path

from flask import Flask, Response

BODY = Path(os.environ["BENCH_BODY_FILE"]).read_bytes()

app = Flask(__name__)


@app.get("/api/comments/")
def fixed_body() -> Response:
    return Response(BODY, mimetype="application/json")
