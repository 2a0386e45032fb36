"""on_miss="tune": tune a call's problems now, with a small budget per family, and store them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from autotune.families import Family
from autotune.gpu.timing import TimingPolicy
from autotune.model.problem import ConvProblem
from autotune.runtime.choice import callable_family
from autotune.runtime.lookup import LookupMiss
from autotune.tuning.session import open_gpu_session
from autotune.tuning.studies import plan_studies


def tune_shape(
    database: str,
    problems: ConvProblem | Sequence[ConvProblem],
    families: Mapping[str, Family],
    budget: int,
    device_index: int = 0,
    cache_dir: Path | None = None,
    timing: TimingPolicy | None = None,
) -> int:
    """Tune `problems` (the problems that may serve one call: its sizes in each dtype and
    layout its tensors allow) with every family the runtime can call for each (the tuner's
    default strategy, seeded from the nearest stored shapes, `budget` evaluations each, timing
    protocol 2 in a GPU worker process) and store every evaluation in `database`. Returns how
    many were made; LookupMiss when no family can run any of them."""
    if isinstance(problems, ConvProblem):
        problems = [problems]
    problem = problems[0]
    pairs = [(f, p) for p in problems for f in families.values() if callable_family(f, p) is None]
    if not pairs:
        raise LookupMiss(f"no family the runtime can call computes {problem.key}")
    session = open_gpu_session(database, gpu=device_index, cache_dir=cache_dir)
    try:
        session.measure_ceilings()
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
