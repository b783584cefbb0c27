"""Reading the fields of a write: JSON or form data, within a size limit.

Every way a body can be unreadable gets its own clear answer: too large 413, a media
type the API does not parse 415, malformed JSON 400, JSON that is not an object 400.
A repeated form field counts by its last value and an empty one is missing, as in the
query string.
"""

from __future__ import annotations

from typing import Any

import orjson
from flask import Request
from werkzeug.exceptions import RequestEntityTooLarge

from .errors import APIError, TooLarge, UnsupportedMediaType, ValidationFailed

FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def read_fields(req: Request, max_bytes: int) -> dict[str, Any]:
    """The request's fields as a dict; an empty body without a media type is no fields."""
    if req.content_length is not None and req.content_length > max_bytes:
        raise TooLarge()
    req.max_content_length = max_bytes  # also bounds a body sent without a length
    mimetype = req.mimetype
    try:
        if mimetype == "application/json" or mimetype.endswith("+json"):
            return _json_object(req.get_data(cache=True))
        if mimetype in FORM_TYPES:
            # A multipart part without a name (Werkzeug keys it None) is no field.
            return {name: values[-1] for name, values in req.form.lists()
                    if name is not None and values[-1] != ""}
        if not mimetype and not req.get_data(cache=True):
            return {}
    except RequestEntityTooLarge as exc:
        raise TooLarge() from exc
    raise UnsupportedMediaType(f'Unsupported media type "{req.content_type or ""}" in request.')


def _json_object(raw: bytes) -> dict[str, Any]:
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise APIError(f"JSON parse error - {exc}") from exc
    if not isinstance(data, dict):
        kind = {list: "list", str: "str", int: "int", float: "float", bool: "bool"}.get(
            type(data), "null")
        raise ValidationFailed({"non_field_errors": [
            f"Invalid data. Expected a dictionary, but got {kind}."]})
    return data
