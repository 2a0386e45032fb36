"""Ours and cuDNN on the same layers, each measured --repeats times the way the tables measure
them (the evaluator's checked run against the float64 reference, then protocol 2's samples,
the clock observed, the rest before the samples), the order of the two sides alternating from
round to round so that neither always runs first (session 64's rest_ab.py always measured ours
first). Prints every measurement, then each layer's median time a side, their ratio cuDNN /
ours, the number of layers with C > 3 at 1.0 or more and the geometric means.

    python3 both_sides.py STORE --dtype fp16 --shape N=28,K=1,C=512,F=256,B=32 [--shape ...] \
        [--repeats 3] > both_sides_fp16.md

STORE is an autotune database; ours is the fastest evaluation of the current tc_wgmma kernel
stored for the shape.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from autotune.families import get_family
from autotune.gpu.timing import TimingPolicy
from autotune.model.observe import Observe
from autotune.model.problem import ConvProblem
from autotune.model.space import Config
from autotune.tuning.baselines import TASK_TIMEOUT_S, _baseline_task
from autotune.tuning.session import open_gpu_session
from autotune.tuning.studies import plan_studies

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "20261201g"))
from rest_ab import best_config, cell  # noqa: E402  (session 64's: the store's best; a row's cells)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store")
    ap.add_argument("--dtype", required=True)
    ap.add_argument("--shape", action="append", required=True)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    family = get_family("tc_wgmma")
    timing = TimingPolicy(observe=Observe(clocks=True))
    session = open_gpu_session(tempfile.mktemp(suffix=".db"))
    runner = session.runner
    digest = runner.kernel_digest(family)
    print(
        "| layer | round | side | ms | SM MHz | lowest | throttled | tries | rested s |\n"
        "|---|--:|---|--:|--:|--:|--:|--:|--:|"
    )
    medians: dict[str, dict[str, float]] = {}
    try:
        for shape in args.shape:
            fields = {k: int(v) for k, v in (kv.split("=") for kv in shape.split(","))}
            problem = ConvProblem(**fields, dtype=args.dtype, layout="NHWC")
            config = family.complete(Config.from_json(best_config(args.store, problem.key, digest)))
            (study,), _ = plan_studies([(family, problem)], runner.limits)
            prepared = runner.prepare(study, config)
            task = _baseline_task(runner.compiler, problem, timing)
            times: dict[str, list[float]] = {"ours": [], "cuDNN": []}
            for r in range(args.repeats):
                for side in list(times)[:: 1 if r % 2 == 0 else -1]:
                    if side == "ours":
                        m = runner.measure(
                            study, config, prepared, best_ms=None, timing=timing, seed=0
                        )
                    else:
                        m = runner.evaluator.call(task, TASK_TIMEOUT_S).measurement
                    print(f"| {shape} | {r + 1} | {side} | {cell(m)} |", flush=True)
                    if m.status.ok:
                        times[side].append(m.time_ms)
            if all(times.values()):
                medians[shape] = {side: statistics.median(t) for side, t in times.items()}
    finally:
        session.close()
    print("\n| layer | ours ms | cuDNN ms | cuDNN / ours |\n|---|--:|--:|--:|")
    ratios: list[tuple[int, float]] = []
    for shape, m in medians.items():
        ratio = m["cuDNN"] / m["ours"]
        ratios.append((int(shape.split("C=")[1].split(",")[0]), ratio))
        print(f"| {shape} | {m['ours']:.4f} | {m['cuDNN']:.4f} | {ratio:.3f} |")
    for label, keep in (("all", lambda c: True), ("C > 3", lambda c: c > 3)):
        kept = [r for c, r in ratios if keep(c)]
        if kept:
            print(f"| geometric mean, {label} | | | {statistics.geometric_mean(kept):.3f} |")
    wins = sum(1 for c, r in ratios if c > 3 and r >= 1.0)
    print(f"| C > 3 at 1.0 or more, of {sum(1 for c, _ in ratios if c > 3)} | | | {wins} |")


if __name__ == "__main__":
    main()
