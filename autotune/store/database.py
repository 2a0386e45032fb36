"""The results database: one transaction per write, study claims, queries (best, history)."""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import pandas as pd
import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from autotune.model.problem import KIND_FIELDS, Problem
from autotune.model.records import TIMING_PROTOCOL, DeviceInfo, Measurement, Status, spread
from autotune.model.space import Config
from autotune.store.engine import CREATE_ATTEMPTS, StoreBase, StoreError, hide_passwords, one_line
from autotune.store.schema import (
    SCHEMA_VERSION,
    SHAPE_COLUMNS,
    baselines_table,
    ceilings_table,
    claims_table,
    devices_table,
    evaluations_table,
    runs_table,
    shape_values,
)

# Importable from here, where they were before the opening moved to engine.py.
__all__ = [
    "SCHEMA_VERSION",
    "SHAPE_COLUMNS",
    "Store",
    "StoreError",
    "StoredEvaluation",
    "StudyClaim",
    "hide_passwords",
]


@dataclass(frozen=True, slots=True)
class StoredEvaluation:
    """One stored evaluation of a study, as a resuming tuner needs it."""

    config: Config
    status: Status
    time_ms: float | None
    gflops: float | None
    error: str


@dataclass(frozen=True, slots=True)
class StudyClaim:
    """Who is tuning a study: the run, its host and process, and when its lease runs out."""

    run_id: int
    host: str
    pid: int
    expires_at: float  # Unix time in seconds


