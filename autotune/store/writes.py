"""Writes, one transaction each: devices, runs, evaluations, ceilings, baselines; forget."""

from __future__ import annotations

import socket
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from autotune.model.problem import Problem
from autotune.model.records import TIMING_PROTOCOL, DeviceInfo, Measurement, Status, spread
from autotune.model.space import Config
from autotune.store.engine import StoreBase, StoreError, one_line
from autotune.store.samples import pack
from autotune.store.schema import (
    DIGESTED_IDENTITY,
    baseline_observations_table,
    baselines_table,
    ceilings_table,
    devices_table,
    evaluations_table,
    observations_table,
    repeats_table,
    runs_table,
    shape_values,
    with_identity_digest,
)


class Writes(StoreBase):
    """The store's writes: what a run adds to the database, and what `forget` takes out."""

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

    def record(
        self,
        run_id: int,
        device_id: int,
        family: str,
        problem: Problem,
        config: Config,
        m: Measurement,
        flops: int,
        kernel_digest: str = "",
    ) -> bool:
        """Store one finished evaluation of the code whose digest is kernel_digest
        (Family.kernel_digest; the tuner always gives it, a row without one, "", is stale
        wherever its family's digest is known); False (nothing changed) if the study already
        has it."""
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
            "samples": pack(m.samples_ms),
            "gflops": _float(gflops),
            "registers": m.registers,
            "smem_bytes": m.smem_bytes,
            "spills": m.spills,
            "scratch_bytes": m.scratch_bytes,
            "created_at": _now(),
            "protocol": m.protocol,
            "spread": _float(m.spread),
            "kernel_digest": kernel_digest,
        }
        row = with_identity_digest(row)
        with self._errors("cannot record evaluation"):
            try:
                with self._engine.begin() as conn:
                    added = conn.execute(evaluations_table.insert().values(**row))
                    _insert_readings(conn, observations_table, added, m)
                return True
            except IntegrityError as err:
                # The same error comes from the UNIQUE constraint and from a foreign key.
                if self._has(
                    device_id, family, problem.key, row["config"], m.protocol, kernel_digest
                ):
                    return False
                if self._digest_taken(device_id, family, problem.key, row["identity_digest"]):
                    raise StoreError(
                        f"cannot record evaluation ({self.url}): its identity digest "
                        f"{row['identity_digest']} is another evaluation's of study "
                        f"{family} {problem.key} (a hash collision); nothing was stored"
                    ) from None
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
            "samples": pack(samples_ms),
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
        measurement's timing protocol (those of other protocols stay), with the device's readings
        where it was observed."""
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
            "samples": pack(m.samples_ms),
            "gflops": _float(m.gflops(flops)),
            "created_at": _now(),
            "protocol": m.protocol,
            "spread": _float(m.spread),
        }
        b, o = baselines_table.c, baseline_observations_table.c
        same = (
            b.device_id == device_id,
            b.library == library,
            b.problem_key == problem.key,
            b.protocol == m.protocol,
        )
        with self._errors("cannot record baseline"), self._engine.begin() as conn:
            replaced = sa.select(b.id).where(*same).scalar_subquery()
            conn.execute(baseline_observations_table.delete().where(o.baseline_id.in_(replaced)))
            conn.execute(baselines_table.delete().where(*same))
            added = conn.execute(baselines_table.insert().values(**row))
            _insert_readings(conn, baseline_observations_table, added, m)

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
        self,
        device_id: int,
        family: str,
        problem_key: str,
        config_json: str,
        protocol: int,
        kernel_digest: str,
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
                    e.kernel_digest == kernel_digest,
                )
            ).first()
        return found is not None

    def _digest_taken(self, device_id: int, family: str, problem_key: str, digest: int) -> bool:
        e = evaluations_table.c
        query = sa.select(e.id).where(
            e.device_id == device_id,
            e.family == family,
            e.problem_key == problem_key,
            e.identity_digest == digest,
        )
        with self._engine.connect() as conn:
            return conn.execute(query).first() is not None

    def backfill_digests(self, digests: Mapping[str, str]) -> int:
        """Give every evaluation stored without a kernel digest ("", before schema version 6) the
        current digest of its family, for the families named, in one transaction; returns how
        many. This asserts that those rows measured the code as it is now: run it once, on
        results known to be of the current sources. A row whose study already holds the same
        configuration under that digest keeps none (it stays stale)."""
        e = evaluations_table.c
        newer = evaluations_table.alias("newer")
        n = newer.c
        changed = 0
        with self._errors("cannot backfill kernel digests"), self._engine.begin() as conn:
            for family, digest in sorted(digests.items()):
                measured = sa.exists().where(
                    n.device_id == e.device_id,
                    n.family == e.family,
                    n.problem_key == e.problem_key,
                    n.config == e.config,
                    n.protocol == e.protocol,
                    n.kernel_digest == digest,
                )
                fields = [e[name] for name in DIGESTED_IDENTITY]
                rows = conn.execute(
                    sa.select(e.id, *fields).where(
                        e.family == family, e.kernel_digest == "", ~measured
                    )
                ).all()
                # The identity digest covers the kernel digest: computed here, row by row
                # (SQL has no SHA-256 common to SQLite and PostgreSQL).
                updates = [
                    {
                        "row_id": row.id,
                        "new_digest": digest,
                        "new_identity": with_identity_digest(
                            {**row._mapping, "kernel_digest": digest}
                        )["identity_digest"],
                    }
                    for row in rows
                ]
                if updates:
                    conn.execute(
                        evaluations_table.update()
                        .where(e.id == sa.bindparam("row_id"))
                        .values(
                            kernel_digest=sa.bindparam("new_digest"),
                            identity_digest=sa.bindparam("new_identity"),
                        ),
                        updates,
                    )
                changed += len(updates)
        return changed

    def forget(self, family: str, device: str | None = None, problem_key: str | None = None) -> int:
        """Delete a family's evaluations (one device's, one shape's), in one transaction; returns
        how many, their readings and repeats with them. For a kernel whose source changed: its
        old measurements are of another binary. Baselines and ceilings are not a family's and
        stay."""
        e = evaluations_table.c
        where = [e.family == family]
        if device is not None:
            ids = sa.select(devices_table.c.id).where(devices_table.c.name == device)
            where.append(e.device_id.in_(ids))
        if problem_key is not None:
            where.append(e.problem_key == problem_key)
        with self._errors("cannot delete evaluations"), self._engine.begin() as conn:
            return delete_evaluations(conn, where)


def delete_evaluations(conn: sa.Connection, where: list[sa.ColumnElement[bool]]) -> int:
    """Delete the evaluations `where` selects with their readings and repeats (tables without a
    foreign key to them: schema.py says why); returns how many evaluations went."""
    gone = sa.select(evaluations_table.c.id).where(*where)
    for beside in (observations_table, repeats_table):
        conn.execute(sa.delete(beside).where(beside.c.evaluation_id.in_(gone)))
    return conn.execute(sa.delete(evaluations_table).where(*where)).rowcount


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _float(value: float | None) -> float | None:
    # NumPy scalars would reach the driver as objects it may not adapt.
    return None if value is None else float(value)


def _insert_readings(conn: sa.Connection, table: sa.Table, added: Any, m: Measurement) -> None:
    """The measurement's readings of the device, if observed, beside the row just inserted
    (`added`, its insert's result) in a readings table (schema._readings_table)."""
    if m.observations:
        key = int(added.inserted_primary_key[0])
        row_column = next(iter(table.c)).name  # a readings table's first column names the row
        readings = [
            {row_column: key, "name": name, "value": float(value)} for name, value in m.observations
        ]
        conn.execute(table.insert(), readings)
