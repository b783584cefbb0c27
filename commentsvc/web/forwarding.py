"""Which scheme and host a request came with: forwarded headers count only from a proxy the
service is told to trust (COMMENTSVC_TRUSTED_PROXIES), whatever server runs the app.

A WSGI server may apply X-Forwarded-Proto on its own: gunicorn does for peers in its
``forwarded_allow_ips``, which trusts loopback unless told otherwise (and any peer on a
unix socket). With no trusted proxy, ``from_socket`` undoes that by taking the scheme from
the connection itself: https only when gunicorn's client socket is a TLS socket.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterable
from typing import TYPE_CHECKING, TypeAlias

from werkzeug.middleware.proxy_fix import ProxyFix

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

WSGIApp: TypeAlias = "WSGIApplication"


class SchemeFromSocket:
    """WSGI middleware: wsgi.url_scheme is what the client's connection is (under gunicorn,
    which names the socket in environ["gunicorn.socket"]), never what a header claimed."""

    def __init__(self, app: WSGIApp):
        self.app = app

    def __call__(self, environ: WSGIEnvironment,
                 start_response: StartResponse) -> Iterable[bytes]:
        sock = environ.get("gunicorn.socket")
        if sock is not None:
            environ["wsgi.url_scheme"] = "https" if isinstance(sock, ssl.SSLSocket) else "http"
        return self.app(environ, start_response)


# The schemes the service is reached by.
_SCHEMES = frozenset(("http", "https"))


class KnownScheme:
    """WSGI middleware behind ProxyFix: the scheme a trusted proxy's X-Forwarded-Proto
    named, in lower case (schemes are case-insensitive, and page links leave out port 443
    only for ``https``); one that is neither http nor https is no scheme the service is
    reached by, so the connection's own stands."""

    def __init__(self, app: WSGIApp):
        self.app = app

    def __call__(self, environ: WSGIEnvironment,
                 start_response: StartResponse) -> Iterable[bytes]:
        scheme = str(environ.get("wsgi.url_scheme", "http")).lower()
        if scheme not in _SCHEMES:
            scheme = environ.get("werkzeug.proxy_fix.orig", {}).get("wsgi.url_scheme", "http")
        environ["wsgi.url_scheme"] = scheme
        return self.app(environ, start_response)


def trusting(app: WSGIApp, proxies: int) -> WSGIApp:
    """``app`` honouring X-Forwarded-For/Proto/Host from ``proxies`` hops, or from none."""
    if proxies:
        return ProxyFix(KnownScheme(app), x_for=proxies, x_proto=proxies, x_host=proxies)
    return SchemeFromSocket(app)
