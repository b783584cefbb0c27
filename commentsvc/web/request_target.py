"""Refusing, before any view runs, a request whose target the service cannot answer as
asked: a Host that names no host, or a path with an empty segment.

Page URLs, ``Location`` and redirects are absolute, built from the request's host; with a
malformed Host (``a b``, ``x/y``, ``a@b``, a bad port) they would come out broken
(``http:///api/comments/``), so such a request is 400 (RFC 9112 section 3.2). A path
with an empty segment (``//api/comments/``, ``/api//comments/``) names no resource: 404
like any unknown path, never a redirect (one built from ``//evil.example/...`` would
send a client elsewhere). Both apply where the service answers errors as JSON: its
``/api/`` prefix wherever it is mounted, every path standalone (errors.py).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from functools import lru_cache

from flask import Flask, Request, Response, request
from werkzeug.exceptions import BadRequest, HTTPException, NotFound

INVALID_HOST = "Invalid Host header."
MISSING_HOST = "A Host header is required."
# Protocols whose requests may come without a Host (RFC 9112 section 3.2: HTTP/1.1 may not).
_HOSTLESS_PROTOCOLS = ("HTTP/1.0", "HTTP/0.9")
_EXTENSION = "commentsvc_request_target"

_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_DNS_NAME = re.compile(rf"(?:{_LABEL}\.)*{_LABEL}\.?")
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_IPV4 = re.compile(rf"{_OCTET}(?:\.{_OCTET}){{3}}")
_IPV6_CHARS = re.compile(r"[0-9A-Fa-f:.]+")
_PORT = re.compile(r"[1-9][0-9]{0,4}")


@lru_cache(maxsize=256)  # a service hears the same few hosts on nearly every request
def valid_host(host: str) -> bool:
    """Whether ``host`` is ``name[:port]`` as the page URLs may repeat it.

    The name is a DNS name (ASCII letters, digits and hyphens in dot-separated labels of
    1 to 63 characters, no label starting or ending with a hyphen, at most 253 characters,
    any case, one optional trailing dot; an internationalised name in its ``xn--`` form),
    a dotted IPv4 address (four numbers 0-255 without leading zeros; a name whose last
    label is all digits must be one), or an IPv6 address in brackets (no zone). The port,
    if any, is 1 to 65535 without leading zeros.

    >>> [valid_host(h) for h in ("example.com", "Example.COM.", "xn--bcher-kva.de",
    ...                          "localhost:8080", "192.0.2.1:443", "[::1]", "[2001:db8::7]:80")]
    [True, True, True, True, True, True, True]
    >>> any(valid_host(h) for h in ("", "a b", "x/y", "a@b", "host:abc", "host:0", "host:65536",
    ...                             "host:", "host:080", "bücher.de", "my_host", "a..b", "-a.com",
    ...                             "256.1.1.1", "1.2.3", "[::1", "::1", "[fe80::1%25eth0]"))
    False
    """
    if host.startswith("["):
        address, bracket, port = host[1:].partition("]")
        if not bracket or not _IPV6_CHARS.fullmatch(address) or not _valid_port(port):
            return False
        try:
            ipaddress.IPv6Address(address)
        except ValueError:
            return False
        return True
    name, colon, port = host.partition(":")
    if colon and not _valid_port(colon + port):
        return False
    if name.rstrip(".").rpartition(".")[2].isdigit():
        return _IPV4.fullmatch(name) is not None
    return len(name.rstrip(".")) <= 253 and _DNS_NAME.fullmatch(name) is not None


def _valid_port(suffix: str) -> bool:
    """``""`` (no port) or ``:N`` with N from 1 to 65535."""
    if not suffix:
        return True
    port = suffix[1:]
    return suffix[0] == ":" and _PORT.fullmatch(port) is not None and int(port) <= 65535


def host_problem(req: Request) -> str | None:
    """Why this request's host cannot make a URL, or None when it can.

    Without a Host, an HTTP/1.0 request is given the server's own address (as WSGI and
    Werkzeug do); an HTTP/1.1 request is refused.
    """
    sent = req.environ.get("HTTP_HOST")
    if sent is not None:
        return None if valid_host(sent) else INVALID_HOST
    if req.environ.get("SERVER_PROTOCOL") not in _HOSTLESS_PROTOCOLS:
        return MISSING_HOST
    server = req.host  # SERVER_NAME:SERVER_PORT, "" for a Unix socket
    return None if server and valid_host(server) else MISSING_HOST


def refuse_unanswerable(app: Flask, prefix: str,
                        answer: Callable[[HTTPException], Response]) -> None:
    """Check the Host and the path of every request of ``app`` under ``prefix``, and
    refuse what they cannot name with ``answer`` (errors.to_response: JSON): returned,
    not raised, so that no error page of a host (``@app.errorhandler(404)``, chosen before
    any handler of every HTTPException) answers instead.

    The hook is registered once per app; later calls add prefixes. ``prefix`` is compared
    with the path Werkzeug routes (extra leading slashes dropped), so ``//api/comments/``
    is checked like ``/api/comments/``.
    """
    prefixes: tuple[str, ...] | None = app.extensions.get(_EXTENSION)
    if prefixes is not None:
        if prefix not in prefixes:
            app.extensions[_EXTENSION] = (*prefixes, prefix)
        return
    app.extensions[_EXTENSION] = (prefix,)
    extensions = app.extensions

    def check() -> Response | None:
        """The prefix's answer to a request it cannot serve (400 or 404), or None."""
        # Flask types the proxy as the Request it stands for; this is the Request itself.
        req: Request = request._get_current_object()  # type: ignore[attr-defined]
        if not req.path.startswith(extensions[_EXTENSION]):
            return None
        problem = host_problem(req)
        if problem is not None:
            return answer(BadRequest(problem))
        if "//" in req.environ.get("PATH_INFO", ""):
            return answer(NotFound())
        return None

    app.before_request(check)
