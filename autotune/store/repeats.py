"""Repeats: an evaluation measured again, and a configuration's figure, the median of its first
measurement and its repeats, by which the store ranks a study's configurations. The fastest of
many near-equal configurations each measured once is biased low (docs/concepts/timing.md); the
tuner measures the top one again and its figure stands on several measurements."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from autotune.model.problem import Problem
from autotune.model.records import Measurement, Status
from autotune.model.space import Config
from autotune.store.engine import RACE_ATTEMPTS, StoreBase, StoreError
from autotune.store.migrations import immediate_transaction
from autotune.store.samples import pack
from autotune.store.schema import evaluations_table, repeats_table


@dataclass(frozen=True, slots=True)
class RankedEvaluation:
    """A study's top configuration by figure: its evaluation, the figure and how many
    measurements it stands on (1 + its repeats)."""

    evaluation_id: int
    config: Config
    time_ms: float
    measurements: int


def candidates(
    columns: Sequence[sa.ColumnElement[Any]],
    joined: sa.FromClause,
    where: Sequence[sa.ColumnElement[bool]],
    study: Sequence[sa.ColumnElement[Any]],
    top: int,
) -> sa.Subquery:
    """The OK, timed evaluations of `joined` (evaluations and what they are joined to) that may
    be among a study's `top` by figure: every one with repeats, and the `top` fastest of the
    others, whose figure is their one time, so that no evaluation left out could pass them.
    `columns` (labelled) come out once per repeat, with the evaluation's id as evaluation_id, its
    first time as first_ms and the repeat's time as repeat_ms (empty for one without)."""
    e, r = evaluations_table.c, repeats_table.c
    repeated = sa.select(r.evaluation_id.label("id")).distinct().subquery("repeated")
    ranked = (
        sa.select(
            *columns,
            e.id.label("evaluation_id"),
            e.time_ms.label("first_ms"),
            repeated.c.id.label("repeated_id"),
            sa.func.row_number()
            .over(partition_by=(*study, repeated.c.id.is_(None)), order_by=(e.time_ms, e.id))
            .label("place"),
        )
        .select_from(joined.outerjoin(repeated, repeated.c.id == e.id))
        .where(*where, e.status == Status.OK.value, e.time_ms.is_not(None))
        .subquery("ranked")
    )
    c = ranked.c
    kept = [c[name] for name in c.keys() if name not in ("repeated_id", "place")]
    return (
        sa.select(*kept, r.time_ms.label("repeat_ms"))
        .select_from(
            ranked.outerjoin(
                repeats_table,
                sa.and_(r.evaluation_id == c.evaluation_id, c.repeated_id.is_not(None)),
            )
        )
        .where(sa.or_(c.place <= top, c.repeated_id.is_not(None)))
        .subquery("candidates")
    )


def figure(first_ms: float, repeats_ms: Iterable[float]) -> float:
    """A configuration's time: the median of its measurements' times (each the median of its
    samples), its first one's alone where it has no repeats."""
    return statistics.median([first_ms, *repeats_ms])


def rank_by_figure(
    rows: Iterable[Mapping[str, Any]], study: Sequence[str], top: int
) -> list[dict[str, Any]]:
    """candidates() rows as one row per evaluation, the `top` of each study (named by the
    columns `study`) by figure, ties by id (the first stored), in order of study, then place.
    Each row's time_ms is its figure and gflops follows it (the stored GFlop/s are the
    problem's FLOPs over the first time: scaled by first over figure, so a row of a kind or
    shape this version cannot read still ranks); `measurements` is 1 + its repeats. The
    columns first_ms and repeat_ms are dropped."""
    merged: dict[int, dict[str, Any]] = {}
    times: dict[int, list[float]] = {}
    for row in rows:
        key = int(row["evaluation_id"])
        if key not in merged:
            merged[key] = {n: v for n, v in row.items() if n != "repeat_ms"}
            times[key] = []
        if row["repeat_ms"] is not None:
            times[key].append(float(row["repeat_ms"]))
    by_study: dict[tuple, list[dict[str, Any]]] = {}
    for key, row in merged.items():
        first = float(row.pop("first_ms"))
        row["time_ms"] = figure(first, times[key])
        if times[key] and row.get("gflops") is not None and row["time_ms"] > 0:
            row["gflops"] = float(row["gflops"]) * first / row["time_ms"]  # as stored without
        row["measurements"] = 1 + len(times[key])
        by_study.setdefault(tuple(str(row[n]) for n in study), []).append(row)
    ranked = []
    for name in sorted(by_study):
        places = sorted(by_study[name], key=lambda r: (r["time_ms"], r["evaluation_id"]))
        ranked += places[:top]
    return ranked


