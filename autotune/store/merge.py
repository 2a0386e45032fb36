"""Merging results databases: another database's measurements added to this one, each once."""

from __future__ import annotations

import gzip
import shutil
import sqlite3
import tempfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote

import sqlalchemy as sa
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from autotune.store.engine import StoreBase, StoreError, default_url, hide_passwords, one_line
from autotune.store.migrations import UPGRADABLE_FROM, immediate_transaction
from autotune.store.schema import (
    EVALUATION_IDENTITY,
    SCHEMA_VERSION,
    baseline_observations_table,
    baselines_table,
    ceilings_table,
    devices_table,
    evaluations_table,
    meta_table,
    observations_table,
    repeats_table,
    runs_table,
    with_identity_digest,
)

CHUNK_ROWS = 2_000  # rows read and inserted at a time: a large source never sits in memory whole

# What makes a row the same row in two databases, in the target's ids. Devices, evaluations and
# baselines have their unique constraints; runs and ceilings have none (a ceiling's newest
# measurement is the one in use), so one is known by when it started or was measured.
IDENTITY = {
    devices_table: ("name", "compute_capability", "sm_count", "driver_version"),
    runs_table: ("device_id", "started_at", "host", "command"),
    evaluations_table: EVALUATION_IDENTITY,
    baselines_table: ("device_id", "library", "problem_key", "protocol"),
    ceilings_table: ("device_id", "name", "protocol", "created_at"),
}
# The readings beside two of them: (the table they belong to, theirs, the column naming the row).
OBSERVED = (
    (evaluations_table, observations_table, "evaluation_id"),
    (baselines_table, baseline_observations_table, "baseline_id"),
)
# The tables whose ids later rows refer to, and the column naming them; claims are leases of
# running processes, meaningless in another database, and are not copied.
REFERRED = {devices_table: "device_id", runs_table: "run_id"}


@dataclass(frozen=True, slots=True)
class MergeCounts:
    """Rows added and rows skipped (already in the target) per table, for one source."""

    added: dict[str, int]
    skipped: dict[str, int]

    def line(self) -> str:
        counts = ", ".join(f"{name} {n}/{self.skipped[name]}" for name, n in self.added.items())
        return f"{counts} (added/skipped)"


class Merges(StoreBase):
    """The store's merge: every measurement of another results database, added once."""

    def merge_from(self, source: StoreBase) -> MergeCounts:
        """Copy source's devices (matched by identity), runs, evaluations (with their readings
        and repeats), baselines and ceilings into this database with new ids, skipping the rows
        it already has, in one transaction: a failure leaves this database as it was.
        Protocols are kept as stored."""
        added: dict[str, int] = {}
        skipped: dict[str, int] = {}
        ids: dict[str, dict[int, int]] = {column: {} for column in REFERRED.values()}
        with (
            self._errors(f"cannot merge {source.url}"),
            _reading(source._engine) as src,
            immediate_transaction(self._engine) as dst,
        ):
            # The target's own rows before the merge: a source row it skips is its own
            # measurement, whose readings are its own too.
            own = {
                owner: {r[0] for r in dst.execute(sa.select(owner.c.id))} for owner, *_ in OBSERVED
            }
            for table in IDENTITY:
                added[table.name], skipped[table.name] = _merge_table(src, dst, table, ids)
            for owner, readings, column in OBSERVED:
                added[readings.name], skipped[readings.name] = _merge_observations(
                    src, dst, ids["device_id"], (owner, readings, column), own[owner]
                )
            added[repeats_table.name], skipped[repeats_table.name] = _merge_repeats(src, dst, ids)
        return MergeCounts(added, skipped)


def _merge_table(
    src: sa.Connection, dst: sa.Connection, table: sa.Table, ids: dict[str, dict[int, int]]
) -> tuple[int, int]:
    identity, c = IDENTITY[table], table.c
    known = sa.select(c.id, *(c[name] for name in identity))
    if "device_id" in c:  # only the source's devices can have rows the source also has
        known = known.where(c.device_id.in_(sorted(set(ids["device_id"].values()))))
    existing = {_key(row._mapping, identity): row.id for row in dst.execute(known)}
    referred = REFERRED.get(table)
    added = skipped = 0
    pending: list[dict[str, Any]] = []
    rows = src.execution_options(yield_per=CHUNK_ROWS).execute(sa.select(table).order_by(c.id))
    for row in rows.mappings():
        values = {name: _utc(value) for name, value in row.items() if name != "id"}
        for column, new_ids in ids.items():
            if column in values:
                if values[column] not in new_ids:
                    raise StoreError(f"the source's {table.name} row {row['id']} has no {column}")
                values[column] = new_ids[values[column]]
        if table is evaluations_table:  # computed here, not trusted from the source
            values = with_identity_digest(values)
        key = _key(values, identity)
        if key in existing:
            skipped += 1
        elif referred:  # devices and runs: the rows that follow need the new id at once
            added += 1
            existing[key] = dst.execute(table.insert().values(**values)).inserted_primary_key[0]
        else:
            added += 1
            existing[key] = None
            pending.append(values)
            if len(pending) == CHUNK_ROWS:
                dst.execute(table.insert(), pending)
                pending = []
        if referred:
            ids[referred][row["id"]] = int(existing[key])
    if pending:
        dst.execute(table.insert(), pending)
    return added, skipped


