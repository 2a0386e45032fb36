"""One campaign as its own process, for the kill, interrupt and concurrency tests: synthetic GPU,
real compiler and store (any SQLAlchemy URL or a SQLite path).

usage: python -m tests.campaign_worker STORAGE CACHE_DIR LOG [--two-studies] [--wait-go]
                                       [--lease S] [--host H]
Every evaluation the synthetic GPU finishes is appended to LOG as "<pid>\\t<defines>" (flushed)
before the tuner records it, so a test can tell a repeated evaluation from a new one and which
process made it. The campaign is six small studies, or with --two-studies two larger ones (a
run long enough to be killed at many moments). With --wait-go the process writes LOG.ready.<pid>
once its tuner is built, then waits for LOG.go, so several start tuning at the same moment.
--lease and --host stand in for a short lease and for a worker on another machine (whose death
only the lease's expiry reveals). SIGTERM ends the run as in `autotune run`: like Ctrl-C, exit 143.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from autotune.families import get_family
from autotune.gpu.compiler import Compiler
from autotune.gpu.interrupt import exit_code, terminate_as_interrupt
from autotune.model.problem import ConvProblem
from autotune.store import Store
from autotune.tuning.runners import GpuRunner
from autotune.tuning.studies import plan_studies
from autotune.tuning.tuner import Tuner
from tests.conftest import SyntheticEvaluator

EVAL_S = 0.05  # long enough for a kill to land mid-evaluation, short enough for CI
CLAIM_POLL_S = 0.1  # a waiting run looks again this often (the tool's default is 2 s)
TWO_PROBLEMS = [ConvProblem(N=29, K=3, C=2, F=3), ConvProblem(N=40, K=5, C=1, F=2, B=2)]
# Six studies of 14 configurations each (BLOCK_X <= 2N leaves 8 and 16 at these sides).
SIX_PROBLEMS = [
    ConvProblem(N=n, K=k, C=c, F=2) for n, k, c in ((9, 3, 1), (10, 3, 2), (11, 5, 1))
] + [ConvProblem(N=n, K=3, C=1, F=1, B=2) for n in (9, 12, 15)]


def cost_ms(defines: dict) -> float:
    return 1.0 + defines["BLOCK_X"] / 64 + defines["BLOCK_Y"] / 8 + defines["FILTER_IN_CONST"]


def evaluated(log: Path) -> list[tuple[int, str]]:
    """(pid, defines) of every evaluation a LOG holds, in order."""
    lines = log.read_text().splitlines() if log.exists() else []
    return [(int(pid), defines) for pid, defines in (line.split("\t") for line in lines)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("storage")
    parser.add_argument("cache_dir")
    parser.add_argument("log")
    parser.add_argument("--two-studies", action="store_true")
    parser.add_argument("--wait-go", action="store_true")
    parser.add_argument("--lease", type=float, default=None)
    parser.add_argument("--host", default=None)
    args = parser.parse_args(argv)
    pid = os.getpid()

    def cost(defines: dict) -> float:
        time.sleep(EVAL_S)
        with open(args.log, "a") as fh:
            fh.write(f"{pid}\t{sorted(defines.items())}\n")
            fh.flush()
        return cost_ms(defines)

    evaluator = SyntheticEvaluator(cost)
    family = get_family("direct_naive")
    problems = TWO_PROBLEMS if args.two_studies else SIX_PROBLEMS
    studies, skipped = plan_studies([(family, p) for p in problems], evaluator.limits)
    store = Store(args.storage)
    tuner = Tuner(
        GpuRunner(Compiler(arch="sm_90", cache_dir=Path(args.cache_dir)), evaluator),
        store,
        strategy="random",
        command=f"campaign_worker {pid}",
        jobs=2,
        # Its log is of evaluations: a test tells a repeated evaluation from a new one by it.
        # The confirmation of a best measures again on purpose (tests/unit/test_confirm.py;
        # the transports' test counts it in the workers that `run --gpus` and Ray start).
        confirm_best=False,
    )
    tuner.claims.poll_s = CLAIM_POLL_S
    if args.lease is not None:
        tuner.claims.lease_s = args.lease
    if args.host is not None:
        tuner.claims.host = args.host
    if args.wait_go:
        Path(f"{args.log}.ready.{pid}").touch()
        while not Path(f"{args.log}.go").exists():
            time.sleep(0.01)
    try:
        with terminate_as_interrupt() as signals:
            outcome = tuner.run(studies, budget=None, skipped=skipped)
    finally:
        store.close()
    if outcome.interrupted:
        sys.exit(exit_code(signals))


if __name__ == "__main__":
    main()
