"""The space-to-depth rewrite against the element gather it replaces, on the same layers in one
process: the rewrite's best configuration stored for the layer (the current kernel's fastest
evaluation), the gather's given one planned with the rewrite turned off (the plan as it was
before it), and cuDNN, each measured the way a run measures them (the checked run against the
float64 reference, then protocol 2's samples), in turn, --repeats times; each side's median.

    python3 ab.py STORE --dtype bf16 --shape N=112,K=7,C=3,F=64,B=32,stride=2 \\
        --gather '{"BM":128,...}' [--shape ... --gather ...] [--repeats 3] > ab_bf16.md
"""

from __future__ import annotations

import argparse
import contextlib
import sqlite3
import statistics
import tempfile

import autotune.families.tc_wgmma as tc_wgmma
from autotune.families import get_family
from autotune.gpu.timing import TimingPolicy
from autotune.model.problem import ConvProblem
from autotune.model.space import Config
from autotune.tuning.baselines import TASK_TIMEOUT_S, _baseline_task
from autotune.tuning.session import open_gpu_session
from autotune.tuning.studies import plan_studies


@contextlib.contextmanager
def gather_only():
    """The plan and space as before the rewrite: no layer is rewritten."""
    saved = tc_wgmma.space_to_depth
    tc_wgmma.space_to_depth = lambda problem: None
    try:
        yield
    finally:
        tc_wgmma.space_to_depth = saved


def stored_best(store: str, key: str, digest: str) -> str:
    row = (
        sqlite3.connect(store)
        .execute(
            "select config from evaluations where family = 'tc_wgmma' and problem_key = ?"
            " and status = 'OK' and kernel_digest = ? order by time_ms limit 1",
            (key, digest),
        )
        .fetchone()
    )
    if row is None:
        raise SystemExit(f"ab.py: no evaluation of {key} with this kernel in {store}")
    return row[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store")
    ap.add_argument("--dtype", required=True)
    ap.add_argument("--shape", action="append", required=True)
    ap.add_argument("--gather", action="append", required=True)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    family = get_family("tc_wgmma")
    timing = TimingPolicy()
    session = open_gpu_session(tempfile.mktemp(suffix=".db"))
    runner = session.runner
    digest = runner.kernel_digest(family)
    print(
        "| layer | gather ms | rewrite ms | cuDNN ms | rewrite / gather speedup | "
        "cuDNN / gather | cuDNN / rewrite |\n|---|--:|--:|--:|--:|--:|--:|"
    )
    try:
        for shape, gather_json in zip(args.shape, args.gather, strict=True):
            fields = {k: int(v) for k, v in (kv.split("=") for kv in shape.split(","))}
            problem = ConvProblem(**fields, dtype=args.dtype, layout="NHWC")
            rewrite = family.complete(
                Config.from_json(stored_best(args.store, problem.key, digest))
            )
            gather = family.complete(Config.from_json(gather_json))
            (study,), _ = plan_studies([(family, problem)], runner.limits)
            ready = runner.prepare(study, rewrite)
            with gather_only():
                (plain,), _ = plan_studies([(family, problem)], runner.limits)
                assert plain.space.is_valid(gather), gather_json
                plain_ready = runner.prepare(plain, gather)
            times: dict[str, list[float]] = {"gather": [], "rewrite": [], "cuDNN": []}
            for _ in range(args.repeats):
                with gather_only():
                    m = runner.measure(
                        plain, gather, plain_ready, best_ms=None, timing=timing, seed=0
                    )
                ok = [("gather", m)]
                ok.append(
                    (
                        "rewrite",
                        runner.measure(study, rewrite, ready, best_ms=None, timing=timing, seed=0),
                    )
                )
                task = _baseline_task(runner.compiler, problem, timing)
                ok.append(("cuDNN", runner.evaluator.call(task, TASK_TIMEOUT_S).measurement))
                for side, measured in ok:
                    if not measured.status.ok:
                        raise SystemExit(
                            f"ab.py: {shape} {side}: {measured.status.value} {measured.error}"
                        )
                    times[side].append(measured.time_ms)
            g, r, c = (statistics.median(times[k]) for k in ("gather", "rewrite", "cuDNN"))
            ratios = f"{g / r:.3f} | {c / g:.3f} | {c / r:.3f}"
            print(f"| {shape} | {g:.4f} | {r:.4f} | {c:.4f} | {ratios} |", flush=True)
            print(f"<!-- {shape} rewrite {rewrite.to_json()} -->")
    finally:
        session.close()


if __name__ == "__main__":
    main()
