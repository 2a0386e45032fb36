"""Opening the results database: URLs, the SQLite connection, our schema or a refusal, errors."""

from __future__ import annotations

import contextlib
import re
import sqlite3
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import DBAPIError, IntegrityError, SQLAlchemyError

from autotune.model.files import why_not_creatable
from autotune.model.records import TIMING_PROTOCOL
from autotune.store.credentials import check_url, hide_passwords
from autotune.store.migrations import UPGRADABLE_FROM, upgrade
from autotune.store.schema import METADATA, SCHEMA_VERSION, SHAPE_COLUMNS, meta_table
from autotune.store.sqlite_file import (
    APPLICATION_ID,
    DamagedFile,
    check_integrity,
    connect_read_only,
    inspect_file,
    on_connect,
    use_wal,
)

if TYPE_CHECKING:
    import pandas as pd

RACE_ATTEMPTS = 5  # two processes writing the same row at once: the loser retries


class StoreError(RuntimeError):
    """A results database that cannot be opened, has another schema, or refused a write."""


def default_url(path: str | Path) -> str:
    """SQLAlchemy URL of a SQLite file, creating its directory."""
    file = Path(path).expanduser().resolve()
    file.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{file}"


def check_creatable(path: str | Path) -> None:
    """Refuse, before any costly start, a new SQLite file that could not be created."""
    why = why_not_creatable(path)
    if why is not None:
        raise StoreError(f"cannot create results database {Path(path).expanduser()}: {why}")


def one_line(err: BaseException) -> str:
    # SQLAlchemy appends the statement and a documentation link; the driver's message says it.
    cause = err.orig if isinstance(err, DBAPIError) and err.orig is not None else err
    lines = str(cause).strip().splitlines()
    return lines[0] if lines else type(cause).__name__


def _sqlite_file(url: URL) -> Path | None:
    database = url.database
    if url.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return None
    if database.startswith("file:"):
        return None
    return Path(database)


def _names(tables: list[str], shown: int = 5) -> str:
    more = f" and {len(tables) - shown} more" if len(tables) > shown else ""
    return ", ".join(tables[:shown]) + more


_Self = TypeVar("_Self", bound="StoreBase")
_DAMAGED = re.compile(r"malformed|not a database|Could not decode|database disk image", re.I)


