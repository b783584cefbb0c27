"""A PostgreSQL cluster of a test's own, which it may stop and start at will.

Fault tests must never stop the shared server, so they make one here: ``initdb`` into a
fresh directory, a free loopback port, trust authentication. Stopped and started again
it keeps its port and data directory, as a restarted production server would.

    with PgCluster() as cluster:          # initdb + start
        engine = create_engine(cluster.url("postgres"))
        cluster.stop("fast")              # or "immediate": a crash, recovery on start
        cluster.start()
        with PgCluster(standby_of=cluster) as replica:   # a streaming replica of it
            replica.wait_for_replay(cluster.current_lsn())

initdb refuses to run as root, so as root the server's programs run as the ``postgres``
user, who then owns the directory.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from commentsvc.storage.database_urls import normalise_url

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def server_bindir() -> Path | None:
    """Where initdb, pg_ctl and postgres are: pg_config's bindir, else Debian's layout."""
    candidates = []
    if shutil.which("pg_config"):
        found = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True)
        candidates.append(found.stdout.strip())
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for candidate in candidates:
        if candidate and all((Path(candidate) / name).exists()
                             for name in ("initdb", "pg_ctl", "postgres")):
            return Path(candidate)
    return None


def skip_reason() -> str | None:
    """Why a private cluster cannot be made here (never a reason in CI: there it fails)."""
    if IN_CI:
        return None
    if server_bindir() is None:
        return "PostgreSQL server programs (initdb, pg_ctl) are not installed"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no postgres user to run initdb as"
    return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class PgCluster:
    """One private PostgreSQL server: ``start()``, ``stop(mode)``, ``url(db)``, ``port``,
    ``data_dir``; ``destroy()`` stops it and removes its files."""

    def __init__(self, settings: dict[str, str] | None = None,
                 standby_of: PgCluster | None = None):
        bindir = server_bindir()
        if bindir is None:
            raise RuntimeError("PostgreSQL server programs not found")
        self.bindir = bindir
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="commentsvc-pg-"))
        self.data_dir = self.root / "data"
        self.log_file = self.root / "server.log"
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.root, user.pw_uid, user.pw_gid)
            self._as_user = ["runuser", "-u", "postgres", "--"]
        if standby_of is None:
            self._run("initdb", "-D", str(self.data_dir), "-A", "trust", "-U", "postgres",
                      "-E", "UTF8", "--locale", "C", "--no-sync")
        else:
            # A copy of the running primary that follows its WAL (-R writes the standby
            # settings); initdb's trust rules already let 127.0.0.1 connect for replication.
            self._run("pg_basebackup", "-D", str(self.data_dir), "-h", "127.0.0.1",
                      "-p", str(standby_of.port), "-U", "postgres", "-R", "-X", "stream",
                      "--no-sync", "-c", "fast")
        conf = {"listen_addresses": "'127.0.0.1'", "port": str(self.port),
                "unix_socket_directories": f"'{self.root}'", "fsync": "off",
                "max_connections": "50", "shared_buffers": "32MB", **(settings or {})}
        lines = "".join(f"{key} = {value}\n" for key, value in conf.items())
        self._run("sh", "-c", f"cat >> '{self.data_dir / 'postgresql.conf'}'",
                  stdin=lines, bin_prefix=False)
        self.running = False

    def _run(self, program: str, *args: str, stdin: str | None = None,
             bin_prefix: bool = True) -> None:
        path = str(self.bindir / program) if bin_prefix else program
        done = subprocess.run([*self._as_user, path, *args], input=stdin, text=True,
                              capture_output=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{program} failed: {done.stdout}{done.stderr}")

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        self._run("pg_ctl", "start", "-w", "-t", "60", "-D", str(self.data_dir),
                  "-l", str(self.log_file))
        self.running = True

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: "smart", "fast" (sessions ended, a clean shutdown) or
        "immediate" (every process killed, recovery from the WAL on the next start)."""
        self._run("pg_ctl", "stop", "-w", "-t", "60", "-m", mode, "-D", str(self.data_dir))
        self.running = False

    def url(self, database: str = "postgres") -> str:
        """The SQLAlchemy URL of ``database`` (its driver named, as the service names it)."""
        return normalise_url(self.libpq_url(database))

    def libpq_url(self, database: str = "postgres") -> str:
        """The URL as libpq (psycopg2.connect, psql) reads it."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def query(self, sql: str, params: tuple = (), database: str = "postgres"):
        """The first row of ``sql`` (None for a statement without rows), in autocommit."""
        import psycopg2

        conn = psycopg2.connect(self.libpq_url(database), connect_timeout=5)
        try:
            conn.autocommit = True
            with conn.cursor() as cursor:
                cursor.execute(sql, params)
                return cursor.fetchone() if cursor.description else None
        finally:
            conn.close()

    def current_lsn(self) -> str:
        """Where this primary's WAL ends now (everything committed so far is before it)."""
        return self.query("SELECT pg_current_wal_lsn()::text")[0]

    def wait_for_replay(self, lsn: str, seconds: float = 30) -> None:
        """Wait until this standby has replayed its primary's WAL up to ``lsn``."""
        deadline = time.monotonic() + seconds
        while not self.query("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,))[0]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the standby did not replay up to {lsn} in {seconds} s")
            time.sleep(0.02)

    def log_offset(self) -> int:
        """The server log's size now: ``log_since`` it reads what was logged after."""
        return self.log_file.stat().st_size if self.log_file.exists() else 0

    def log_since(self, offset: int) -> str:
        with open(self.log_file, "rb") as log:
            log.seek(offset)
            return log.read().decode("utf-8", "replace")

    def create_database(self, name: str) -> str:
        """Create a database (while running); its URL."""
        self._run("psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                  "-q", "-c", f'CREATE DATABASE "{name}"')
        return self.url(name)

    def destroy(self) -> None:
        if self.running:
            try:
                self.stop("immediate")
            except RuntimeError:
                pass
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PgCluster:
        self.start()
        return self

    def __exit__(self, *_exc) -> None:
        self.destroy()
