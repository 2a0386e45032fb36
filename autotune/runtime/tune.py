"""on_miss="tune": tune one shape now, with a small budget per family, and store the results."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from autotune.families import Family
from autotune.gpu.timing import TimingPolicy
from autotune.model.problem import ConvProblem
from autotune.runtime.lookup import LookupMiss, callable_family
from autotune.tuning.session import open_gpu_session
from autotune.tuning.tuner import plan_studies


def tune_shape(
    database: str,
    problem: ConvProblem,
    families: Mapping[str, Family],
    budget: int,
    device_index: int = 0,
    cache_dir: Path | None = None,
    timing: TimingPolicy | None = None,
) -> int:
    """Tune `problem` with every family the runtime can call (the tuner's default strategy,
    seeded from the nearest stored shapes, `budget` evaluations each, timing protocol 2 in
    a GPU worker process) and store every evaluation in `database`. Returns how many were
    made; LookupMiss when no family can run the shape."""
    pairs = [(f, problem) for f in families.values() if callable_family(f, problem) is None]
    if not pairs:
        raise LookupMiss(f"no family the runtime can call computes {problem.key}")
    session = open_gpu_session(database, gpu=device_index, cache_dir=cache_dir)
    try:
        studies, skipped = plan_studies(pairs, session.runner.limits)
        if not studies:
            reasons = "; ".join(f"{s.family}: {s.reason}" for s in skipped[:3])
            raise LookupMiss(f"nothing can tune {problem.key} ({reasons})")
        tuner = session.tuner(
            f"autotune.conv2d(on_miss='tune') {problem.key}", timing=timing or TimingPolicy()
        )
        outcome = tuner.run(studies, budget)
    finally:
        session.close()
    return outcome.evaluated
