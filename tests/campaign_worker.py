"""One campaign worker as its own process, for the multi-worker tests: synthetic GPU, real
compiler and store (any SQLAlchemy URL or a SQLite path).

usage: python -m tests.campaign_worker STORAGE CACHE_DIR LOG [--wait-go] [--lease S] [--host H]
Every evaluation the synthetic GPU finishes is appended to LOG as "<pid>\\t<defines>" (flushed)
before the tuner records it, so a test can tell a repeated evaluation from a new one. With
--wait-go the worker writes LOG.ready.<pid> once its tuner is built, then waits for LOG.go, so
several start tuning at the same moment. --lease and --host stand in for a short lease and for a
worker on another machine (whose death only the lease's expiry reveals).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from autotune.compiler import Compiler
from autotune.families import get_family
from autotune.store import Store
from autotune.tuner import Tuner, plan_studies
from tests.conftest import SyntheticEvaluator
from tests.interruptible_campaign import CONCURRENT_PROBLEMS

EVAL_S = 0.04  # long enough for a kill to land mid-study, short enough for CI
CLAIM_POLL_S = 0.1  # a waiting worker looks again this often (the tool's default is 2 s)


def cost_ms(defines: dict) -> float:
    return 1.0 + defines["BLOCK_X"] / 64 + defines["BLOCK_Y"] / 8 + defines["FILTER_IN_CONST"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("storage")
    parser.add_argument("cache_dir")
    parser.add_argument("log")
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
    studies, skipped = plan_studies([(family, p) for p in CONCURRENT_PROBLEMS], evaluator.limits)
    store = Store(args.storage)
    tuner = Tuner(
        Compiler(arch="sm_90", cache_dir=Path(args.cache_dir)),
        evaluator,
        store,
        strategy="random",
        command=f"campaign_worker {pid}",
        jobs=2,
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
        tuner.run(studies, budget=None, skipped=skipped)
    finally:
        store.close()


if __name__ == "__main__":
    main()
