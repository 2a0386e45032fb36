"""How much the tables' way of choosing our best flatters it. Session 62's tables took the fastest
of each layer's 5 best configurations, each measured once (`autotune remeasure --top 5`): the
minimum of five noisy measurements of near-equal kernels is below what the chosen one runs at.
Here, per layer, in one call: the --top stored configurations measured once each as the tables
did (the fastest is "min of N"), that fastest one measured again, independently, and cuDNN
measured before and after (their median). All by the timer as it is now (the rest, a throttled
measurement timed again; the clocks observed).

    python3 selection.py STORE --dtype bf16 --shape N=7,K=1,C=2048,F=512,B=32 [--shape ...]
        [--top 5] > selection.md

STORE is an autotune database holding evaluations of the current tc_wgmma kernel.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile

from autotune.families import get_family
from autotune.gpu.timing import TimingPolicy
from autotune.model.observe import Observe
from autotune.model.problem import ConvProblem
from autotune.model.space import Config
from autotune.tuning.baselines import TASK_TIMEOUT_S, _baseline_task
from autotune.tuning.session import open_gpu_session
from autotune.tuning.studies import plan_studies


def top_configs(store: str, key: str, digest: str, top: int) -> list[str]:
    rows = sqlite3.connect(store).execute(
        "select config, min(time_ms) t from evaluations where family = 'tc_wgmma'"
        " and problem_key = ? and status = 'OK' and kernel_digest = ?"
        " group by config order by t limit ?",
        (key, digest, top),
    )
    return [config for config, _ in rows]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store")
    ap.add_argument("--dtype", required=True)
    ap.add_argument("--shape", action="append", required=True)
    ap.add_argument("--top", type=int, default=5)
    args = ap.parse_args()

    family = get_family("tc_wgmma")
    timing = TimingPolicy(observe=Observe(clocks=True))
    session = open_gpu_session(tempfile.mktemp(suffix=".db"))
    runner = session.runner
    digest = runner.kernel_digest(family)
    print(
        f"| layer | ours, min of {args.top} | ours, chosen again | cuDNN | cuDNN / min |"
        " cuDNN / again | again / min |\n|---|--:|--:|--:|--:|--:|--:|"
    )
    rows = []
    try:
        for shape in args.shape:
            fields = {k: int(v) for k, v in (kv.split("=") for kv in shape.split(","))}
            problem = ConvProblem(**fields, dtype=args.dtype, layout="NHWC")
            (study,), _ = plan_studies([(family, problem)], runner.limits)

            def measure(config: Config, study=study):
                prepared = runner.prepare(study, config)
                return runner.measure(study, config, prepared, best_ms=None, timing=timing, seed=0)

            def cudnn(problem=problem) -> float:
                task = _baseline_task(runner.compiler, problem, timing)
                return runner.evaluator.call(task, TASK_TIMEOUT_S).measurement.time_ms

            library = [cudnn()]
            configs = [
                family.complete(Config.from_json(c))
                for c in top_configs(args.store, problem.key, digest, args.top)
            ]
            measured = [(measure(c), c) for c in configs]
            ok = [(m.time_ms, c) for m, c in measured if m.status.ok]
            if not ok:
                print(f"| {shape} | no configuration measured | | | | | |")
                continue
            fastest, chosen = min(ok, key=lambda pair: pair[0])
            again = measure(chosen).time_ms
            library.append(cudnn())
            lib = statistics.median(library)
            rows.append((fields["C"], lib / fastest, lib / again, again / fastest))
            print(
                f"| {shape} | {fastest:.4f} | {again:.4f} | {lib:.4f} | {lib / fastest:.3f} | "
                f"{lib / again:.3f} | {again / fastest:.3f} |",
                flush=True,
            )
    finally:
        session.close()
    if rows:
        cols = list(zip(*rows, strict=True))
        big = [r for r in rows if r[0] > 3]
        print(
            f"| geometric mean over {len(rows)} | | | | "
            + " | ".join(f"{statistics.geometric_mean(c):.3f}" for c in cols[1:])
            + " |"
        )
        print(
            f"| C > 3 at 1.0 or more, of {len(big)} | | | | "
            f"{sum(r[1] >= 1.0 for r in big)} | {sum(r[2] >= 1.0 for r in big)} | |"
        )


if __name__ == "__main__":
    main()
