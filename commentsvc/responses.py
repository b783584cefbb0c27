"""How every answer of the collection is built: compact UTF-8 JSON and the shared headers."""

from __future__ import annotations

from typing import Any

import orjson
from flask import Response

ALLOW = "GET, POST, HEAD, OPTIONS"


def api_response(payload: Any, status: int = 200,
                 headers: dict[str, str] | None = None) -> Response:
    """JSON in the key order it was built in, non-ASCII as itself, with Allow and Vary.

    A 304 carries the headers only.
    """
    body = b"" if status == 304 else orjson.dumps(payload)
    return encoded_response(body, status, headers)


def encoded_response(body: bytes, status: int = 200,
                     headers: dict[str, str] | None = None) -> Response:
    """A response of an already encoded JSON body, with the headers every answer needs."""
    shared = {"Allow": ALLOW, "Vary": "Accept"}
    return Response(body, status=status, mimetype="application/json",
                    headers={**shared, **headers} if headers else shared)
