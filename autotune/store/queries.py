"""Queries: a study's evaluations to resume it, and the tables of evaluations that reports and
commands read (the devices, ceilings and baselines: measured.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

import sqlalchemy as sa

from autotune.model.observe import ENERGY_J, THROTTLED
from autotune.model.precision import DEFAULT_DTYPE, DEFAULT_LAYOUT, DTYPES, LAYOUTS
from autotune.model.problem import KIND_FIELDS, Problem
from autotune.model.records import Status
from autotune.model.space import Config
from autotune.store.engine import StoreBase
from autotune.store.repeats import candidates, rank_by_figure
from autotune.store.samples import unpack
from autotune.store.schema import (
    SHAPE_COLUMNS,
    devices_table,
    evaluations_table,
    observations_table,
)

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True, slots=True)
class StoredEvaluation:
    """One stored evaluation of a study, as a resuming tuner needs it."""

    config: Config
    status: Status
    time_ms: float | None
    gflops: float | None
    error: str
    observations: tuple[tuple[str, float], ...] = ()  # the device's, where it was observed


Kernels = Mapping[str, str]  # family name -> the digest of its current code
# best()'s columns, in order.
BEST_COLUMNS = (
    "device", "family", "kind", *SHAPE_COLUMNS, "config", "time_ms", "spread", "gflops",
    "registers", "smem_bytes", "scratch_bytes", "evaluations", "failures", "measurements",
    "protocol", "problem_key", "shape", "kernel_digest", "throttled", "energy_j",
)  # fmt: skip


class Queries(StoreBase):
    """Reads, each of one timing protocol (the store's reading protocol unless told otherwise)
    and of the current code: for every family in the store's `kernels` (read_current), only
    evaluations stored with that family's digest; stale ones (of other code, or stored before
    digests, until backfilled) are left out. Families it does not name are read whole: the
    caller does not know their code."""

    kernels: Kernels = MappingProxyType({})

    def read_current(self, kernels: Kernels) -> None:
        """From now on, read only the evaluations of these families' current code (family ->
        Family.kernel_digest()); set once by whoever opens the store for reading."""
        self.kernels = MappingProxyType(dict(kernels))

    def evaluations(
        self,
        device_id: int,
        family: str,
        problem: Problem,
        protocol: int | None = None,
        kernel_digest: str | None = None,
    ) -> list[StoredEvaluation]:
        """Everything stored for one study under one timing protocol and of the code whose
        digest is kernel_digest (the store's current one of the family if not given), with the
        device's readings where it was observed, in insertion order: to resume it. A study
        measured under another protocol or of other code is tuned again, not compared."""
        e, o = evaluations_table.c, observations_table.c
        kernels = {family: kernel_digest} if kernel_digest is not None else None
        where = (
            e.device_id == device_id,
            e.family == family,
            e.problem_key == problem.key,
            e.protocol == self._protocol(protocol),
            *self._current(kernels),
        )
        query = sa.select(e.id, e.config, e.status, e.time_ms, e.gflops, e.error).where(*where)
        observed = sa.select(o.evaluation_id, o.name, o.value).where(
            o.evaluation_id.in_(sa.select(e.id).where(*where))
        )
        with self._errors("cannot read evaluations"), self._engine.connect() as conn:
            rows = conn.execute(query.order_by(e.id)).all()
            readings: dict[int, list[tuple[str, float]]] = {}
            for r in conn.execute(observed.order_by(o.evaluation_id, o.name)):
                readings.setdefault(r.evaluation_id, []).append((r.name, r.value))
        return [
            StoredEvaluation(
                Config.from_json(r.config),
                Status(r.status),
                r.time_ms,
                r.gflops,
                r.error,
                tuple(readings.get(r.id, ())),
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
        kernels: Kernels | None = None,
    ) -> pd.DataFrame:
        """Fastest OK configuration per (device, family, problem) under one timing protocol (the
        store's reading protocol unless given; the `top` fastest with top > 1, fastest first);
        studies with none are left out. A configuration's time is its figure: the median of
        its first measurement and its repeats (store/repeats.py), ties to the first stored.

        A device is its name: measurements on one GPU model under several drivers are one study.
        Columns: device, family, kind, the conv2d columns (empty for other kinds), config,
        time_ms (the figure), spread (of its first measurement), gflops (of the figure),
        registers, smem_bytes, scratch_bytes, evaluations, failures (both of that protocol),
        measurements (its own: 1 + its repeats), protocol, problem_key, shape (the
        problem's fields as a dict, every kind), kernel_digest, throttled (1.0 where its first
        measurement's timed runs ran below the top SM clock, dropped or held down throughout,
        0.0 where not, empty where clocks were not observed) and energy_j (joules a run,
        likewise; empty where energy was not observed). Rows are ordered by device, family
        and the shape's fields. Only the current code's evaluations count (the store's
        `kernels` unless given): a family whose kernel changed has no best until it is
        measured again.
        """
        e, d, o = evaluations_table.c, devices_table.c, observations_table.c
        study = (d.name, e.family, e.problem_key)
        throttle = sa.select(o.value).where(o.evaluation_id == e.id, o.name == THROTTLED)
        energy = sa.select(o.value).where(o.evaluation_id == e.id, o.name == ENERGY_J)
        where = [
            *self._filters(device, family, kind),
            e.protocol == self._protocol(protocol),
            *self._current(kernels),
        ]
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
        ranked = candidates(
            [
                d.name.label("device"),
                e.family,
                e.kind,
                *(e[name] for name in SHAPE_COLUMNS),
                e.config,
                e.spread,
                e.gflops,
                e.registers,
                e.smem_bytes,
                e.scratch_bytes,
                e.protocol,
                e.problem_key,
                e.shape,
                e.kernel_digest,
                throttle.scalar_subquery().label("throttled"),
                energy.scalar_subquery().label("energy_j"),
            ],
            evaluations_table.join(devices_table),
            where,
            study,
            top,
        )
        r, c = ranked.c, counts.c
        query = sa.select(ranked, c.evaluations, c.failures).select_from(
            ranked.join(
                counts,
                sa.and_(r.device == c.name, r.family == c.family, r.problem_key == c.problem_key),
            )
        )
        with self._errors("cannot read best configurations"), self._engine.connect() as conn:
            rows = [row._mapping for row in conn.execute(query)]
        best = rank_by_figure(rows, ("device", "family", "problem_key"), top)
        frame = self._frame_of(best, BEST_COLUMNS)
        return by_shape(frame, ["device", "family"])

    def history(
        self,
        device: str | None = None,
        family: str | None = None,
        kind: str | None = None,
        protocol: int | None = None,
        every_protocol: bool = False,
        kernels: Kernels | None = None,
    ) -> pd.DataFrame:
        """Every stored evaluation of one timing protocol (the store's reading protocol unless
        given; all of them with every_protocol) and of the current code (the store's `kernels`
        unless given) with its device name, in insertion order; the samples unpacked as
        `samples_ms` (a list of ms each)."""
        e, d = evaluations_table.c, devices_table.c
        columns = [c for c in evaluations_table.c if c.name != "id"]
        where = [*self._filters(device, family, kind), *self._current(kernels)]
        if not every_protocol:
            where.append(e.protocol == self._protocol(protocol))
        query = (
            sa.select(e.id, d.name.label("device"), *columns)
            .select_from(evaluations_table.join(devices_table))
            .where(*where)
            .order_by(e.id)
        )
        frame = self._frame(query, "cannot read history")
        where_samples = frame.columns.get_loc("samples")
        samples = [unpack(s) for s in frame.pop("samples")]
        import pandas as pd

        column = pd.Series(samples, index=frame.index, dtype=object)
        frame.insert(where_samples, "samples_ms", column)
        return frame

    def previous_kernels(self, device: str, kernels: Kernels) -> dict[str, tuple[str, ...]]:
        """Per family of `kernels` (family -> its current digest) with evaluations of other code
        on `device`: the digests of those versions, oldest first by their latest evaluation, so
        that a study's previous code is the last of them it has (a store that merged another
        machine's measurements may hold one version for some studies and an older for the
        rest). Rows stored before digests, "", are not a version."""
        e, d = evaluations_table.c, devices_table.c
        other = [sa.and_(e.family == f, e.kernel_digest != k) for f, k in kernels.items()]
        if not other:
            return {}
        query = (
            sa.select(e.family, e.kernel_digest, sa.func.max(e.id).label("latest"))
            .select_from(evaluations_table.join(devices_table))
            .where(d.name == device, e.kernel_digest != "", sa.or_(*other))
            .group_by(e.family, e.kernel_digest)
        )
        with self._errors("cannot read kernel versions"), self._engine.connect() as conn:
            rows = sorted(conn.execute(query).all(), key=lambda r: r.latest)
        versions: dict[str, tuple[str, ...]] = {}
        for r in rows:
            versions[r.family] = (*versions.get(r.family, ()), r.kernel_digest)
        return versions

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

    def older_code_shapes(
        self, device: str, kind: str, protocol: int | None = None
    ) -> list[dict[str, object]]:
        """The shapes (problem fields) of `device`'s studies of `kind` whose verified
        configurations are all of a family's previous code: none where the store reads every
        code (no read_current)."""
        if not self.kernels:
            return []
        current = set(self.best(device=device, kind=kind, protocol=protocol)["problem_key"])
        every = self.best(device=device, kind=kind, protocol=protocol, kernels={})
        return [
            json.loads(shape) if isinstance(shape, str) else shape
            for key, shape in zip(every["problem_key"], every["shape"], strict=True)
            if key not in current
        ]

    def _current(self, kernels: Kernels | None) -> list[sa.ColumnElement[bool]]:
        """The evaluations of the current code of the families in kernels (the store's unless
        given); rows of any other family pass."""
        kernels = self.kernels if kernels is None else kernels
        if not kernels:
            return []
        e = evaluations_table.c
        current = [sa.and_(e.family == f, e.kernel_digest == d) for f, d in kernels.items()]
        return [sa.or_(e.family.not_in(list(kernels)), *current)]

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


def by_shape(frame: pd.DataFrame, leading: list[str]) -> pd.DataFrame:
    """Rows ordered by the leading columns, then kind, then the shape's fields in their order
    (N, K, C, F, B, stride for conv2d; M, N, K; D, R, Cc, Kd, Kr, Kc): numbers, not keys; then
    its dtype and layout in the model's order (fp32 NCHW, the default, first), then its epilogue."""
    if frame.empty:
        return frame

    def key(i: int) -> tuple:
        row = frame.iloc[i]
        kind = str(row["kind"])
        shape = row["shape"] or {}
        fields = tuple(int(shape.get(n, 0)) for n in KIND_FIELDS.get(kind, ()))
        texts = (
            _position(DTYPES, shape.get("dtype", DEFAULT_DTYPE)),
            _position(LAYOUTS, shape.get("layout", DEFAULT_LAYOUT)),
            str(shape.get("epilogue", "")),  # none (the default) first
        )
        return (*(str(row[c]) for c in leading), kind, fields, texts)

    order = sorted(range(len(frame)), key=key)
    return frame.iloc[order].reset_index(drop=True)


def _position(names: tuple[str, ...], name: object) -> tuple[int, str]:
    """Where a dtype or layout comes in the model's order; a name this version does not know
    after all known ones, by name."""
    return (names.index(name), "") if name in names else (len(names), str(name))