class StoreBase:
    """An opened results database: what the store's writes, claims and queries share."""

    def __init__(
        self,
        url: str | Path,
        create: bool = True,
        share: bool = False,
        protocol: int = TIMING_PROTOCOL,
        read_only: bool | None = None,
    ) -> None:
        """Open (and, unless create=False, create) the results database at url or path. With
        create=False a database without our schema is refused, unchanged; with create, one
        that holds other applications' tables is refused unless share=True. read_only (by
        default: when create is False) opens it without writing anything: no table, no row,
        no upgrade; an older schema is read through an upgraded temporary copy. Its queries
        read measurements of one timing protocol (DESIGN section 2), the current one unless
        told: tables, reports and searches never mix protocols."""
        text = str(url)
        self._share = share
        self.read_only = (not create) if read_only is None else read_only
        self.url = hide_passwords(text)
        self.protocol = protocol
        self._copy: tempfile.TemporaryDirectory | None = None
        self._stamp = False  # whether a new SQLite file is marked as ours (_file_facts)
        if not create and "://" not in text and not Path(text).expanduser().is_file():
            raise StoreError(f"no results database at {self.url}")
        try:
            check_url(text)
            file = Path(text).expanduser().resolve() if "://" not in text else None
            parsed = make_url(text if file is None else f"sqlite:///{file}")
            self.url = hide_passwords(parsed.render_as_string(hide_password=True))
            if parsed.drivername == "postgresql":
                # SQLAlchemy's default PostgreSQL driver is psycopg2; the postgres extra
                # installs psycopg (3), so a plain postgresql:// URL means that one.
                parsed = parsed.set(drivername="postgresql+psycopg")
            file = _sqlite_file(parsed)
            if file is not None and not create and not file.is_file():
                raise StoreError(f"no results database at {file}")
            if file is not None:
                self._file_facts(file, create)  # before anything is written, or refused
                if self.read_only:
                    self._engine: Engine = self._read_only_engine(file)
                else:
                    file.parent.mkdir(parents=True, exist_ok=True)
                    self._engine = sa.create_engine(parsed)
            else:
                self._engine = sa.create_engine(parsed)
        except (SQLAlchemyError, OSError, ImportError, ValueError) as err:
            # ValueError: a URL SQLAlchemy or the driver cannot read (a port that is no number).
            self._drop_copy()
            # A file is named as it was given, a URL as parsed (its password hidden).
            shown = self.url if "://" in text else hide_passwords(text)
            raise StoreError(
                f"cannot open results database ({shown}): {hide_passwords(one_line(err))}"
            ) from None
        except BaseException:
            self._drop_copy()
            raise
        if parsed.get_backend_name() == "sqlite":
            sa.event.listen(self._engine, "connect", on_connect)
        try:
            if self.read_only:
                self._check_readable()
            else:
                self._create(create)
        except BaseException:
            self.close()
            raise

    def _file_facts(self, file: Path, create: bool) -> None:
        """Recognise an existing SQLite file before any write: ours (marker or our older schema
        exactly), empty, another application's (refused unless shared, and never where its
        tables carry our names), or damaged (refused). Sets self._stamp: whether the first
        write marks the file as ours."""
        if not file.is_file() or file.stat().st_size == 0:
            if file.is_file() and (not create or self.read_only):
                raise StoreError(
                    f"{self.url} is not an autotune results database (it is empty); nothing was "
                    "changed"
                )
            self._stamp = True  # a new file is ours
            return
        try:
            facts = inspect_file(file)
            if facts.has_our_schema and not self.read_only:
                check_integrity(file)
        except DamagedFile as err:
            said = (str(err).strip().splitlines() or ["unreadable"])[0]
            raise StoreError(
                f"results database {file} is damaged ({said}); nothing was changed in it"
            ) from None
        if facts.ours or facts.has_our_schema:  # a file another program marked but shares
            # Marked already, or written before the marker: marked if ours alone.
            self._stamp = facts.application_id == 0 and not facts.foreign_tables()
            return
        others = facts.foreign_tables()
        if facts.empty:
            if not create or self.read_only:
                raise StoreError(
                    f"{self.url} is not an autotune results database (it is empty); nothing was "
                    "changed"
                )
            self._stamp = True
            return
        if not create or self.read_only:
            held = f"it holds {_names(others)}" if others else "it is another application's"
            raise StoreError(
                f"{self.url} is not an autotune results database ({held}); nothing was changed"
            )
        if not self._share:
            # Tables named and shaped as ours, but neither marked nor versioned, are another
            # program's too (a generic meta table of its own, say).
            others = others or sorted(facts.tables)
            raise StoreError(
                f"{self.url} holds tables of another application ({_names(others)}); autotune "
                "adds its own beside them only with --share-database; nothing was changed"
            )
        clashing = facts.clashing_tables()
        if clashing:
            raise StoreError(
                f"{self.url} has tables of another application named as autotune's "
                f"({_names(clashing)}): it cannot be shared; nothing was changed"
            )

    def _read_only_engine(self, file: Path) -> Engine:
        """An engine that cannot write the file. An older schema is upgraded in a temporary copy
        (the file is left as it is), so reading commands work on what an older autotune wrote."""
        with contextlib.closing(connect_read_only(file)) as conn:
            try:
                row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            except sqlite3.DatabaseError:
                row = None
        version = None if row is None else str(row[0])
        if version not in UPGRADABLE_FROM:
            return sa.create_engine("sqlite://", creator=lambda: connect_read_only(file))
        self._copy = tempfile.TemporaryDirectory(prefix="autotune-read-")
        copy = Path(self._copy.name) / "upgraded.db"
        with (
            contextlib.closing(connect_read_only(file)) as source,
            contextlib.closing(sqlite3.connect(copy)) as target,
        ):
            source.backup(target)
        engine = sa.create_engine(f"sqlite:///{copy}")
        sa.event.listen(engine, "connect", on_connect)
        try:
            METADATA.create_all(engine)
            upgrade(engine)
        finally:
            engine.dispose()
        return sa.create_engine("sqlite://", creator=lambda: connect_read_only(copy))

    def _check_readable(self) -> None:
        """A reading command's check: our schema at this version (or upgraded in a copy);
        nothing is created, inserted or migrated."""
        with self._errors("cannot open results database"):
            if not sa.inspect(self._engine).has_table(meta_table.name):
                raise StoreError(
                    f"{self.url} is not an autotune results database; nothing was changed"
                )
            version = self._schema_version()
        if version in UPGRADABLE_FROM:  # PostgreSQL: no copy to upgrade
            raise StoreError(
                f"results database {self.url} has schema version {version}, older than this "
                f"autotune's {SCHEMA_VERSION}: run a writing command on it once (for example "
                "`autotune run`) to upgrade it"
            )
        if version != str(SCHEMA_VERSION):
            raise self._version_error(version)

    def _create(self, create: bool = True) -> None:
        with self._errors("cannot open results database"):
            # A database of another (newer) schema is refused before anything is written to it.
            if sa.inspect(self._engine).has_table(meta_table.name):
                found = self._schema_version()
                if found not in (None, str(SCHEMA_VERSION), *UPGRADABLE_FROM):
                    raise self._version_error(found)
            else:
                self._refuse_foreign(create)
            if self._engine.dialect.name == "sqlite" and create:
                with self._engine.connect() as conn:
                    use_wal(conn)
                    if self._stamp:
                        # Ours alone: marked as ours before the first table, so another
                        # worker opening this new file meanwhile knows it as ours.
                        conn.exec_driver_sql(f"PRAGMA application_id = {APPLICATION_ID}")
                        conn.commit()
            # Workers creating one new database at once: each failed CREATE names an object
            # that now exists and that the next try skips, so one try per object is enough.
            attempts = 1 + sum(1 + len(table.indexes) for table in METADATA.tables.values())
            for attempt in range(attempts):
                try:
                    METADATA.create_all(self._engine)
                    break
                except (sa.exc.OperationalError, sa.exc.IntegrityError, sa.exc.ProgrammingError):
                    # Another process created a table between our check and our CREATE (SQLite
                    # says OperationalError; PostgreSQL a duplicate table or a duplicate type).
                    if attempt == attempts - 1:
                        raise
            version = self._schema_version()
            if version is None:
                try:
                    with self._engine.begin() as conn:
                        conn.execute(
                            meta_table.insert().values(
                                key="schema_version", value=str(SCHEMA_VERSION)
                            )
                        )
                except IntegrityError:
                    pass  # another process wrote it first; read back what it wrote
                version = self._schema_version()
            if version in UPGRADABLE_FROM:
                # create_all above already added the tables the older version lacked (in
                # their current form); the older tables get their new columns here.
                upgrade(self._engine)
                version = str(SCHEMA_VERSION)
        if version != str(SCHEMA_VERSION):
            raise self._version_error(version)

    def _refuse_foreign(self, create: bool) -> None:
        """Called where our schema is missing: a reading command changes nothing in such a
        database, and a run adds its tables beside another application's only when told to.
        Some of our tables without the meta row is another process creating them right now.
        (An SQLite file was recognised before this, by _file_facts; this is for PostgreSQL.)"""
        tables = sorted(set(sa.inspect(self._engine).get_table_names()))
        others = [name for name in tables if name not in METADATA.tables]
        if not create:
            held = f"it holds {_names(others)}" if others else "it is empty"
            raise StoreError(
                f"{self.url} is not an autotune results database ({held}); nothing was changed"
            )
        if others and not self._share:
            raise StoreError(
                f"{self.url} holds tables of another application ({_names(others)}); autotune "
                "adds its own beside them only with --share-database"
            )

    def _drop_copy(self) -> None:
        if self._copy is not None:
            self._copy.cleanup()
            self._copy = None

    def _version_error(self, version: str | None) -> StoreError:
        return StoreError(
            f"results database {self.url} has schema version {version}, "
            f"this autotune uses schema version {SCHEMA_VERSION}"
        )

    def _schema_version(self) -> str | None:
        with self._engine.connect() as conn:
            return conn.execute(
                sa.select(meta_table.c.value).where(meta_table.c.key == "schema_version")
            ).scalar_one_or_none()

    @contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        """Database failures leave the public methods as one-line StoreErrors."""
        try:
            yield
        except StoreError:
            raise
        except (SQLAlchemyError, sqlite3.Error, OSError) as err:
            said = hide_passwords(one_line(err))
            if _DAMAGED.search(said):  # SQLite's words for a file it cannot read as a database
                raise StoreError(f"results database {self.url} is damaged ({said})") from None
            raise StoreError(f"{doing} ({self.url}): {said}") from None

    def close(self) -> None:
        try:
            self._engine.dispose()
        finally:
            self._drop_copy()

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({self.url!r})"

    def _protocol(self, protocol: int | None) -> int:
        return self.protocol if protocol is None else protocol

    def _has_table(self, table: sa.Table) -> bool:
        """Whether the database has `table`. A table added to this schema version later (its
        readers tolerate its absence) is missing from a file an earlier autotune wrote until a
        writing command opens it, and from such a file opened read-only."""
        with self._errors(f"cannot read {table.name}"), self._engine.connect() as conn:
            return sa.inspect(conn).has_table(table.name)

    def _frame(self, query: sa.Select[Any], doing: str) -> pd.DataFrame:
        with self._errors(doing), self._engine.connect() as conn:
            result = conn.execute(query)
            columns = list(result.keys())
            rows = [tuple(row) for row in result]
        return self._frame_of(rows, columns)

    def _frame_of(self, rows: list, columns: Sequence[str]) -> pd.DataFrame:
        """A frame of rows read (tuples, or mappings holding the columns) with these columns."""
        # Built from rows rather than pd.read_sql, so an empty result still has its columns.
        # pandas loads here, at a query's first frame: a tune_kernel call (which reads none)
        # and a run's start do without its import (0.3 s on the 2-core machine).
        import pandas as pd

        if rows and isinstance(rows[0], Mapping):
            rows = [tuple(row[name] for name in columns) for row in rows]
        frame = pd.DataFrame(rows, columns=list(columns))
        for name in (*SHAPE_COLUMNS, "scratch_bytes"):
            if name in frame.columns:
                # Empty for the kinds other than conv2d: nullable integers, not floats.
                frame[name] = frame[name].astype("Int64")
        return frame
