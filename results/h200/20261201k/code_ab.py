"""Kernel texts A/B on one machine: each layer's best configuration of the current tc_wgmma
kernel (the fastest stored evaluation of it), compiled from the checkout's kernels/tc_wgmma.cu
("new") and from each other text given (--text NAME=DIR, DIR holding a tc_wgmma.cu: an older
copy, `git archive 002515c kernels`, or a variant), each checked against the float64 reference
and timed under protocol 2, --repeats rounds, each round's order rotated by one (new, a, b;
a, b, new; ...) so that no text always runs first; then each layer's median time per text,
each text's median over new's (above 1: new is faster), and their geometric means.

    python3 code_ab.py STORE --text old=.head/kernels [--text ...] --dtype bf16 \
        --shape N=7,K=1,C=2048,F=512,B=32 [--shape ...] [--repeats 4] > code_ab.md
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import statistics
import sys
import tempfile
from pathlib import Path

from autotune.families import get_family
from autotune.gpu.timing import TimingPolicy
from autotune.model.problem import ConvProblem
from autotune.model.space import Config
from autotune.tuning.session import open_gpu_session
from autotune.tuning.studies import plan_studies

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "20261201g"))
from rest_ab import best_config  # noqa: E402  (session 64's: the store's fastest of a digest)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store")
    ap.add_argument("--text", action="append", required=True, help="NAME=DIR")
    ap.add_argument("--dtype", required=True)
    ap.add_argument("--shape", action="append", required=True)
    ap.add_argument("--repeats", type=int, default=4)
    args = ap.parse_args()

    family = get_family("tc_wgmma")
    families = {"new": family}
    for text in args.text:
        name, directory = text.split("=", 1)
        families[name] = copy.copy(family)
        families[name].directory = Path(directory)  # its source_path: DIR/tc_wgmma.cu
    others = [name for name in families if name != "new"]
    session = open_gpu_session(tempfile.mktemp(suffix=".db"))
    runner = session.runner
    digest = runner.kernel_digest(family)
    print(
        "| layer | config | new ms | "
        + " | ".join(f"{n} ms | {n} / new" for n in others)
        + " |\n|---|---|--:|"
        + "--:|--:|" * len(others)
    )
    ratios: dict[str, list[float]] = {n: [] for n in others}
    try:
        for shape in args.shape:
            fields = {k: int(v) for k, v in (kv.split("=") for kv in shape.split(","))}
            problem = ConvProblem(**fields, dtype=args.dtype, layout="NHWC")
            config = family.complete(Config.from_json(best_config(args.store, problem.key, digest)))
            (study,), _ = plan_studies([(family, problem)], runner.limits)
            sides = {n: dataclasses.replace(study, family=f) for n, f in families.items()}
            prepared = {n: runner.prepare(s, config) for n, s in sides.items()}
            times: dict[str, list[float]] = {n: [] for n in sides}
            order = list(sides)
            for r in range(args.repeats):
                for n in order[r % len(order) :] + order[: r % len(order)]:
                    m = runner.measure(
                        sides[n], config, prepared[n], best_ms=None, timing=TimingPolicy(), seed=0
                    )
                    if m.status.ok:
                        times[n].append(m.time_ms)
            if not all(times.values()):
                print(f"| {shape} | failed: {sorted(n for n in times if not times[n])} |")
                continue
            new = statistics.median(times["new"])
            cells = [f"{new:.4f}"]
            for n in others:
                t = statistics.median(times[n])
                ratios[n].append(t / new)
                cells += [f"{t:.4f}", f"{t / new:.3f}"]
            print(f"| {shape} | {config.to_json()} | " + " | ".join(cells) + " |", flush=True)
    finally:
        session.close()
    for n, kept in ratios.items():
        if kept:
            mean = statistics.geometric_mean(kept)
            print(f"\ngeometric mean {n} / new over {len(kept)} layers: {mean:.3f}")


if __name__ == "__main__":
    main()
