"""The timer's rest and its throttled runs, A/B: our best configuration and cuDNN on the same
layers, each measured the way the tables measure them (the evaluator's checked run against the
float64 reference, then protocol 2's samples), "as before" (no rest, a throttled measurement
kept) and "now" (the default: the rest before the samples, a throttled one timed again up to
twice), in the order ours, cuDNN, ours now, cuDNN now, --repeats times. The SM clock is
observed: its mean and lowest sample, the throttled flag, the tries and the rest's wait are
printed beside each time, then each layer's ratio cuDNN / ours for each way, the number of
layers with C > 3 at 1.0 or more, and the geometric means. --now-only measures only "now".

    python3 rest_ab.py STORE --dtype tf32 --shape N=28,K=3,C=512,F=512,B=32 [--shape ...]
        [--repeats 2] [--now-only] > rest_ab.md

STORE is an autotune database; ours is the fastest evaluation of the current tc_wgmma kernel
stored for the shape.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile

from autotune.families import get_family
from autotune.gpu.timing import TimingPolicy
from autotune.model.observe import (
    RESTED_S,
    SM_CLOCK_MHZ,
    SM_CLOCK_MIN_MHZ,
    THROTTLED,
    TRIES,
    Observe,
)
from autotune.model.problem import ConvProblem
from autotune.model.space import Config
from autotune.tuning.baselines import TASK_TIMEOUT_S, _baseline_task
from autotune.tuning.session import open_gpu_session
from autotune.tuning.studies import plan_studies


def best_config(store: str, key: str, digest: str) -> str:
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
        raise SystemExit(f"rest_ab.py: no evaluation of {key} with this kernel in {store}")
    return row[0]


def cell(m) -> str:
    if not m.status.ok:
        return f"{m.status.value} | | | | | "
    o = m.observed
    fmt = lambda k, f: "" if o.get(k) is None else format(o[k], f)  # noqa: E731
    return (
        f"{m.time_ms:.4f} | {fmt(SM_CLOCK_MHZ, '.0f')} | {fmt(SM_CLOCK_MIN_MHZ, '.0f')} | "
        f"{fmt(THROTTLED, '.0f')} | {fmt(TRIES, '.0f')} | {fmt(RESTED_S, '.2f')}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store")
    ap.add_argument("--dtype", required=True)
    ap.add_argument("--shape", action="append", required=True)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--now-only", action="store_true")
    args = ap.parse_args()

    family = get_family("tc_wgmma")
    observe = Observe(clocks=True)
    ways = {
        "as before": TimingPolicy(observe=observe, rest_s=0, throttled_retries=0),
        "now": TimingPolicy(observe=observe),
    }
    if args.now_only:
        del ways["as before"]
    session = open_gpu_session(tempfile.mktemp(suffix=".db"))
    runner = session.runner
    digest = runner.kernel_digest(family)
    print(
        "| layer | way | side | ms | SM MHz | lowest | throttled | tries | rested s |\n"
        "|---|---|---|--:|--:|--:|--:|--:|--:|"
    )
    ratios: dict[str, dict[str, list[float]]] = {}
    try:
        for shape in args.shape:
            fields = {k: int(v) for k, v in (kv.split("=") for kv in shape.split(","))}
            problem = ConvProblem(**fields, dtype=args.dtype, layout="NHWC")
            config = family.complete(Config.from_json(best_config(args.store, problem.key, digest)))
            (study,), _ = plan_studies([(family, problem)], runner.limits)
            prepared = runner.prepare(study, config)
            for _ in range(args.repeats):
                for way, timing in ways.items():
                    ours = runner.measure(
                        study, config, prepared, best_ms=None, timing=timing, seed=0
                    )
                    task = _baseline_task(runner.compiler, problem, timing)
                    cudnn = runner.evaluator.call(task, TASK_TIMEOUT_S).measurement
                    for side, m in (("ours", ours), ("cuDNN", cudnn)):
                        print(f"| {shape} | {way} | {side} | {cell(m)} |", flush=True)
                    if ours.status.ok and cudnn.status.ok:
                        ratios.setdefault(shape, {}).setdefault(way, []).append(
                            cudnn.time_ms / ours.time_ms
                        )
    finally:
        session.close()
    print("\n| layer | " + " | ".join(f"cuDNN / ours, {w}" for w in ways) + " |")
    print("|---|" + "--:|" * len(ways))
    logs: dict[str, list[tuple[int, float]]] = {w: [] for w in ways}
    for shape, by_way in ratios.items():
        channels = int(shape.split("C=")[1].split(",")[0])
        cells = []
        for w in ways:
            r = statistics.median(by_way.get(w, [float("nan")]))
            logs[w].append((channels, r))
            cells.append(f"{r:.3f}")
        print(f"| {shape} | " + " | ".join(cells) + " |")
    for label, keep in (("all", lambda c: True), ("C > 3", lambda c: c > 3)):
        means = []
        for w in ways:
            kept = [r for c, r in logs[w] if keep(c)]
            means.append(f"{statistics.geometric_mean(kept):.3f}" if kept else "")
        print(f"| geometric mean, {label} | " + " | ".join(means) + " |")
    wins = [sum(1 for c, r in logs[w] if c > 3 and r >= 1.0) for w in ways]
    total = sum(1 for c, _ in logs[next(iter(ways))] if c > 3)
    print(f"| C > 3 at 1.0 or more, of {total} | " + " | ".join(map(str, wins)) + " |")


if __name__ == "__main__":
    main()
