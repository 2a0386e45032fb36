"""Opening the results database: URLs, the SQLite connection, our schema or a refusal, errors."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd
import sqlalchemy as sa
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import DBAPIError, IntegrityError, SQLAlchemyError

from autotune.model.records import TIMING_PROTOCOL
from autotune.store.credentials import check_url, hide_passwords
from autotune.store.migrations import UPGRADABLE_FROM, upgrade
from autotune.store.schema import METADATA, SCHEMA_VERSION, SHAPE_COLUMNS, meta_table

SQLITE_BUSY_TIMEOUT_MS = 30_000  # a writer waits this long for another process's transaction
CREATE_ATTEMPTS = 5  # two processes creating the same tables at once: the loser retries


class StoreError(RuntimeError):
    """A results database that cannot be opened, has another schema, or refused a write."""


def default_url(path: str | Path) -> str:
    """SQLAlchemy URL of a SQLite file, creating its directory."""
    file = Path(path).expanduser().resolve()
    file.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{file}"


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


def _on_sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # The busy timeout makes a second writer (another process on the same file) wait instead of
    # failing with "database is locked". WAL is set once the file is known to be ours (_create):
    # it is a property of the file, and a database of another application is left as it is.
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys = ON")
    finally:
        cursor.close()


def _names(tables: list[str], shown: int = 5) -> str:
    more = f" and {len(tables) - shown} more" if len(tables) > shown else ""
    return ", ".join(tables[:shown]) + more


_Self = TypeVar("_Self", bound="StoreBase")


class StoreBase:
    """An opened results database: what the store's writes, claims and queries share."""

    def __init__(
        self,
        url: str | Path,
        create: bool = True,
        share: bool = False,
        protocol: int = TIMING_PROTOCOL,
    ) -> None:
        """Open (and, unless create=False, create) the results database at url or path. With
        create=False a database without our schema is refused, unchanged; with create, one
        that holds other applications' tables is refused unless share=True. Its queries read
        measurements of one timing protocol (DESIGN section 2), the current one unless told:
        tables, reports and searches never mix protocols."""
        text = str(url)
        self._share = share
        self.url = hide_passwords(text)
        self.protocol = protocol
        if not create and "://" not in text and not Path(text).expanduser().is_file():
            raise StoreError(f"no results database at {text}")
        try:
            if "://" not in text:
                text = default_url(text)
            check_url(text)
            parsed = make_url(text)
            self.url = hide_passwords(parsed.render_as_string(hide_password=True))
            if parsed.drivername == "postgresql":
                # SQLAlchemy's default PostgreSQL driver is psycopg2; the postgres extra
                # installs psycopg (3), so a plain postgresql:// URL means that one.
                parsed = parsed.set(drivername="postgresql+psycopg")
            file = _sqlite_file(parsed)
            if file is not None and not create and not file.is_file():
                raise StoreError(f"no results database at {file}")
            if file is not None:
                file.parent.mkdir(parents=True, exist_ok=True)
            self._engine: Engine = sa.create_engine(parsed)
        except (SQLAlchemyError, OSError, ImportError, ValueError) as err:
            # ValueError: a URL SQLAlchemy or the driver cannot read (a port that is no number).
            raise StoreError(
                f"cannot open results database ({self.url}): {hide_passwords(one_line(err))}"
            ) from None
        if parsed.get_backend_name() == "sqlite":
            sa.event.listen(self._engine, "connect", _on_sqlite_connect)
        try:
            self._create(create)
        except BaseException:
            self._engine.dispose()
            raise

    def _create(self, create: bool = True) -> None:
        with self._errors("cannot open results database"):
            # A database of another (newer) schema is refused before anything is written to it.
            if sa.inspect(self._engine).has_table(meta_table.name):
                found = self._schema_version()
                if found not in (None, str(SCHEMA_VERSION), *UPGRADABLE_FROM):
                    raise self._version_error(found)
            else:
                self._refuse_foreign(create)
            for attempt in range(CREATE_ATTEMPTS):
                try:
                    METADATA.create_all(self._engine)
                    break
                except (sa.exc.OperationalError, sa.exc.IntegrityError, sa.exc.ProgrammingError):
                    # Another process created a table between our check and our CREATE (SQLite
                    # says OperationalError; PostgreSQL a duplicate table or a duplicate type).
                    if attempt == CREATE_ATTEMPTS - 1:
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
            if self._engine.dialect.name == "sqlite" and create:
                # WAL lets readers run beside one writer; it stays set in the file.
                with self._engine.connect() as conn:
                    conn.exec_driver_sql("PRAGMA journal_mode = WAL")
        if version != str(SCHEMA_VERSION):
            raise self._version_error(version)

    def _refuse_foreign(self, create: bool) -> None:
        """Called where our schema is missing: a reading command changes nothing in such a
        database, and a run adds its tables beside another application's only when told to.
        Some of our tables without the meta row is another process creating them right now."""
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
            raise StoreError(f"{doing} ({self.url}): {hide_passwords(one_line(err))}") from None

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({self.url!r})"

    def _protocol(self, protocol: int | None) -> int:
        return self.protocol if protocol is None else protocol

    def _frame(self, query: sa.Select[Any], doing: str) -> pd.DataFrame:
        # Built from rows rather than pd.read_sql, so an empty result still has its columns.
        with self._errors(doing), self._engine.connect() as conn:
            result = conn.execute(query)
            columns = list(result.keys())
            rows = [tuple(row) for row in result]
        frame = pd.DataFrame(rows, columns=columns)
        for name in (*SHAPE_COLUMNS, "scratch_bytes"):
            if name in frame.columns:
                # Empty for the kinds other than conv2d: nullable integers, not floats.
                frame[name] = frame[name].astype("Int64")
        return frame
