"""Which configurations the default search asks, through the tuner's own path, without a GPU:
`Tuner.run` on a copy of a store, its runner a stand-in that answers each configuration with the
store's time of it (the device's) or, where the store has none, a made-up one (1.05x the layer's
stored best for 64-byte steps, 1.1x for the rest). Prints how many of the asked configurations
have 64-byte steps; with --longest, a parameter that no told result varies takes the surrogate's
longest kernel length instead of the first of a tie (the shortest).

    python3 results/h200/20261203c/search_ties.py STORE [--shape N=28,K=1,C=512,F=256,B=32]
        [--dtype bf16] [--budget 40] [--longest]
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import tempfile
from pathlib import Path

import numpy as np

import autotune.strategies.surrogate as surrogate
from autotune.families import get_family
from autotune.model.problem import ConvProblem
from autotune.model.records import DeviceInfo, Measurement, Status
from autotune.model.runner import Prepared
from autotune.model.space import ARCH_LIMITS
from autotune.store import Store
from autotune.tuning.studies import plan_studies
from autotune.tuning.tuner import Tuner

DIGEST = "ac73b424d908cd59"  # the kernel text this session measured


class StandIn:
    """A Runner answering from the store's times (the device's name, so that the study's own
    history and its neighbours warm the search as on the device)."""

    in_order, cache_error, remeasures, protocol, pins = False, None, False, 2, {}
    device = DeviceInfo("NVIDIA H200", "9.0", 132, "13.0", "13.0")
    limits, compiler_version = ARCH_LIMITS["sm_90"], "13.0"

    def __init__(self, store: str, best_ms: float) -> None:
        self.db = sqlite3.connect(store, check_same_thread=False)
        self.best_ms, self.asked = best_ms, []

    def start(self, jobs) -> None: ...
    def stop(self) -> None: ...
    def close(self) -> None: ...

    def kernel_digest(self, family) -> str:
        return family.kernel_digest()

    def prepare(self, study, config) -> Prepared:
        self.asked.append(config)
        row = self.db.execute(
            "select min(time_ms) from evaluations where kernel_digest=? and problem_key=? "
            "and config=? and status='OK'",
            (DIGEST, study.problem.key, config.to_json()),
        ).fetchone()
        t = row[0] or self.best_ms * (1.05 if int(config["STEP_BYTES"]) == 64 else 1.1)
        return Prepared(Measurement(Status.OK, time_ms=t, samples_ms=(t,), protocol=2))

    def measure(self, study, config, prepared, **_policy) -> Measurement:
        return prepared.early


def longest_for_constant() -> None:
    fit = surrogate.SurrogateSearch._fit

    def patched(self, x, y) -> None:
        fit(self, x, y)
        if len(y) >= surrogate.ARD_MIN:
            for g, cols in enumerate(self._groups):
                if np.ptp(x[:, cols], axis=0).max() == 0:
                    self._lengths[g] = surrogate.ARD_LENGTHS[-1]

    surrogate.SurrogateSearch._fit = patched


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", type=Path, help="the store the device's search started from")
    ap.add_argument("--answers", type=Path, help="the store to answer from (default: STORE)")
    ap.add_argument("--shape", default="N=28,K=1,C=512,F=256,B=32")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--budget", type=int, default=40)
    ap.add_argument("--longest", action="store_true")
    args = ap.parse_args()
    if args.longest:
        longest_for_constant()
    family = get_family("tc_wgmma")
    fields = {k: int(v) for k, v in (kv.split("=") for kv in args.shape.split(","))}
    problem = ConvProblem(**fields, dtype=args.dtype, layout="NHWC")
    studies, _ = plan_studies([(family, problem)], ARCH_LIMITS["sm_90"])
    answers = str(args.answers or args.store)
    (best,) = (
        sqlite3.connect(answers)
        .execute(
            "select min(time_ms) from evaluations where kernel_digest=? and problem_key=? and "
            "status='OK'",
            (DIGEST, problem.key),
        )
        .fetchone()
    )
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "store.db"
        shutil.copy(args.store, copy)
        runner = StandIn(answers, best)
        Tuner(runner, Store(str(copy)), seed=0, jobs=16, confirm_best=False).run(
            studies, args.budget
        )
    narrow = sum(int(c["STEP_BYTES"]) == 64 for c in runner.asked)
    print(f"{problem.key}: {len(runner.asked)} asked, {narrow} with 64-byte steps")


if __name__ == "__main__":
    main()