class Store(StoreBase):
    """The results database behind a SQLAlchemy URL (or a SQLite file path)."""

    # -----------------------------------------------------------------------------------------
    # Writes (each in its own transaction)

    def register_device(self, info: DeviceInfo) -> int:
        """Id of the device, inserting it the first time it is seen."""
        d = devices_table.c
        identity = sa.and_(
            d.name == info.name,
            d.compute_capability == info.compute_capability,
            d.sm_count == info.sm_count,
            d.driver_version == info.driver_version,
        )
        with self._errors("cannot register device"):
            with self._engine.connect() as conn:
                found = conn.execute(sa.select(d.id).where(identity)).scalar_one_or_none()
            if found is not None:
                return int(found)
            try:
                with self._engine.begin() as conn:
                    result = conn.execute(devices_table.insert().values(**info.as_dict()))
                    return int(result.inserted_primary_key[0])
            except IntegrityError:
                pass  # registered by another process since we looked
            with self._engine.connect() as conn:
                return int(conn.execute(sa.select(d.id).where(identity)).scalar_one())

    def start_run(self, device_id: int, command: str, versions: dict[str, Any]) -> int:
        with self._errors("cannot start run"):
            with self._engine.begin() as conn:
                result = conn.execute(
                    runs_table.insert().values(
                        device_id=device_id,
                        started_at=_now(),
                        command=command,
                        versions=dict(versions),
                        host=socket.gethostname(),
                    )
                )
                return int(result.inserted_primary_key[0])

    def finish_run(self, run_id: int) -> None:
        with self._errors("cannot finish run"):
            with self._engine.begin() as conn:
                result = conn.execute(
                    runs_table.update().where(runs_table.c.id == run_id).values(finished_at=_now())
                )
        if result.rowcount == 0:
            raise StoreError(f"no run {run_id} in {self.url}")

    # -- study claims (one run tunes a study at a time; autotune/tuning/claims.py keeps them) --

    def claim(
        self,
        device_id: int,
        family: str,
        problem_key: str,
        holder: StudyClaim,
        now: float,
        take_from: int | None = None,
    ) -> StudyClaim | None:
        """Claim a study for holder (or renew holder's claim) in one transaction: None when
        holder has it now, else the claim of the run that holds it. A claim whose lease ran out
        before `now`, or the claim of run `take_from` (a holder known to be dead), is replaced."""
        c = claims_table.c
        study = (c.device_id == device_id, c.family == family, c.problem_key == problem_key)
        stale = c.expires_at < now
        if take_from is not None:
            stale = sa.or_(stale, c.run_id == take_from)
        row = {"device_id": device_id, "family": family, "problem_key": problem_key}
        with self._errors("cannot claim study"):
            for _ in range(CREATE_ATTEMPTS):
                try:
                    with self._engine.begin() as conn:
                        # A write first: SQLite takes its write lock here, so the look and the
                        # insert below see no other process's claim in between.
                        conn.execute(claims_table.delete().where(*study, stale))
                        found = conn.execute(
                            sa.select(c.run_id, c.host, c.pid, c.expires_at).where(*study)
                        ).first()
                        if found is None:
                            values = {**row, "run_id": holder.run_id, "host": holder.host}
                            values |= {"pid": holder.pid, "expires_at": holder.expires_at}
                            conn.execute(claims_table.insert().values(**values))
                            return None
                        if found.run_id == holder.run_id:
                            conn.execute(
                                claims_table.update()
                                .where(*study)
                                .values(expires_at=holder.expires_at)
                            )
                            return None
                        return StudyClaim(found.run_id, found.host, found.pid, found.expires_at)
                except IntegrityError:
                    continue  # another process inserted its claim first (PostgreSQL): look again
            raise StoreError(f"cannot claim study {family} {problem_key} ({self.url})")

    def renew_claim(
        self, device_id: int, family: str, problem_key: str, run_id: int, expires_at: float
    ) -> bool:
        """Extend run_id's lease on a study; False if the run no longer holds it."""
        c = claims_table.c
        with self._errors("cannot renew claim"), self._engine.begin() as conn:
            result = conn.execute(
                claims_table.update()
                .where(
                    c.device_id == device_id,
                    c.family == family,
                    c.problem_key == problem_key,
                    c.run_id == run_id,
                )
                .values(expires_at=expires_at)
            )
        return result.rowcount == 1

    def release_claims(
        self,
        run_id: int,
        device_id: int | None = None,
        family: str | None = None,
        problem_key: str | None = None,
    ) -> int:
        """Drop run_id's claims (all of them, or one study's); returns how many."""
        c = claims_table.c
        where = [c.run_id == run_id]
        for column, value in ((c.device_id, device_id), (c.family, family)):
            if value is not None:
                where.append(column == value)
        if problem_key is not None:
            where.append(c.problem_key == problem_key)
        with self._errors("cannot release claims"), self._engine.begin() as conn:
            return conn.execute(claims_table.delete().where(*where)).rowcount

    def claims(self) -> pd.DataFrame:
        """The studies being tuned now: device, family, problem_key, run_id, host, pid,
        expires_at (Unix time; a lease in the past is free to take)."""
        c, d = claims_table.c, devices_table.c
        query = (
            sa.select(
                d.name.label("device"),
                c.family,
                c.problem_key,
                c.run_id,
                c.host,
                c.pid,
                c.expires_at,
            )
            .select_from(claims_table.join(devices_table))
            .order_by(c.id)
        )
        return self._frame(query, "cannot read claims")

    def record(
        self,
        run_id: int,
        device_id: int,
        family: str,
        problem: Problem,
        config: Config,
        m: Measurement,
        flops: int,
    ) -> bool:
        """Store one finished evaluation; False (nothing changed) if the study already has it."""
        gflops = m.gflops(flops)
        row = {
            "run_id": run_id,
            "device_id": device_id,
            "family": family,
            "problem_key": problem.key,
            **shape_values(problem),
            "config": config.to_json(),
            "status": m.status.value,
            "error": m.error,
            "rel_error": _float(m.rel_error),
            "compile_s": _float(m.compile_s),
            "time_ms": _float(m.time_ms),
            "samples_ms": _samples(m.samples_ms),
            "gflops": _float(gflops),
            "registers": m.registers,
            "smem_bytes": m.smem_bytes,
            "spills": m.spills,
            "scratch_bytes": m.scratch_bytes,
            "created_at": _now(),
            "protocol": m.protocol,
            "spread": _float(m.spread),
        }
        with self._errors("cannot record evaluation"):
            try:
                with self._engine.begin() as conn:
                    conn.execute(evaluations_table.insert().values(**row))
                return True
            except IntegrityError as err:
                # The same error comes from the UNIQUE constraint and from a foreign key.
                if self._has(device_id, family, problem.key, row["config"], m.protocol):
                    return False
                raise StoreError(
                    f"cannot record evaluation ({self.url}): {one_line(err)}"
                ) from None

    def record_ceiling(
        self,
        device_id: int,
        name: str,
        value: float,
        unit: str,
        detail: str,
        samples_ms: list[float] | tuple[float, ...] = (),
        protocol: int = TIMING_PROTOCOL,
    ) -> None:
        """Store a measured device ceiling (the newest one of a name and protocol is in use)."""
        row = {
            "device_id": device_id,
            "name": name,
            "value": float(value),
            "unit": unit,
            "detail": detail,
            "samples_ms": _samples(samples_ms),
            "created_at": _now(),
            "protocol": protocol,
            "spread": _float(spread(samples_ms)),
        }
        with self._errors("cannot record ceiling"), self._engine.begin() as conn:
            conn.execute(ceilings_table.insert().values(**row))

    def record_baseline(
        self,
        device_id: int,
        library: str,
        problem: Problem,
        algorithm: str,
        version: str,
        m: Measurement,
        flops: int,
    ) -> None:
        """Store (or replace) a library's measurement of one shape on one device under the
        measurement's timing protocol (those of other protocols stay)."""
        row = {
            "device_id": device_id,
            "library": library,
            "problem_key": problem.key,
            **shape_values(problem),
            "algorithm": algorithm,
            "version": version,
            "status": m.status.value,
            "error": m.error,
            "time_ms": _float(m.time_ms),
            "samples_ms": _samples(m.samples_ms),
            "gflops": _float(m.gflops(flops)),
            "created_at": _now(),
            "protocol": m.protocol,
            "spread": _float(m.spread),
        }
        b = baselines_table.c
        with self._errors("cannot record baseline"), self._engine.begin() as conn:
            conn.execute(
                baselines_table.delete().where(
                    b.device_id == device_id,
                    b.library == library,
                    b.problem_key == problem.key,
                    b.protocol == m.protocol,
                )
            )
            conn.execute(baselines_table.insert().values(**row))

    def has_baseline(
        self, device_id: int, library: str, problem: Problem, protocol: int | None = None
    ) -> bool:
        b = baselines_table.c
        query = sa.select(b.id).where(
            b.device_id == device_id,
            b.library == library,
            b.problem_key == problem.key,
            b.status == Status.OK.value,
            b.protocol == self._protocol(protocol),
        )
        with self._errors("cannot read baselines"), self._engine.connect() as conn:
            return conn.execute(query).first() is not None

    def _has(
        self, device_id: int, family: str, problem_key: str, config_json: str, protocol: int
    ) -> bool:
        e = evaluations_table.c
        with self._engine.connect() as conn:
            found = conn.execute(
                sa.select(e.id).where(
                    e.device_id == device_id,
                    e.family == family,
                    e.problem_key == problem_key,
                    e.config == config_json,
                    e.protocol == protocol,
                )
            ).first()
        return found is not None

    def forget(self, family: str, device: str | None = None, problem_key: str | None = None) -> int:
        """Delete a family's evaluations (one device's, one shape's), in one transaction; returns
        how many. For a kernel whose source changed: its old measurements are of another binary.
        Baselines and ceilings are not a family's and stay."""
        e = evaluations_table.c
        where = [e.family == family]
        if device is not None:
            ids = sa.select(devices_table.c.id).where(devices_table.c.name == device)
            where.append(e.device_id.in_(ids))
        if problem_key is not None:
            where.append(e.problem_key == problem_key)
        with self._errors("cannot delete evaluations"), self._engine.begin() as conn:
            return conn.execute(sa.delete(evaluations_table).where(*where)).rowcount

    # -----------------------------------------------------------------------------------------
    # Queries

    def evaluations(
        self, device_id: int, family: str, problem: Problem, protocol: int | None = None
    ) -> list[StoredEvaluation]:
        """Everything stored for one study under one timing protocol, in insertion order (to
        resume it: a study measured under another protocol is tuned again, not compared)."""
        e = evaluations_table.c
        query = (
            sa.select(e.config, e.status, e.time_ms, e.gflops, e.error)
            .where(
                e.device_id == device_id,
                e.family == family,
                e.problem_key == problem.key,
                e.protocol == self._protocol(protocol),
            )
            .order_by(e.id)
        )
        with self._errors("cannot read evaluations"), self._engine.connect() as conn:
            rows = conn.execute(query).all()
        return [
            StoredEvaluation(
                Config.from_json(r.config), Status(r.status), r.time_ms, r.gflops, r.error
            )
            for r in rows
        ]

    def best(
        self,
        device: str | None = None,
        family: str | None = None,
        kind: str | None = None,
        protocol: int | None = None,
        top: int = 1,
    ) -> pd.DataFrame:
        """Fastest OK evaluation per (device, family, problem) under one timing protocol (the
        store's reading protocol unless given; the `top` fastest with top > 1, fastest first);
        studies with none are left out.

        A device is its name: measurements on one GPU model under several drivers are one study.
        Columns: device, family, kind, the conv2d columns (empty for other kinds), config,
        time_ms, spread, gflops, registers, smem_bytes, scratch_bytes, evaluations, failures
        (both of that protocol), protocol, problem_key and shape (the problem's fields as a dict,
        every kind). Rows are ordered by device, family and the shape's fields.
        """
        e, d = evaluations_table.c, devices_table.c
        study = (d.name, e.family, e.problem_key)
        where = [*self._filters(device, family, kind), e.protocol == self._protocol(protocol)]
        counts = (
            sa.select(
                *study,
                sa.func.count().label("evaluations"),
                sa.func.sum(sa.case((e.status != Status.OK.value, 1), else_=0)).label("failures"),
            )
            .select_from(evaluations_table.join(devices_table))
            .where(*where)
            .group_by(*study)
            .subquery("counts")
        )
        ranked = (
            sa.select(
                d.name.label("device"),
                e.family,
                e.problem_key,
                e.kind,
                e.shape,
                *(e[name] for name in SHAPE_COLUMNS),
                e.config,
                e.time_ms,
                e.spread,
                e.gflops,
                e.registers,
                e.smem_bytes,
                e.scratch_bytes,
                e.protocol,
                sa.func.row_number()
                .over(partition_by=study, order_by=(e.time_ms, e.id))
                .label("place"),
            )
            .select_from(evaluations_table.join(devices_table))
            .where(*where, e.status == Status.OK.value, e.time_ms.is_not(None))
            .subquery("ranked")
        )
        r, c = ranked.c, counts.c
        query = (
            sa.select(
                r.device,
                r.family,
                r.kind,
                *(r[name] for name in SHAPE_COLUMNS),
                r.config,
                r.time_ms,
                r.spread,
                r.gflops,
                r.registers,
                r.smem_bytes,
                r.scratch_bytes,
                c.evaluations,
                c.failures,
                r.protocol,
                r.problem_key,
                r.shape,
            )
            .select_from(
                ranked.join(
                    counts,
                    sa.and_(
                        r.device == c.name,
                        r.family == c.family,
                        r.problem_key == c.problem_key,
                    ),
                )
            )
            .where(r.place <= top)
            .order_by(r.device, r.family, r.place)
        )
        frame = self._frame(query, "cannot read best configurations")
        return _by_shape(frame, ["device", "family"])

    def run_activity(
        self, recent_since: datetime, started_since: datetime | None = None
    ) -> pd.DataFrame:
        """Per run (those started at or after started_since, if given): id, device, host,
        command, started_at, finished_at, evaluations (all), recent (recorded since
        recent_since), last_at (its newest evaluation), claims (held now), lease_left_s (of its
        claim that runs out first, negative when expired; NaN without one)."""
        r, d, e, c = runs_table.c, devices_table.c, evaluations_table.c, claims_table.c
        evals = (
            sa.select(
                e.run_id,
                sa.func.count().label("evaluations"),
                sa.func.sum(sa.case((e.created_at >= recent_since, 1), else_=0)).label("recent"),
                sa.func.max(e.created_at).label("last_at"),
            )
            .group_by(e.run_id)
            .subquery("evals")
        )
        held = (
            sa.select(
                c.run_id,
                sa.func.count().label("claims"),
                sa.func.min(c.expires_at).label("expires_at"),
            )
            .group_by(c.run_id)
            .subquery("held")
        )
        query = (
            sa.select(
                r.id,
                d.name.label("device"),
                r.host,
                r.command,
                r.started_at,
                r.finished_at,
                sa.func.coalesce(evals.c.evaluations, 0).label("evaluations"),
                sa.func.coalesce(evals.c.recent, 0).label("recent"),
                evals.c.last_at,
                sa.func.coalesce(held.c.claims, 0).label("claims"),
                held.c.expires_at,
            )
            .select_from(
                runs_table.join(devices_table)
                .outerjoin(evals, evals.c.run_id == r.id)
                .outerjoin(held, held.c.run_id == r.id)
            )
            .where(*([r.started_at >= started_since] if started_since is not None else []))
            .order_by(r.id)
        )
        frame = self._frame(query, "cannot read runs")
        now = time.time()
        frame["lease_left_s"] = [
            None if pd.isna(x) else float(x) - now for x in frame.pop("expires_at")
        ]
        for name in ("evaluations", "recent", "claims"):
            frame[name] = frame[name].astype(int)
        return frame

    def history(
        self,
        device: str | None = None,
        family: str | None = None,
        kind: str | None = None,
        protocol: int | None = None,
        every_protocol: bool = False,
    ) -> pd.DataFrame:
        """Every stored evaluation of one timing protocol (the store's reading protocol unless
        given; all of them with every_protocol) with its device name, in insertion order."""
        e, d = evaluations_table.c, devices_table.c
        columns = [c for c in evaluations_table.c if c.name != "id"]
        where = self._filters(device, family, kind)
        if not every_protocol:
            where.append(e.protocol == self._protocol(protocol))
        query = (
            sa.select(e.id, d.name.label("device"), *columns)
            .select_from(evaluations_table.join(devices_table))
            .where(*where)
            .order_by(e.id)
        )
        return self._frame(query, "cannot read history")

    def ceilings(self, device: str | None = None, protocol: int | None = None) -> pd.DataFrame:
        """The newest measurement of each ceiling per device under one timing protocol: device,
        name, value, unit, detail, created_at, spread, protocol."""
        c, d = ceilings_table.c, devices_table.c
        newest = (
            sa.select(sa.func.max(c.id))
            .where(c.protocol == self._protocol(protocol))
            .group_by(c.device_id, c.name)
            .scalar_subquery()
        )
        query = (
            sa.select(
                d.name.label("device"),
                c.name,
                c.value,
                c.unit,
                c.detail,
                c.created_at,
                c.spread,
                c.protocol,
            )
            .select_from(ceilings_table.join(devices_table))
            .where(c.id.in_(newest), *([d.name == device] if device is not None else []))
            .order_by(d.name, c.name)
        )
        return self._frame(query, "cannot read ceilings")

    def baselines(
        self,
        device: str | None = None,
        library: str | None = None,
        kind: str | None = None,
        protocol: int | None = None,
    ) -> pd.DataFrame:
        """Library measurements under one timing protocol: device, library, kind, the conv2d
        columns, problem_key, shape, algorithm, version, status, error, time_ms, gflops, spread,
        protocol; by device, library and shape."""
        b, d = baselines_table.c, devices_table.c
        where = [b.protocol == self._protocol(protocol)]
        if device is not None:
            where.append(d.name == device)
        if library is not None:
            where.append(b.library == library)
        if kind is not None:
            where.append(b.kind == kind)
        query = (
            sa.select(
                d.name.label("device"),
                b.library,
                b.kind,
                *(b[n] for n in SHAPE_COLUMNS),
                b.problem_key,
                b.shape,
                b.algorithm,
                b.version,
                b.status,
                b.error,
                b.time_ms,
                b.gflops,
                b.spread,
                b.protocol,
            )
            .select_from(baselines_table.join(devices_table))
            .where(*where)
            .order_by(d.name, b.library, b.id)
        )
        return _by_shape(self._frame(query, "cannot read baselines"), ["device", "library"])

    def devices(self) -> pd.DataFrame:
        query = sa.select(devices_table).order_by(devices_table.c.id)
        return self._frame(query, "cannot read devices")

    def summary(self, protocol: int | None = None) -> pd.DataFrame:
        """Per device and family, under one timing protocol: studies, evaluations, OK ones and
        failures by status."""
        e, d = evaluations_table.c, devices_table.c
        by_status = [
            sa.func.sum(sa.case((e.status == s.value, 1), else_=0)).label(s.value.lower())
            for s in Status
        ]
        query = (
            sa.select(
                d.name.label("device"),
                e.family,
                sa.func.count(sa.distinct(e.problem_key)).label("studies"),
                sa.func.count().label("evaluations"),
                sa.func.sum(sa.case((e.status != Status.OK.value, 1), else_=0)).label("failures"),
                *by_status,
            )
            .select_from(evaluations_table.join(devices_table))
            .where(e.protocol == self._protocol(protocol))
            .group_by(d.name, e.family)
            .order_by(d.name, e.family)
        )
        return self._frame(query, "cannot read summary")

    def _filters(
        self, device: str | None, family: str | None, kind: str | None = None
    ) -> list[sa.ColumnElement[bool]]:
        where: list[sa.ColumnElement[bool]] = []
        if device is not None:
            where.append(devices_table.c.name == device)
        if family is not None:
            where.append(evaluations_table.c.family == family)
        if kind is not None:
            where.append(evaluations_table.c.kind == kind)
        return where


def _by_shape(frame: pd.DataFrame, leading: list[str]) -> pd.DataFrame:
    """Rows ordered by the leading columns, then kind, then the shape's fields in their order
    (N, K, C, F, B, stride for conv2d; M, N, K; D, R, Cc, Kd, Kr, Kc): numbers, not keys."""
    if frame.empty:
        return frame

    def key(i: int) -> tuple:
        row = frame.iloc[i]
        kind = str(row["kind"])
        shape = row["shape"] or {}
        fields = tuple(int(shape.get(n, 0)) for n in KIND_FIELDS.get(kind, ()))
        return (*(str(row[c]) for c in leading), kind, fields)

    order = sorted(range(len(frame)), key=key)
    return frame.iloc[order].reset_index(drop=True)


def _samples(samples_ms) -> list[float]:
    """Timing samples as stored: CUDA events resolve about half a microsecond, so 1 ns (six
    decimals of a millisecond) keeps every digit that means anything, in half the bytes of a
    float32 value printed as a double (the samples are most of the database)."""
    return [round(float(s), 6) for s in samples_ms]


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _float(value: float | None) -> float | None:
    # NumPy scalars would reach the driver as objects it may not adapt.
    return None if value is None else float(value)
