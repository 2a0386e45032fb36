"""A private PostgreSQL server for the test session (initdb, pg_ctl, a Unix socket), and a fresh
database per test; skips with the reason where PostgreSQL or psycopg is missing."""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PG_USER = "autotune"  # the database superuser initdb creates (not the OS user)
START_TIMEOUT_S = 60
_names = itertools.count()


def find_pg_bin() -> Path | None:
    """The directory holding initdb and pg_ctl: PATH first, then Debian's versioned directories
    (/usr/lib/postgresql/<major>/bin, newest major first), where the package puts them."""
    found = shutil.which("initdb")
    if found and (Path(found).resolve().parent / "pg_ctl").exists():
        return Path(found).resolve().parent
    majors = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: (
            int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0
        ),
    )
    for initdb in reversed(majors):
        if (Path(initdb).parent / "pg_ctl").exists():
            return Path(initdb).parent
    return None


def _unprivileged_user() -> str | None:
    """initdb and postgres refuse to run as root: the user to run them as, or None (as we are)."""
    if os.geteuid() != 0:
        return None
    import pwd

    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise RuntimeError("running as root with neither a 'postgres' nor a 'nobody' user")


@dataclass
class PgServer:
    """A running server: its data directory and socket directory, and how to reach it."""

    root: Path  # holds data/ and the socket; removed at the end
    bin: Path
    user: str | None

    @property
    def socket_dir(self) -> Path:
        return self.root

    def url(self, database: str = "postgres") -> str:
        # psycopg 3 through SQLAlchemy; host= a directory means a Unix socket.
        return f"postgresql+psycopg://{PG_USER}@/{database}?host={self.socket_dir}"

    def _as_user(self, *argv: str) -> list[str]:
        return ["runuser", "-u", self.user, "--", *argv] if self.user else list(argv)

    def start(self) -> None:
        data = self.root / "data"
        run = dict(capture_output=True, text=True, timeout=START_TIMEOUT_S)
        initdb = self._as_user(
            str(self.bin / "initdb"),
            "-D",
            str(data),
            "-U",
            PG_USER,
            "--auth=trust",
            "--encoding=UTF8",
            "--no-sync",  # a throw-away server: no fsync during initdb
        )
        _checked(initdb, run)
        options = (
            f"-c listen_addresses='' -c unix_socket_directories='{self.socket_dir}' "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
            "-c max_connections=200"
        )
        log = self.root / "server.log"
        start = self._as_user(
            str(self.bin / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options, "-w", "start"
        )
        try:
            _checked(start, run)
        except RuntimeError as err:
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise RuntimeError(f"{err}\n{tail}") from None

    def stop(self) -> None:
        stop = self._as_user(
            str(self.bin / "pg_ctl"), "-D", str(self.root / "data"), "-m", "immediate", "stop"
        )
        subprocess.run(stop, capture_output=True, timeout=START_TIMEOUT_S)

    def create_database(self) -> str:
        """A fresh empty database; returns its SQLAlchemy URL."""
        import psycopg

        name = f"t{os.getpid()}_{next(_names)}"
        conninfo = f"host={self.socket_dir} user={PG_USER} dbname=postgres"
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


def _checked(argv: list[str], run: dict) -> None:
    result = subprocess.run(argv, **run)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({result.returncode}): {result.stderr}")


def pg_unavailable_reason() -> str | None:
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install -e '.[postgres]')"
    if find_pg_bin() is None:
        return "PostgreSQL is not installed (no initdb/pg_ctl on PATH or in /usr/lib/postgresql)"
    return None


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One private server for the whole session, stopped and removed at the end."""
    reason = pg_unavailable_reason()
    if reason:
        pytest.skip(reason)
    user = _unprivileged_user()
    # Short and outside pytest's 0700 tmp tree: the socket path has a ~100 character limit and
    # the server's user must reach its directory.
    root = Path(tempfile.mkdtemp(prefix="autotune-pg-"))
    server = PgServer(root, find_pg_bin(), user)
    try:
        if user:
            shutil.chown(root, user=user)
        root.chmod(0o755)
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server: PgServer) -> str:
    """SQLAlchemy URL of a fresh database on the session's server."""
    return pg_server.create_database()
