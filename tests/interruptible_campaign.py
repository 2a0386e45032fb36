"""A campaign run as its own process, for the kill -9 tests: synthetic GPU, real compiler and store.

usage: python -m tests.interruptible_campaign DB CACHE_DIR LOG
Each evaluation the synthetic GPU finishes is appended to LOG (flushed), so the test can tell a
repeated evaluation from a new one.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from autotune.compiler import Compiler
from autotune.families import get_family
from autotune.problem import ConvProblem
from autotune.store import Store
from autotune.tuner import Tuner, plan_studies
from tests.conftest import SyntheticEvaluator

PROBLEMS = [ConvProblem(N=29, K=3, C=2, F=3), ConvProblem(N=40, K=5, C=1, F=2, B=2)]
EVAL_S = 0.05  # long enough for a kill to land mid-evaluation, short enough for CI


def main(db: str, cache_dir: str, log: str) -> None:
    def cost(defines: dict) -> float:
        time.sleep(EVAL_S)
        with open(log, "a") as fh:
            fh.write(f"{sorted(defines.items())}\n")
            fh.flush()
        return 1.0 + defines["BLOCK_X"] / 64 + defines["BLOCK_Y"] / 8 + defines["FILTER_IN_CONST"]

    evaluator = SyntheticEvaluator(cost)
    family = get_family("direct_naive")
    studies, skipped = plan_studies([(family, p) for p in PROBLEMS], evaluator.limits)
    store = Store(db)
    tuner = Tuner(
        Compiler(arch="sm_90", cache_dir=Path(cache_dir)),
        evaluator,
        store,
        strategy="random",
        jobs=2,
    )
    tuner.run(studies, budget=None, skipped=skipped)


if __name__ == "__main__":
    main(*sys.argv[1:4])
