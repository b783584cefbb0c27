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


def trusting(app: WSGIApp, proxies: int) -> WSGIApp:
    """``app`` honouring X-Forwarded-For/Proto/Host from ``proxies`` hops, or from none."""
    if proxies:
        return ProxyFix(app, x_for=proxies, x_proto=proxies, x_host=proxies)
    return SchemeFromSocket(app)
