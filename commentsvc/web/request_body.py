"""Reading the fields of a write: JSON or form data, within a size limit.

Every way a body can be unreadable gets its own clear answer: too large 413, a media
type the API does not parse 415 (``application/json`` itself, not the ``+json`` types, as
the API it replaces), a content coding it does not decode 415 (gzip bytes read as JSON
would be a misleading 400, and a coding named over a plain body a client's error),
malformed JSON 400, JSON that is not an object 400, chunks the server cannot decode 400.
A repeated form field counts by its last value and an empty one is missing, as in the
query string.

The body is read here, once, and never more than one byte past the limit, whether it
came with a Content-Length or chunked (Transfer-Encoding: chunked, which the WSGI server
decodes). Werkzeug's own limit is not used for that: on a body without a length it stops
reading at the limit and hands on what it read as if that were the whole body, so an
over-long form was cut short and accepted, and it cannot tell a body of exactly the limit
from a longer one.
"""

from __future__ import annotations

from io import BytesIO
from typing import Any
from urllib.parse import parse_qsl

import orjson
from flask import Request
from werkzeug.exceptions import RequestEntityTooLarge
from werkzeug.formparser import MultiPartParser
from werkzeug.sansio.multipart import Data, Epilogue, Field, File, MultipartDecoder, NeedData

from commentsvc.web.exceptions import (
    APIError,
    LengthRequired,
    TooLarge,
    UnreadableBody,
    UnsupportedMediaType,
    ValidationFailed,
)

FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
READ_SIZE = 64 * 1024


def read_fields(req: Request, max_bytes: int) -> dict[str, Any]:
    """The request's fields as a dict; an empty body without a media type is no fields.

    The size is checked before the media type, so any body over the limit is 413.
    """
    body = read_body(req, max_bytes)
    coding = req.headers.get("Content-Encoding", "").strip()
    if body and coding and coding.lower() != "identity":
        raise UnsupportedMediaType(f'Unsupported content encoding "{coding}" in request.')
    mimetype = req.mimetype
    if mimetype == "application/json":
        return _json_object(body)
    if mimetype in FORM_TYPES:
        return _form_fields(req, body, max_bytes)
    if not mimetype and not body:
        return {}
    raise UnsupportedMediaType(f'Unsupported media type "{req.content_type or ""}" in request.')


def read_body(req: Request, max_bytes: int) -> bytes:
    """The whole body, at most ``max_bytes`` long, else TooLarge (413).

    A Content-Length over the limit is refused before anything is read. A body without
    one is read only when the server ends the stream for the app (``wsgi.input_terminated``,
    as gunicorn and Werkzeug's server do for chunked bodies); a chunked body on a server
    that hands over the raw connection cannot be read safely, so it is 411.
    """
    environ = req.environ
    length = req.content_length  # None when chunked, whatever Content-Length says
    if length is not None and length > max_bytes:
        raise TooLarge()
    if length is None and "wsgi.input_terminated" not in environ:
        if "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower():
            raise LengthRequired()
        return b""  # neither a length nor chunks: no body
    try:
        body = _read_at_most(environ["wsgi.input"], max_bytes + 1 if length is None else length)
    except Exception as exc:  # noqa: BLE001 - any server's way of saying the body is broken
        # The server decodes chunks as the app reads them: a chunk size that is no number,
        # a chunk without its line end, or a chunked body cut off raises from the stream
        # (gunicorn's own exception classes, an OSError for a connection gone).
        raise UnreadableBody() from exc
    if len(body) > max_bytes:
        raise TooLarge()
    if length is not None and len(body) < length:
        raise APIError("The request body is shorter than its Content-Length.")
    return body


def _read_at_most(stream: Any, limit: int) -> bytes:
    """Up to ``limit`` bytes of ``stream``: fewer only when it ends first."""
    parts: list[bytes] = []
    left = limit
    while left > 0:
        part = stream.read(min(READ_SIZE, left))
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def _form_fields(req: Request, body: bytes, max_bytes: int) -> dict[str, Any]:
    """Form fields parsed from the body already read (urlencoded or multipart); an
    urlencoded body whose text is not UTF-8, raw or percent-encoded, is refused (Werkzeug
    would keep an undecodable %FF as its three characters, and drop every field for a raw
    byte that is not UTF-8), and so is a multipart text part that is not text in its
    charset (Werkzeug would store U+FFFD in place of its bytes)."""
    if req.mimetype == FORM_TYPES[0]:
        try:
            parse_qsl(body.decode("utf-8"), keep_blank_values=True, errors="strict")
        except UnicodeDecodeError as exc:
            raise APIError("The form data is not valid UTF-8.") from exc
    parser = req.make_form_data_parser()
    parser.max_content_length = max_bytes
    try:
        _, form, files = parser.parse(BytesIO(body), req.mimetype, len(body),
                                      req.mimetype_params)
    except RequestEntityTooLarge as exc:  # a host's smaller form-memory or parts limit
        raise TooLarge() from exc
    for _, upload in files.items(multi=True):  # a file part is no field: its copy let go
        upload.close()
    # A multipart part without a name (Werkzeug keys it None) is no field.
    fields = {name: values[-1] for name, values in form.lists()
              if name is not None and values[-1] != ""}
    if req.mimetype == FORM_TYPES[1] and any(
            REPLACED in value for values in form.listvalues() for value in values):
        _check_text_parts(body, req.mimetype_params.get("boundary", "").encode("ascii"))
    return fields


# What Werkzeug decodes a multipart text part's unreadable bytes to (and a character a
# part may also hold as written).
REPLACED = "\ufffd"


def _check_text_parts(body: bytes, boundary: bytes) -> None:
    """400 when a multipart text part is not text in its charset (UTF-8 unless it names
    ASCII or Latin-1): Werkzeug decodes such bytes to U+FFFD, which would store the text
    altered. Read only when a field holds U+FFFD, since most never do."""
    decoder = MultipartDecoder(boundary)
    decoder.receive_data(body)
    decoder.receive_data(None)
    charset: str | None = None
    chunks: list[bytes] = []
    while not isinstance(event := decoder.next_event(), NeedData | Epilogue):
        if isinstance(event, Field):
            charset, chunks = MultiPartParser().get_part_charset(event.headers), []
        elif isinstance(event, File):
            charset = None
        elif isinstance(event, Data) and charset is not None:
            chunks.append(event.data)
            if not event.more_data:
                try:
                    b"".join(chunks).decode(charset)
                except UnicodeDecodeError as exc:
                    raise APIError("The form data is not valid UTF-8.") from exc


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
