"""Whether a server could listen on HOST:PORT, asked before saying "Serving ...".

    python -m commentsvc.operations.ports --host 127.0.0.1 --port 8000 --fix "PORT={next} make run"

exits 2 with one line naming the problem and the fix (``{next}`` in it: the next port)
when the port is taken (or the address is not this machine's), else 0 silently: `make
run` asks it before it prints its URL and starts gunicorn, and `commentsvc serve` before
it starts anything.
"""

from __future__ import annotations

import errno
import socket

import click

from commentsvc.operations.startup import StartupError


def problem(host: str, port: int, fix: str) -> str | None:
    """Why nothing could listen on ``host:port`` now, with ``fix`` as the way out; or None.

    The probe binds as gunicorn and nginx do (SO_REUSEADDR), so a port left in TIME_WAIT
    by a server just stopped does not count as taken.
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as exc:
        return (f"Cannot listen on {host}: not a known address ({exc.strerror}); "
                "choose another host.")
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return (f"Port {port} on {host} is already in use (another server is "
                        f"running there): stop it, or choose another port: {fix}.")
            if exc.errno == errno.EACCES:
                return (f"Port {port} on {host} needs more privileges than this user has: "
                        f"choose a port above 1023: {fix}.")
            if exc.errno == errno.EADDRNOTAVAIL:
                return (f"Cannot listen on {host}: not an address of this machine; "
                        f"choose another host (127.0.0.1, or 0.0.0.0 for every interface).")
            return f"Cannot listen on {host}:{port} ({exc.strerror}): {fix}."
    return None


def next_port(port: int) -> int:
    """The port to suggest instead of ``port``: the next one, or the one before the last."""
    return port + 1 if port < 65535 else port - 1


def check(host: str, port: int, fix: str) -> None:
    """Raise StartupError (one line, exit status 2) when ``host:port`` cannot be listened on."""
    found = problem(host, port, fix)
    if found is not None:
        raise StartupError(found)


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option("--fix", default="PORT={next} make run", show_default=True,
              help="How the caller chooses another port, shown in the message; {next} "
                   "stands for the port after --port.")
def main(host: str, port: int, fix: str) -> None:
    """Exit 2 with one line when HOST:PORT cannot be listened on."""
    check(host, port, fix.replace("{next}", str(next_port(port))))


if __name__ == "__main__":
    main()
