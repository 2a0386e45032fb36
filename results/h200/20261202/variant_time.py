"""How much of a layer's time its loads take: each layer's best configuration (the fastest
stored evaluation of the current tc_wgmma kernel) compiled from the checkout's
kernels/tc_wgmma.cu ("new") and from each other text given (--text NAME=DIR, DIR holding a
tc_wgmma.cu, e.g. the kernel with its wgmma instructions commented out), then timed without a
check (a text that skips work computes wrong outputs) as protocol 2 does (a 256 MiB memset
before each sample, CUDA events around the launches: "cold"), and back to back with no flush
("warm": the operands in L2 from the run before, the samples queued before the host waits),
--repeats rounds of --samples samples, each round's order of texts rotated by one. Prints
each layer's median ms per text and way.

    python3 variant_time.py STORE --text no_mma=/tmp/no_mma --dtype bf16 \
        --shape N=7,K=1,C=2048,F=512,B=32 [--shape ...] [--repeats 3] [--samples 30]
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import statistics
import sys
from pathlib import Path

import cupy as cp

from autotune.families import get_family
from autotune.gpu.compiler import Compiler
from autotune.gpu.launch import bind, load_module, opt_in_shared_memory, prepare
from autotune.gpu.session import GpuSession
from autotune.model.problem import ConvProblem
from autotune.model.space import Config

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "20261201g"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "20261201"))
from rest_ab import best_config  # noqa: E402  (session 64's: the store's fastest of a digest)
from sk_trace import plan_arrays, timed_run  # noqa: E402  (session 58's: arrays; one sample)


def warm_runs(calls, count: int) -> list[float]:
    """`count` runs back to back, no flush, queued before the host waits: each starts once the
    last has ended (the host keeps ahead), its operands in L2 from the one before."""
    events = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(count)]
    for start, stop in events:
        start.record()
        for fn, grid, block, args, smem in calls:
            fn(grid, block, args, shared_mem=smem)
        stop.record()
    events[-1][1].synchronize()
    return [cp.cuda.get_elapsed_time(start, stop) for start, stop in events[1:]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store")
    ap.add_argument("--text", action="append", default=[], help="NAME=DIR")
    ap.add_argument("--dtype", required=True)
    ap.add_argument("--shape", action="append", required=True)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--samples", type=int, default=30)
    args = ap.parse_args()

    family = get_family("tc_wgmma")
    families = {"new": family}
    for text in args.text:
        name, directory = text.split("=", 1)
        families[name] = copy.copy(family)
        families[name].directory = Path(directory)  # its source_path: DIR/tc_wgmma.cu
    compiler = Compiler(arch="sm_90")
    digest = compiler.kernel_digest(family)
    session = GpuSession(0)
    sm_count = session.info().sm_count
    cold = session._l2_flush()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    ways = ("cold", "warm")
    columns = [f"{n} {w}" for n in families for w in ways]
    print("| layer | " + " | ".join(f"{c} ms" for c in columns) + " |")
    print("|---|" + "--:|" * len(columns))
    for shape in args.shape:
        fields = {k: int(v) for k, v in (kv.split("=") for kv in shape.split(","))}
        problem = ConvProblem(**fields, dtype=args.dtype, layout="NHWC")
        config = family.complete(Config.from_json(best_config(args.store, problem.key, digest)))
        buffers = family.buffers(problem)
        runs = {}
        for name, fam in families.items():
            plan = fam.plan(problem, config)
            compiled = compiler.compile(plan)
            _, functions = load_module(compiled.cubin, plan.entries, "/tmp", keep=False)
            opt_in_shared_memory(functions, plan.all_launches)
            launches = tuple(
                dataclasses.replace(lc, grid=lc.grid_on(sm_count)) for lc in plan.launches
            )
            arrays = plan_arrays(session, buffers, plan)
            runs[name] = (bind(prepare(launches, functions), arrays), arrays)
        times: dict[str, list[float]] = {c: [] for c in columns}
        order = list(families)
        for r in range(args.repeats):
            for name in order[r % len(order) :] + order[: r % len(order)]:
                calls = runs[name][0]
                for _ in range(3):  # warm-up
                    timed_run(calls, cold, start, stop)
                cold_ms = [timed_run(calls, cold, start, stop) for _ in range(args.samples)]
                times[f"{name} cold"].append(statistics.median(cold_ms))
                times[f"{name} warm"].append(statistics.median(warm_runs(calls, args.samples)))
        cells = [f"{statistics.median(times[c]):.4f}" for c in columns]
        print(f"| {shape} | " + " | ".join(cells) + " |", flush=True)
        del runs


if __name__ == "__main__":
    main()
