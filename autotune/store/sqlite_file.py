"""An SQLite file as found, read through a read-only connection before anything is written to it:
ours (our marker, or the schema autotune wrote before it had one), another application's, empty
or damaged; and the settings of autotune's own connections to one (busy timeout, WAL)."""

from __future__ import annotations

import os
import sqlite3
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import sqlalchemy as sa

# PRAGMA application_id of every SQLite results file autotune writes ("ATdb"): a file is known
# as ours by this, not by the names of its tables, which another program may use too.
APPLICATION_ID = 0x41546462
SQLITE_BUSY_TIMEOUT_MS = 30_000  # a writer waits this long for another process's transaction

# The columns every version of our schema has had in each table, to recognise a file written
# before the marker existed; a table of the same name without them is another program's.
CORE_COLUMNS = {
    "meta": frozenset({"key", "value"}),
    "devices": frozenset({"id", "name", "compute_capability"}),
    "runs": frozenset({"id", "device_id", "started_at"}),
    "claims": frozenset({"id", "device_id", "family", "problem_key"}),
    "evaluations": frozenset({"id", "run_id", "device_id", "family", "problem_key", "config"}),
    "baselines": frozenset({"id", "device_id", "library", "problem_key"}),
    "ceilings": frozenset({"id", "device_id", "name", "value"}),
    # Since schema 6: the observers' readings of each evaluation; later (the same schema, the
    # table created where missing), of each library baseline.
    "observations": frozenset({"evaluation_id", "name", "value"}),
    "baseline_observations": frozenset({"baseline_id", "name", "value"}),
    "repeats": frozenset({"evaluation_id", "sequence", "time_ms"}),  # since schema 8
}
LEGACY_REQUIRED = ("meta", "devices", "runs", "evaluations")  # in every version since the first


def on_connect(dbapi_connection: Any, _record: Any) -> None:
    """Every connection to a SQLite file: wait for another writer, enforce foreign keys."""
    # The busy timeout makes a second writer (another process on the same file) wait instead of
    # failing with "database is locked". WAL (use_wal) is set only once the file is known to be
    # ours: it is a property of the file, and another application's database is left as it is.
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys = ON")
    finally:
        cursor.close()


def use_wal(conn: sa.Connection) -> None:
    """WAL lets readers run beside one writer; it stays set in the file. Switching to it needs
    the file to itself and SQLite answers "locked" at once, without its busy timeout, where
    another process holds it (several workers opening one new database): so it is retried."""
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            # The answer is the mode now in use; a file system without WAL keeps its own mode.
            conn.exec_driver_sql("PRAGMA journal_mode = WAL")
            return
        except sa.exc.OperationalError:
            if time.monotonic() > deadline:
                raise
            conn.rollback()
            time.sleep(0.02)


class DamagedFile(Exception):
    """SQLite cannot read the file as a database, or its integrity check fails."""


@dataclass(frozen=True, slots=True)
class FileFacts:
    application_id: int
    tables: dict[str, frozenset[str]]  # each table's columns
    version: str | None  # meta.schema_version, where meta has our shape

    @property
    def empty(self) -> bool:
        return not self.tables

    def foreign_tables(self) -> list[str]:
        """Tables that are not ours: other names, or our names with another program's columns."""
        tables = self.tables.items()
        return sorted(name for name, columns in tables if not _our_table(name, columns))

    def clashing_tables(self) -> list[str]:
        """In a file without our schema, the tables named as ours: they are another program's,
        and sharing the file with them cannot work."""
        return [] if self.has_our_schema else sorted(set(self.tables) & set(CORE_COLUMNS))

    @property
    def ours(self) -> bool:
        """Marked as ours, or (unmarked) holding our schema as an older autotune wrote it."""
        if self.application_id == APPLICATION_ID:
            return True
        return self.application_id == 0 and self.has_our_schema

    @property
    def has_our_schema(self) -> bool:
        """A meta table with a schema version, and our tables with their columns (a file shared
        with a program that set its own application id has them too)."""
        if self.version is None or not self.version.isdigit():
            return False
        ours = [name for name in CORE_COLUMNS if name in self.tables]
        return all(name in ours for name in LEGACY_REQUIRED) and all(
            _our_table(name, self.tables[name]) for name in ours
        )


def _our_table(name: str, columns: frozenset[str]) -> bool:
    return name in CORE_COLUMNS and CORE_COLUMNS[name] <= columns


def read_only_uri(file: Path) -> str:
    """A URI that opens file without writing anything, not even WAL side files: immutable where
    its directory cannot be written (a WAL reader would need to create the -shm file there)."""
    file = file.resolve()
    immutable = "&immutable=1" if not os.access(file.parent, os.W_OK) else ""
    return f"file:{quote(str(file))}?mode=ro{immutable}"


def connect_read_only(file: Path) -> sqlite3.Connection:
    return sqlite3.connect(read_only_uri(file), uri=True, check_same_thread=False)


def inspect_file(file: Path) -> FileFacts:
    """What file holds, read read-only. DamagedFile where SQLite cannot read it."""
    try:
        conn = connect_read_only(file)
    except sqlite3.Error as err:
        raise DamagedFile(str(err)) from None
    try:
        app_id = int(conn.execute("PRAGMA application_id").fetchone()[0])
        names = [
            row[0]
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        tables = {
            name: frozenset(row[1] for row in conn.execute(f"PRAGMA table_info({_quoted(name)})"))
            for name in names
        }
        version = None
        if _our_table("meta", tables.get("meta", frozenset())):
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            version = None if row is None else str(row[0])
        return FileFacts(app_id, tables, version)
    except sqlite3.DatabaseError as err:  # "file is not a database", "malformed", bad text
        raise DamagedFile(str(err)) from None
    finally:
        conn.close()


def check_integrity(file: Path) -> None:
    """SQLite's quick check (every page and index readable, about a second for 70 MB): run
    before the first write, so a damaged file is named as such and not written to."""
    try:
        conn = connect_read_only(file)
        try:
            problems = [row[0] for row in conn.execute("PRAGMA quick_check(3)")]
        finally:
            conn.close()
    except sqlite3.Error as err:
        raise DamagedFile(str(err)) from None
    if problems != ["ok"]:
        raise DamagedFile("; ".join(str(p) for p in problems))


def bytes_per_evaluation(file: Path) -> float:
    """What one stored evaluation costs in a results file (its row, its samples, its share of
    every index and of the other tables): the size of a compacted copy (VACUUM INTO, so no free
    pages and no log count) over the number of evaluations. The file itself is only read."""
    with tempfile.TemporaryDirectory(prefix="autotune-size-") as tmp:
        copy = Path(tmp) / "compact.db"
        conn = connect_read_only(file)
        try:
            rows = int(conn.execute("SELECT count(*) FROM evaluations").fetchone()[0])
            conn.execute("VACUUM INTO ?", (str(copy),))
        finally:
            conn.close()
        if rows == 0:
            raise ValueError(f"{file} holds no evaluations")
        return copy.stat().st_size / rows


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


__all__ = [
    "APPLICATION_ID",
    "SQLITE_BUSY_TIMEOUT_MS",
    "DamagedFile",
    "FileFacts",
    "bytes_per_evaluation",
    "check_integrity",
    "connect_read_only",
    "inspect_file",
    "on_connect",
    "read_only_uri",
    "use_wal",
]
