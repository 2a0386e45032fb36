"""Would the fair timer pick another best? Each layer's top configurations by figure (as the
store ranks them, `autotune best --top`), measured --repeats times each in rotation by the
timer as it is now (flushed once and twice in turn), beside the store's figure for each.
Prints every configuration's measurements and their median, then per layer the store's pick,
the fastest now, and how much faster that one is. Nothing is stored.

    python3 repick.py STORE --dtype bf16 --shape N=7,K=1,C=512,F=2048,B=32 [--shape ...] \
        [--top 5] [--repeats 2] > repick_bf16.md
"""

from __future__ import annotations

import argparse
import statistics
import tempfile

from autotune.families import get_family
from autotune.gpu.timing import TimingPolicy
from autotune.model.problem import ConvProblem
from autotune.model.space import Config
from autotune.store import Store
from autotune.tuning.session import open_gpu_session
from autotune.tuning.studies import plan_studies


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store")
    ap.add_argument("--dtype", required=True)
    ap.add_argument("--shape", action="append", required=True)
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()

    family = get_family("tc_wgmma")
    timing = TimingPolicy()
    session = open_gpu_session(tempfile.mktemp(suffix=".db"))
    runner = session.runner
    digest = runner.kernel_digest(family)
    tops = Store(args.store).best(family="tc_wgmma", top=args.top, kernels={"tc_wgmma": digest})
    print("| layer | place | store's figure, us | now, us | measurements now, us |")
    print("|---|--:|--:|--:|---|")
    summary = []
    try:
        for shape in args.shape:
            fields = {k: int(v) for k, v in (kv.split("=") for kv in shape.split(","))}
            problem = ConvProblem(**fields, dtype=args.dtype, layout="NHWC")
            rows = tops[tops.problem_key == problem.key].sort_values("time_ms")
            (study,), _ = plan_studies([(family, problem)], runner.limits)
            configs = [family.complete(Config.from_json(c)) for c in rows["config"]]
            prepared = [runner.prepare(study, c) for c in configs]
            times: list[list[float]] = [[] for _ in configs]
            for r in range(args.repeats):
                for i in range(len(configs))[:: 1 if r % 2 == 0 else -1]:
                    m = runner.measure(
                        study, configs[i], prepared[i], best_ms=None, timing=timing, seed=0
                    )
                    if m.status.ok:
                        times[i].append(m.time_ms * 1e3)
            now = [statistics.median(t) if t else float("inf") for t in times]
            for place, (figure, t) in enumerate(zip(rows["time_ms"], times, strict=True)):
                cells = " ".join(f"{x:.2f}" for x in t)
                print(f"| {shape} | {place + 1} | {figure * 1e3:.2f} | {now[place]:.2f} | ", end="")
                print(f"{cells} |")
            fastest = min(range(len(now)), key=now.__getitem__)
            summary.append((shape, now[0], fastest + 1, now[fastest]))
    finally:
        session.close()
    print("\n| layer | the store's pick now, us | fastest now (place) | us | pick / fastest |")
    print("|---|--:|--:|--:|--:|")
    for shape, pick, place, best in summary:
        print(f"| {shape} | {pick:.2f} | {place} | {best:.2f} | {pick / best:.3f} |")


if __name__ == "__main__":
    main()
