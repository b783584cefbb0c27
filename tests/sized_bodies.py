"""Request bodies of an exact size in each media type the API reads, and HTTP/1.1 over a
plain socket to send them as http.client will not: real chunked encoding
(Transfer-Encoding: chunked, no Content-Length) cut into many chunks.

The padding is something every reader ignores, so a sized body means the same fields at
any size: white space after a JSON object, empty ``&`` pairs in a urlencoded form, and a
part without a name in a multipart one.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from urllib.parse import urlencode

KINDS = {
    "json": "application/json",
    "urlencoded": "application/x-www-form-urlencoded",
    "multipart": "multipart/form-data; boundary=XX",
}


def sized(kind: str, fields: dict, size: int) -> bytes:
    """``fields`` as a body of ``kind`` exactly ``size`` bytes long."""
    if kind == "json":
        raw = json.dumps(fields).encode()
        return _fill(raw, b" " * (size - len(raw)), size)
    if kind == "urlencoded":
        raw = urlencode({k: _form_value(v) for k, v in fields.items()}).encode()
        return _fill(raw, b"&" * (size - len(raw)), size)
    named = b"".join(
        f'--XX\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{_form_value(v)}\r\n'
        .encode() for k, v in fields.items())
    nameless, end = b"--XX\r\nContent-Disposition: form-data\r\n\r\n", b"\r\n--XX--\r\n"
    padding = size - len(named) - len(nameless) - len(end)
    return _fill(named + nameless + b"x" * padding + end, b"", size)


def _form_value(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _fill(raw: bytes, padding: bytes, size: int) -> bytes:
    body = raw + padding
    assert len(body) == size, f"{size} bytes is too small for these fields"
    return body


@dataclass
class RawAnswer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self):
        return json.loads(self.body)


def chunked(body: bytes, chunk_size: int) -> bytes:
    """``body`` in chunked transfer coding: chunks of ``chunk_size`` bytes, then the last."""
    pieces = [body[i:i + chunk_size] for i in range(0, len(body), chunk_size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces) + b"0\r\n\r\n"


def send(port: int, method: str, path: str, body: bytes, headers: dict[str, str],
         chunk_size: int | None = None, timeout: float = 20) -> RawAnswer:
    """One request on a new loopback connection (Connection: close): the body with a
    Content-Length, or chunked when ``chunk_size`` is given. The answer is read even when
    the server stopped reading the body early."""
    framing = ({"Transfer-Encoding": "chunked"} if chunk_size
               else {"Content-Length": str(len(body))})
    head = "".join(f"{name}: {value}\r\n" for name, value in {
        "Host": f"127.0.0.1:{port}", "Connection": "close", **framing, **headers}.items())
    payload = chunked(body, chunk_size) if chunk_size else body
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(f"{method} {path} HTTP/1.1\r\n{head}\r\n".encode("latin-1"))
        try:
            sock.sendall(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered without reading all of it: the answer says why
        received = bytearray()
        while True:
            part = sock.recv(65536)
            if not part:
                break
            received += part
    head_bytes, _, rest = bytes(received).partition(b"\r\n\r\n")
    lines = head_bytes.decode("latin-1").split("\r\n")
    found = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        found[name.strip().lower()] = value.strip()
    if found.get("transfer-encoding", "").lower() == "chunked":
        rest = _dechunked(rest)
    return RawAnswer(int(lines[0].split()[1]), found, rest)


def _dechunked(data: bytes) -> bytes:
    out = bytearray()
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += data[:size]
        data = data[size + 2:]
    return bytes(out)
