"""The nginx front server's configuration, rendered from nginx.conf.j2 for one start.

nginx stands in front of gunicorn so that a slow client costs an nginx connection instead
of a gunicorn worker: it reads headers and bodies completely (within a few seconds) before
passing a request on, and takes each answer at once. Its body limit is the app's own
COMMENTSVC_MAX_REQUEST_BYTES, so the two never disagree.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined

TEMPLATE = "nginx.conf.j2"
# Seconds a client may take for its headers, and between two reads of its body.
CLIENT_TIMEOUT_SECONDS = 5
# Body bytes kept in memory per request; a larger allowed body goes to a temporary file.
MAX_BODY_BUFFER_BYTES = 65536
# What nginx answers itself: status and detail. 494 is nginx's own code for headers too
# large; the client gets the standard 431 for it. nginx refuses TRACE itself (405), a
# transfer coding other than chunked (501) and an HTTP version it does not speak (505).
# A 400's detail is the app's where nginx knows the cause (nginx.conf.j2): "A Host header
# is required." (HTTP/1.1 without Host), "Invalid Host header." (a Host not of HOST_FORM).
ERRORS = (
    (400, "Bad request."),
    (405, 'Method "TRACE" not allowed.'),
    (408, "The request was not received in time."),
    (413, "The request body is too large."),
    (414, "The request URI is too long."),
    (494, "The request headers are too large."),
    (500, "A server error occurred."),
    (501, "The transfer coding of the request is not supported."),
    (502, "The service is unavailable. Try again shortly."),
    (504, "The service did not answer in time."),
    (505, "The HTTP version of the request is not supported."),
)

# The form of every Host the app takes (web.request_target.valid_host), and of some it
# refuses (no limits on lengths, numbers or IPv6 groups): a Host without it is invalid for
# sure, so nginx may say so where it refuses the request for whatever reason.
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
HOST_FORM = rf"(?:(?:{_LABEL}\.)*{_LABEL}\.?|\[[0-9A-Fa-f:.]+\])(?::[1-9][0-9]{{0,4}})?"


@dataclass(frozen=True)
class FrontConfig:
    """What one nginx start needs: where it listens, where gunicorn is (``write_socket``:
    the writers' own gunicorn, which then takes every method but GET, HEAD and OPTIONS),
    the body limit."""

    host: str
    port: int
    socket: Path
    max_body_bytes: int
    write_socket: Path | None = None
    nginx_workers: int = 1
    worker_connections: int = 8192  # per nginx worker; each may hold one to gunicorn too
    app_timeout_seconds: int = 35  # just over gunicorn's timeout: its own verdict comes first
    retry_after_seconds: int = 5  # the 502's Retry-After (COMMENTSVC_RETRY_AFTER)
    shutdown_seconds: int = 35

    @property
    def listen(self) -> str:
        """host:port as nginx spells it ([::1]:8000 for IPv6)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def worker_user() -> str | None:
    """The user nginx's workers run as when it starts as root (else it keeps its own)."""
    if os.geteuid() != 0:
        return None
    nobody = pwd.getpwnam("nobody")
    return f"nobody {grp.getgrgid(nobody.pw_gid).gr_name}"


def render(config: FrontConfig) -> str:
    """The nginx.conf text for ``config``."""
    environment = Environment(loader=FileSystemLoader(Path(__file__).parent),
                              undefined=StrictUndefined, keep_trailing_newline=True,
                              trim_blocks=True, lstrip_blocks=True, autoescape=False)
    return environment.get_template(TEMPLATE).render(
        user=worker_user(), nginx_workers=config.nginx_workers,
        worker_connections=config.worker_connections, error_log_level="warn",
        shutdown_seconds=config.shutdown_seconds,
        client_timeout_seconds=CLIENT_TIMEOUT_SECONDS,
        send_timeout_seconds=2 * CLIENT_TIMEOUT_SECONDS,
        keepalive_seconds=3 * CLIENT_TIMEOUT_SECONDS,
        max_body_bytes=config.max_body_bytes,
        body_buffer_bytes=min(config.max_body_bytes, MAX_BODY_BUFFER_BYTES),
        socket=config.socket, write_socket=config.write_socket, listen=config.listen,
        app_timeout_seconds=config.app_timeout_seconds, host_form=HOST_FORM,
        retry_after_seconds=config.retry_after_seconds,
        errors=[(status, _in_nginx_string(json.dumps(detail)[1:-1]))
                for status, detail in ERRORS])


def _in_nginx_string(text: str) -> str:
    """``text`` as it goes between nginx's single quotes (its backslashes doubled)."""
    return text.replace("\\", "\\\\").replace("'", "\\'")


def prepare_runtime_dir(runtime_dir: Path, config: FrontConfig) -> Path:
    """Write nginx.conf and the temporary-file directories into ``runtime_dir``."""
    (runtime_dir / "tmp").mkdir(parents=True, exist_ok=True)
    conf = runtime_dir / "nginx.conf"
    conf.write_text(render(config), encoding="utf-8")
    user = worker_user()
    if user is not None:  # as root, nginx's workers are nobody: they need the directory
        closed = [str(parent) for parent in runtime_dir.resolve().parents
                  if not os.stat(parent).st_mode & stat.S_IXOTH]
        if closed:
            raise ValueError(f"nginx's workers (user nobody) cannot reach {runtime_dir}: "
                             f"{', '.join(closed)} is not searchable by others")
        nobody = pwd.getpwnam(user.split()[0])
        for path in (runtime_dir, runtime_dir / "tmp"):
            os.chown(path, nobody.pw_uid, nobody.pw_gid)
    return conf


def find_nginx(program: str | None = None) -> str | None:
    """The nginx program: ``program`` (a path, or a name looked up on PATH) when given,
    else on PATH or where Debian puts it; None when it is not an executable file, so
    that the launcher can say so before it starts anything."""
    if program is not None:
        return shutil.which(program)
    for candidate in (shutil.which("nginx"), "/usr/sbin/nginx"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None