def _merge_observations(
    src: sa.Connection,
    dst: sa.Connection,
    devices: dict[int, int],
    observed: tuple[sa.Table, sa.Table, str],
    own: set[int],
) -> tuple[int, int]:
    """The source's readings of one table's rows (OBSERVED: evaluations or baselines, and the
    readings' column naming the row) under the ids those rows have in the target (matched by
    their identity, as _merge_table matched them). Readings of the target's `own` rows, those it
    had before this merge, are skipped: they belong to its measurement, not the source's."""
    owner, readings, column = observed
    if not sa.inspect(src).has_table(readings.name):  # written before that table was added
        return 0, 0
    identity, e, o = IDENTITY[owner], owner.c, readings.c
    observed = sa.select(o[column]).distinct().scalar_subquery()
    keys = {}
    for row in src.execute(sa.select(e.id, *(e[n] for n in identity)).where(e.id.in_(observed))):
        values = dict(row._mapping)
        values["device_id"] = devices[values["device_id"]]
        keys[values.pop("id")] = _key(values, identity)
    if not keys:
        return 0, 0
    known = sa.select(e.id, *(e[n] for n in identity)).where(
        e.device_id.in_(sorted(set(devices.values())))
    )
    target = {_key(row._mapping, identity): row.id for row in dst.execute(known)}
    have = {(r[0], r[1]) for r in dst.execute(sa.select(o[column], o.name))}
    rows = src.execution_options(yield_per=CHUNK_ROWS).execute(
        sa.select(readings).order_by(o[column], o.name)
    )
    pending, skipped = [], 0
    for row in rows.mappings():
        mine = target.get(keys[row[column]]) if row[column] in keys else None
        if mine is None or mine in own or (mine, row["name"]) in have:
            skipped += 1  # a reading of the target's own row (or of no row of the source)
            continue
        pending.append({column: mine, "name": row["name"], "value": row["value"]})
    for start in range(0, len(pending), CHUNK_ROWS):
        dst.execute(readings.insert(), pending[start : start + CHUNK_ROWS])
    return len(pending), skipped


def _merge_repeats(
    src: sa.Connection, dst: sa.Connection, ids: dict[str, dict[int, int]]
) -> tuple[int, int]:
    """The source's repeats under the ids their evaluations have in the target (matched by
    identity, as _merge_table matched them), numbered after the target's own repeats of each.
    A repeat is known by its evaluation and when it was measured: one the target has already
    (merged before) is skipped; the others are measurements the target lacks, of its own
    evaluations too (both databases measured a shared evaluation again)."""
    if not sa.inspect(src).has_table(repeats_table.name):  # schema 7 or older: none
        return 0, 0
    identity, e, r = IDENTITY[evaluations_table], evaluations_table.c, repeats_table.c
    measured = sa.select(r.evaluation_id).distinct().scalar_subquery()
    keys = {}
    for row in src.execute(sa.select(e.id, *(e[n] for n in identity)).where(e.id.in_(measured))):
        values = dict(row._mapping)
        values["device_id"] = ids["device_id"][values["device_id"]]
        keys[values.pop("id")] = _key(values, identity)
    if not keys:
        return 0, 0
    known = sa.select(e.id, *(e[n] for n in identity)).where(
        e.device_id.in_(sorted(set(ids["device_id"].values())))
    )
    target = {_key(row._mapping, identity): row.id for row in dst.execute(known)}
    have, last = set(), {}
    for row in dst.execute(sa.select(r.evaluation_id, r.sequence, r.created_at)):
        have.add((row.evaluation_id, _utc(row.created_at)))
        last[row.evaluation_id] = max(last.get(row.evaluation_id, 0), row.sequence)
    rows = src.execution_options(yield_per=CHUNK_ROWS).execute(
        sa.select(repeats_table).order_by(r.evaluation_id, r.sequence)
    )
    pending, skipped = [], 0
    for row in rows.mappings():
        mine = target.get(keys[row["evaluation_id"]]) if row["evaluation_id"] in keys else None
        when = _utc(row["created_at"])
        if mine is None or (mine, when) in have:
            skipped += 1  # merged before (or of no evaluation of the source)
            continue
        have.add((mine, when))
        last[mine] = last.get(mine, 0) + 1
        values = {name: _utc(value) for name, value in row.items()}
        values.update(evaluation_id=mine, sequence=last[mine])
        if values["run_id"] not in ids["run_id"]:
            raise StoreError(f"the source's repeat of evaluation {row['evaluation_id']} has no run")
        values["run_id"] = ids["run_id"][values["run_id"]]
        pending.append(values)
    for start in range(0, len(pending), CHUNK_ROWS):
        dst.execute(repeats_table.insert(), pending[start : start + CHUNK_ROWS])
    return len(pending), skipped


