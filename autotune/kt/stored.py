"""The stored best of tune_kernel studies: one rule for what is current and what is best, read
by the kernel header export (kt/targets.py) and by tuned_kernel (kt/tuned.py)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd

from autotune.model.records import Status
from autotune.model.space import Config
from autotune.store import Store

KIND = "kernel"
TOP_PERCENT = 3.0  # Kernel Tuner's store_results keeps the configurations within 3% of the best


@dataclass(frozen=True, slots=True)
class StudyBest:
    """A tune_kernel study's best current measurement on one device."""

    kernel: str
    device: str
    problem_key: str
    shape: dict  # X, Y, Z, args and launch, as stored
    config: Config
    time_ms: float
    evaluations: int  # of the current code, under the store's timing protocol
    failures: int
    top: tuple[tuple[Config, float], ...]  # within TOP_PERCENT of the best, fastest first
    measured_at: str  # the study's newest evaluation (ISO 8601)

    @property
    def sizes(self) -> tuple[int, int, int]:
        return tuple(int(self.shape.get(n, 1)) for n in ("X", "Y", "Z"))  # type: ignore[return-value]

    @property
    def study(self) -> str:
        return f"{self.kernel} {self.problem_key}"


def current(rows: pd.DataFrame, digest: str | None = None) -> pd.DataFrame:
    """The rows of one study that measure its current code. Where evaluations store a digest of
    their kernel (a `kernel_digest` column): those of `digest` when some are, else those of the
    digest measured last. A study's key already holds its source's digest; this leaves out
    measurements of an edited header or option under the same key. Without the column: all."""
    if "kernel_digest" not in rows.columns or rows.empty:
        return rows
    digests = rows["kernel_digest"].fillna("")
    if digest is not None and (digests == digest).any():
        return rows[digests == digest]
    newest = digests.iloc[-1]  # history is in insertion order
    return rows[digests == newest]


def study_best(rows: pd.DataFrame, digest: str | None = None) -> StudyBest | None:
    """The best of one study's rows (one device, kernel and problem key, from Store.history),
    or None where no current evaluation is OK and timed."""
    rows = current(rows, digest)
    ok = rows[(rows["status"] == Status.OK.value) & rows["time_ms"].notna()]
    if ok.empty:
        return None
    ok = ok.sort_values(["time_ms", "id"], kind="stable")
    best = ok.iloc[0]
    limit = float(best["time_ms"]) * (1 + TOP_PERCENT / 100)
    top = tuple(
        (Config.from_json(r.config), float(r.time_ms))
        for r in ok.itertuples(index=False)
        if r.time_ms <= limit
    )
    shape = best["shape"]
    return StudyBest(
        kernel=str(best["family"]),
        device=str(best["device"]),
        problem_key=str(best["problem_key"]),
        shape=json.loads(shape) if isinstance(shape, str) else dict(shape or {}),
        config=Config.from_json(best["config"]),
        time_ms=float(best["time_ms"]),
        evaluations=len(rows),
        failures=int((rows["status"] != Status.OK.value).sum()),
        top=top,
        measured_at=pd.Timestamp(rows["created_at"].max()).isoformat(),
    )


def kernel_bests(
    store: Store, devices: Iterable[str] = (), kernels: Iterable[str] = ()
) -> list[StudyBest]:
    """Every stored tune_kernel study's best, of the store's timing protocol, on `devices` and
    of `kernels` (every one where empty), ordered by kernel, device and newest study first."""
    wanted_devices, wanted_kernels = set(devices), set(kernels)
    history = store.history(kind=KIND)
    if wanted_devices:
        history = history[history["device"].isin(wanted_devices)]
    if wanted_kernels:
        history = history[history["family"].isin(wanted_kernels)]
    found = []
    for _, rows in history.groupby(["family", "device", "problem_key"], sort=True):
        best = study_best(rows)
        if best is not None:
            found.append(best)
    found.sort(key=lambda b: b.measured_at, reverse=True)
    found.sort(key=lambda b: (b.kernel, b.device))
    return found


__all__ = ["KIND", "TOP_PERCENT", "StudyBest", "current", "kernel_bests", "study_best"]
