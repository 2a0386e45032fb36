"""Scoring a search on a recorded space: its configurations and times, the best that random
sampling is expected to reach, and the P score against it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from autotune.model.problem import Problem
from autotune.model.records import Status
from autotune.model.space import BoundSpace, Config
from autotune.replay.recording import RecordedStudy, timed

COLUMNS = ["space", "strategy", "budget", "fraction_of_optimum", "p_score", "seeds"]


@dataclass
class Case:
    """One exhaustively recorded space: its valid configs and their recorded times."""

    name: str
    family: str
    device: str
    problem: Problem
    space: BoundSpace
    times: dict[Config, float | None]  # what the strategy is told: None for a failure
    ok: dict[Config, float | None]  # checked and fully timed (a SLOW config is never best)
    optimum_ms: float
    study: RecordedStudy | None = None  # what Kernel Tuner's simulation is given

    @classmethod
    def of(cls, study: RecordedStudy) -> Case | None:
        """None unless the recording covers every valid config and one of them ran."""
        space = study.space()
        if not len(space) or not study.exhaustive(space):
            return None
        times, ok = {}, {}
        for c in space.configs:
            o = study.outcomes[c]
            times[c] = o.time_ms if timed(o.status) else None
            ok[c] = o.time_ms if o.status is Status.OK else None
        best = [t for t in ok.values() if t is not None]
        if not best:
            return None
        s = study
        # Spaces recorded elsewhere are one kernel at one size on several GPUs: named by GPU.
        name = f"{s.name} on {s.device}" if s.problem.kind == "recorded" else s.name
        return cls(name, s.family, s.device, s.problem, space, times, ok, min(best), s)

    def fractions(self) -> np.ndarray:
        """Every config's fraction of the optimum (0 unless OK), best first."""
        f = [self.optimum_ms / t if t else 0.0 for t in self.ok.values()]
        return np.sort(np.array(f))[::-1]


def expected_random(fractions: np.ndarray, budget: int) -> float:
    """Expected best fraction of `budget` distinct configs drawn uniformly without replacement:
    the i-th best (1-based) is the best drawn with probability C(n-i, b-1) / C(n, b)."""
    n = len(fractions)
    b = min(budget, n)
    i = np.arange(1, n - b + 2)
    logp = (
        _lgamma(n - i + 1)
        - _lgamma(b)
        - _lgamma(n - i - b + 2)
        - (_lgamma(n + 1) - _lgamma(b + 1) - _lgamma(n - b + 1))
    )
    return float(np.sum(fractions[: len(i)] * np.exp(logp)))


def _lgamma(x) -> np.ndarray:
    return np.vectorize(math.lgamma)(np.asarray(x, dtype=float))


def p_score(fraction: float, random_fraction: float) -> float:
    """Willemsen et al.'s P = (f - f_random) / (f_optimum - f_random) with f_optimum = 1; NaN
    where random search is certain to find the optimum (budget at least the space)."""
    gap = 1.0 - random_fraction
    return (fraction - random_fraction) / gap if gap > 1e-12 else math.nan


# ---------------------------------------------------------------------------------------------
# Running strategies against recordings (no tuner, no database: ask, look up, tell)


def at_budget(trajectory: list[float], budget: int) -> float:
    if not trajectory:
        return 0.0
    return trajectory[min(budget, len(trajectory)) - 1]