def _utc(value: Any) -> Any:
    # autotune writes UTC times; SQLite keeps them without their zone, PostgreSQL converts them
    # to the session's: aware UTC on the way in compares and stores the same in either.
    if not isinstance(value, datetime):
        return value
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def _key(row: Any, identity: tuple[str, ...]) -> tuple:
    return tuple(_utc(row[name]) for name in identity)


@contextmanager
def _reading(engine: Engine) -> Iterator[sa.Connection]:
    """One read transaction over the source: every table read from the same snapshot."""
    with engine.connect() as conn:
        if engine.dialect.name != "sqlite":  # PostgreSQL's default reads each statement afresh
            conn = conn.execution_options(isolation_level="REPEATABLE READ")
        with conn.begin():
            yield conn


@contextmanager
def open_merge_source(text: str | Path) -> Iterator[StoreBase]:
    """The results database to merge from, checked and opened: a SQLite file (a path, a
    sqlite:/// URL, or a gzip'd copy, *.gz) is read through a read-only connection into a
    temporary copy, upgraded there if its schema is older, so the file itself never changes;
    another database (PostgreSQL) must have this schema already. Bad input is a StoreError."""
    name = hide_passwords(str(text))
    file = _source_file(str(text), name)
    if file is None:
        _check_version(str(text), name, upgradable=False)
        with StoreBase(text, create=False) as store:
            yield store
        return
    if not file.is_file():
        raise StoreError(f"no results database at {name}")
    with tempfile.TemporaryDirectory(prefix="autotune-merge-") as tmp:
        copy = Path(tmp) / "source.db"
        if file.suffix == ".gz":
            _gunzip(file, copy, name)
        else:
            _backup(file, copy, name)
        _check_version(default_url(copy), name, upgradable=True)
        try:
            store = StoreBase(copy, create=False)
        except StoreError as err:  # it names the copy, which the user never saw
            raise StoreError(str(err).replace(default_url(copy), name)) from None
        with store:
            yield store


def _source_file(text: str, name: str) -> Path | None:
    """The SQLite file text names, or None for another kind of database."""
    if "://" not in text:
        return Path(text).expanduser()
    try:
        url = make_url(text)
    except ArgumentError:
        raise StoreError(f"{name} is neither a file nor a database URL") from None
    if url.get_backend_name() != "sqlite":
        return None
    if not url.database or url.database == ":memory:" or url.database.startswith("file:"):
        raise StoreError(f"{name} names no SQLite file; give the file's path")
    return Path(url.database).expanduser()


def _backup(file: Path, copy: Path, name: str) -> None:
    # SQLite's backup reads through the source's write-ahead log, which copying the file would
    # miss. A reader of a WAL file leaves a -wal and a -shm beside it, so a file that has none
    # (no process has it open, all its rows are in it) is read as immutable: nothing is created.
    file = file.resolve()
    live = any(Path(f"{file}-{end}").exists() for end in ("wal", "journal"))
    uri = f"file:{quote(str(file))}?{'mode=ro' if live else 'immutable=1'}"
    connections: list[sqlite3.Connection] = []
    try:
        connections += [sqlite3.connect(uri, uri=True), sqlite3.connect(copy)]
        connections[0].backup(connections[1])
    except sqlite3.Error as err:
        raise StoreError(f"cannot read {name}: {err}") from None
    finally:
        for conn in connections:
            conn.close()


def _gunzip(file: Path, copy: Path, name: str) -> None:
    try:
        with gzip.open(file) as packed, copy.open("wb") as out:
            shutil.copyfileobj(packed, out)
    except (OSError, EOFError, zlib.error) as err:
        raise StoreError(f"cannot decompress {name}: {err}") from None


def _check_version(url: str, name: str, upgradable: bool) -> None:
    """Refuse a database that is not ours or whose schema this autotune cannot bring up."""
    try:
        parsed = make_url(url)
        if parsed.drivername == "postgresql":  # as StoreBase: psycopg 3 is the driver we install
            parsed = parsed.set(drivername="postgresql+psycopg")
        engine = sa.create_engine(parsed)
        try:
            with engine.connect() as conn:
                if not sa.inspect(conn).has_table(meta_table.name):
                    raise StoreError(f"{name} is not an autotune results database")
                version = conn.execute(
                    sa.select(meta_table.c.value).where(meta_table.c.key == "schema_version")
                ).scalar_one_or_none()
        finally:
            engine.dispose()
    except (SQLAlchemyError, sqlite3.Error, OSError, ImportError) as err:
        raise StoreError(f"cannot read {name}: {one_line(err)}") from None
    if version is None:
        raise StoreError(f"{name} is not an autotune results database (no schema version)")
    if version == str(SCHEMA_VERSION) or (upgradable and version in UPGRADABLE_FROM):
        return
    if version in UPGRADABLE_FROM:
        raise StoreError(
            f"{name} has schema version {version}: open it once with this autotune (for "
            f"example `autotune status --storage URL`) to upgrade it, then merge it"
        )
    raise StoreError(
        f"{name} has schema version {version}, this autotune knows versions up to "
        f"{SCHEMA_VERSION}: merge it with the autotune that wrote it"
    )