class Repeats(StoreBase):
    """Measurements of a stored evaluation after its first, and a study's top configuration by
    the figure they make."""

    def add_repeats(self, evaluation_id: int, run_id: int, ms: Iterable[Measurement]) -> int:
        """Store measurements of the stored OK evaluation `evaluation_id` made again by run
        `run_id`, numbered after its earlier repeats, in one transaction; returns how many.
        Only OK measurements are times: anything else is refused, as is an evaluation that does
        not exist or did not pass."""
        measurements = list(ms)
        for m in measurements:
            if m.status is not Status.OK or m.time_ms is None:
                raise StoreError(f"a repeat is an OK measurement with a time, not {m.status.value}")
        e, r = evaluations_table.c, repeats_table.c
        for attempt in range(RACE_ATTEMPTS):
            with self._errors("cannot store repeats"):
                try:
                    with immediate_transaction(self._engine) as conn:
                        status = conn.execute(
                            sa.select(e.status).where(e.id == evaluation_id)
                        ).scalar_one_or_none()
                        if status != Status.OK.value:
                            why = "no such evaluation" if status is None else f"it is {status}"
                            raise StoreError(
                                f"cannot measure evaluation {evaluation_id} again ({self.url}): "
                                f"{why}"
                            )
                        last = conn.execute(
                            sa.select(sa.func.max(r.sequence)).where(
                                r.evaluation_id == evaluation_id
                            )
                        ).scalar()
                        rows = [
                            _repeat_row(evaluation_id, (last or 0) + i, run_id, m)
                            for i, m in enumerate(measurements, 1)
                        ]
                        if rows:
                            conn.execute(repeats_table.insert(), rows)
                    return len(rows)
                except IntegrityError:
                    # PostgreSQL: another process numbered a repeat of it meanwhile (SQLite's
                    # immediate transaction waits instead); number them again.
                    if attempt == RACE_ATTEMPTS - 1:
                        raise
        raise AssertionError("unreachable: the last attempt returns or raises")

    def study_best(
        self, device_id: int, family: str, problem: Problem, protocol: int, kernel_digest: str
    ) -> RankedEvaluation | None:
        """The study's top configuration by figure among its evaluations under `protocol` of the
        code `kernel_digest` (what the tuner resumes from), or None where none passed."""
        top = self.study_top(device_id, family, problem, protocol, kernel_digest, 1)
        return top[0] if top else None

    def study_top(
        self,
        device_id: int,
        family: str,
        problem: Problem,
        protocol: int,
        kernel_digest: str,
        top: int,
    ) -> list[RankedEvaluation]:
        """The study's `top` configurations by figure, fastest first, among its evaluations
        under `protocol` of the code `kernel_digest` (empty where none passed)."""
        e = evaluations_table.c
        where = (
            e.device_id == device_id,
            e.family == family,
            e.problem_key == problem.key,
            e.protocol == protocol,
            e.kernel_digest == kernel_digest,
        )
        found = candidates([e.config.label("config")], evaluations_table, where, (), top=top)
        with self._errors("cannot rank the study"), self._engine.connect() as conn:
            rows = [row._mapping for row in conn.execute(sa.select(found))]
        return [
            RankedEvaluation(
                int(row["evaluation_id"]),
                Config.from_json(row["config"]),
                row["time_ms"],
                row["measurements"],
            )
            for row in rank_by_figure(rows, (), top=top)
        ]


def _repeat_row(evaluation_id: int, sequence: int, run_id: int, m: Measurement) -> dict:
    return {
        "evaluation_id": evaluation_id,
        "sequence": sequence,
        "run_id": run_id,
        "time_ms": float(m.time_ms),
        "samples": pack(m.samples_ms),
        "spread": None if m.spread is None else float(m.spread),
        "created_at": datetime.now(timezone.utc),
    }


__all__ = ["RankedEvaluation", "Repeats", "candidates", "figure", "rank_by_figure"]
