"""A campaign run as its own process, for the kill -9 and concurrency tests: synthetic GPU, real
compiler and store.

usage: python -m tests.interruptible_campaign DB CACHE_DIR LOG [concurrent]
Each evaluation the synthetic GPU finishes is appended to LOG (flushed), so the test can tell a
repeated evaluation from a new one. With `concurrent`, the campaign has more (smaller) studies,
each LOG line is prefixed with the process id and a tab, and the process writes LOG.ready.<pid>
then waits for LOG.go before tuning, so that a test can start two at the same moment.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from autotune.compiler import Compiler
from autotune.families import get_family
from autotune.interrupt import exit_code, terminate_as_interrupt
from autotune.problem import ConvProblem
from autotune.store import Store
from autotune.tuner import Tuner, plan_studies
from tests.conftest import SyntheticEvaluator

PROBLEMS = [ConvProblem(N=29, K=3, C=2, F=3), ConvProblem(N=40, K=5, C=1, F=2, B=2)]
EVAL_S = 0.05  # long enough for a kill to land mid-evaluation, short enough for CI
# Six studies of 14 configurations each (BLOCK_X <= 2N leaves 8 and 16 at these sides).
CONCURRENT_PROBLEMS = [
    ConvProblem(N=n, K=k, C=c, F=2) for n, k, c in ((9, 3, 1), (10, 3, 2), (11, 5, 1))
] + [ConvProblem(N=n, K=3, C=1, F=1, B=2) for n in (9, 12, 15)]
CLAIM_POLL_S = 0.1  # a waiting run looks again this often (the tool's default is 2 s)


def main(db: str, cache_dir: str, log: str, mode: str = "resume") -> None:
    concurrent = mode == "concurrent"
    prefix = f"{os.getpid()}\t" if concurrent else ""

    def cost(defines: dict) -> float:
        time.sleep(EVAL_S)
        with open(log, "a") as fh:
            fh.write(f"{prefix}{sorted(defines.items())}\n")
            fh.flush()
        return 1.0 + defines["BLOCK_X"] / 64 + defines["BLOCK_Y"] / 8 + defines["FILTER_IN_CONST"]

    evaluator = SyntheticEvaluator(cost)
    family = get_family("direct_naive")
    problems = CONCURRENT_PROBLEMS if concurrent else PROBLEMS
    studies, skipped = plan_studies([(family, p) for p in problems], evaluator.limits)
    store = Store(db)
    tuner = Tuner(
        Compiler(arch="sm_90", cache_dir=Path(cache_dir)),
        evaluator,
        store,
        strategy="random",
        jobs=2,
    )
    tuner.claims.poll_s = CLAIM_POLL_S
    if concurrent:
        Path(f"{log}.ready.{os.getpid()}").touch()
        while not Path(f"{log}.go").exists():
            time.sleep(0.01)
    if mode == "sigterm":  # as `autotune run` does: SIGTERM ends the run like Ctrl-C
        with terminate_as_interrupt() as signals:
            outcome = tuner.run(studies, budget=None, skipped=skipped)
        if outcome.interrupted:
            sys.exit(exit_code(signals))
        return
    tuner.run(studies, budget=None, skipped=skipped)


if __name__ == "__main__":
    main(*sys.argv[1:5])
