"""A throw-away PostgreSQL server for the tests, from the distribution's server binaries.

Each pytest process (each xdist worker) starts one server of its own on first use: a
fresh cluster (``initdb``) in a temporary folder, listening on a Unix socket in that
folder and on 127.0.0.1 at a free port, and stops it at exit. Nothing else on the
machine is used or changed, and no server is left running.

* ``PgServer.url(database)`` is a libpq URL over the Unix socket as the superuser
  (``trust`` there); ``PgServer.tcp_url(database, user, password)`` one over
  127.0.0.1, where the server asks for a password (scram-sha-256).
* ``PgServer.create_database()`` makes an empty database with a fresh name.

As root (CI runs as root, and ``initdb`` refuses to), the server runs as the
``postgres`` user the Debian package creates, via ``runuser``.

``fsync = off``: the tests kill writers and restart the server, and an operating
system that keeps running keeps every write the server made either way; what fsync
adds (surviving a power cut) no test can check, and it makes each ``CREATE DATABASE``
an order of magnitude slower. The benchmarks run their own server with fsync on.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
from pathlib import Path

__all__ = ["PgServer", "bindir", "server"]

SUPERUSER = "postgres"


def bindir() -> Path:
    """Where the server binaries are: ``$GM_PG_BINDIR``, else Debian's newest, else ``PATH``."""
    env = os.environ.get("GM_PG_BINDIR")
    if env:
        return Path(env)
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(Path(p).parts[4])
    )
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("pg_ctl")
    if on_path:
        return Path(on_path).parent
    raise RuntimeError(
        "no PostgreSQL server binaries (pg_ctl) found: run tests/system-packages.sh, "
        "which installs Debian's postgresql package, or set GM_PG_BINDIR"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgServer:
    """One running throw-away cluster (see the module docstring)."""

    def __init__(self) -> None:
        self.bin = bindir()
        self.root = Path(tempfile.mkdtemp(prefix="gm-pg-"))
        self.data = self.root / "data"
        self.socket_dir = self.root / "socket"
        self.log = self.root / "server.log"
        self.port = _free_port()
        self._as_postgres = os.geteuid() == 0
        self._names = itertools.count(1)
        self._lock = threading.Lock()
        self._template: str | None = None
        self._template_lock = threading.Lock()
        self.socket_dir.mkdir()
        if self._as_postgres:
            user = pwd.getpwnam(SUPERUSER)
            for path in (self.root, self.socket_dir):
                os.chown(path, user.pw_uid, user.pw_gid)
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            SUPERUSER,
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        )
        with open(self.data / "postgresql.conf", "a", encoding="utf-8") as conf:
            conf.write(
                f"listen_addresses = '127.0.0.1'\nport = {self.port}\n"
                f"unix_socket_directories = '{self.socket_dir}'\n"
                "fsync = off\nfull_page_writes = off\nmax_connections = 200\n"
                "shared_buffers = 32MB\n"
            )
        self.start()
        atexit.register(self.stop)

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self.bin / tool), *args]
        if self._as_postgres:
            command = ["runuser", "-u", SUPERUSER, "--", *command]
        subprocess.run(command, check=True, capture_output=True, cwd="/")

    def start(self) -> None:
        """Start (or restart after :meth:`kill`) the server and wait until it accepts connections."""
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``immediate`` is a crash: no shutdown checkpoint)."""
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(subprocess.CalledProcessError):
                self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def restart(self, mode: str = "fast") -> None:
        self.stop(mode)
        self.start()

    def url(self, database: str = "postgres") -> str:
        """A libpq URL over the Unix socket, as the superuser."""
        return f"postgresql://{SUPERUSER}@/{database}?host={self.socket_dir}&port={self.port}"

    def tcp_url(self, database: str, user: str, password: str) -> str:
        """A libpq URL over 127.0.0.1 with a password."""
        return f"postgresql://{user}:{password}@127.0.0.1:{self.port}/{database}"

    def sql(self, statement: str, database: str = "postgres") -> None:
        """Run one statement as the superuser (autocommit)."""
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True) as conn:
            conn.execute(statement)  # type: ignore[arg-type]

    def create_database(self) -> str:
        """An empty database with a fresh name; its name."""
        with self._lock:
            name = f"t{os.getpid()}_{next(self._names)}"
        self.sql(f'CREATE DATABASE "{name}" TEMPLATE template0')
        return name

    def schema_database(self) -> str:
        """A fresh database with this release's schema applied; its name.

        A copy of a template database upgraded once per server (``CREATE DATABASE
        ... TEMPLATE``), so a test gets an empty deployment without running the
        migrations again.
        """
        with self._template_lock:
            if self._template is None:
                from governed_memory._postgres import Database, upgrade_schema

                template = self.create_database()
                db = Database(self.url(template), min_size=0)
                try:
                    upgrade_schema(db)
                finally:
                    db.close()
                self._template = template
            with self._lock:
                name = f"t{os.getpid()}_{next(self._names)}"
            self.sql(f'CREATE DATABASE "{name}" TEMPLATE "{self._template}"')
        return name

    def dump(self, url: str) -> bytes:
        """``pg_dump`` of the database at ``url`` (one of :meth:`url`'s), as plain SQL."""
        done = subprocess.run(
            [str(self.bin / "pg_dump"), "--dbname", url], check=True, capture_output=True
        )
        return done.stdout

    def cleanup(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


_server: PgServer | None = None
_server_lock = threading.Lock()


def server() -> PgServer:
    """This process's server, started on first use and stopped at exit."""
    global _server
    with _server_lock:
        if _server is None:
            _server = PgServer()
            atexit.register(_server.cleanup)
        return _server
