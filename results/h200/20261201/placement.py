"""Does a tc_wgmma configuration's time depend on where its buffers lie? Times one configuration
(protocol 2's way: L2 flushed before each launch, CUDA events around it) with its buffers
allocated after pads of several sizes, each in a fresh CuPy memory pool, and prints the median
time per pad. Session 58: OverFeat's C = 96 layer's best ran at 0.1071 ms in one call and at
0.1303-0.1322 ms in two others, where cuDNN ran at 0.095 ms in all three.

    python3 placement.py --shape N=20,K=5,C=96,F=256,B=128 --dtype bf16 --config JSON \
        [--pad-mib 0 --pad-mib 1.5 ...] [--repeats 50]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics

import cupy as cp
from sk_trace import plan_arrays, timed_run  # beside this script

from autotune.families import get_family
from autotune.gpu.compiler import Compiler
from autotune.gpu.launch import bind, load_module, opt_in_shared_memory, prepare
from autotune.gpu.session import GpuSession
from autotune.model.problem import ConvProblem
from autotune.model.space import Config


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", required=True)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--config", required=True, help="JSON of the tunables")
    ap.add_argument("--pad-mib", type=float, action="append", default=[])
    ap.add_argument("--repeats", type=int, default=50)
    args = ap.parse_args()

    family = get_family("tc_wgmma")
    fields = {k: int(v) for k, v in (kv.split("=") for kv in args.shape.split(","))}
    problem = ConvProblem(**fields, dtype=args.dtype, layout="NHWC")
    session = GpuSession(0)
    sm_count = session.info().sm_count
    plan = family.plan(problem, family.complete(Config.from_json(args.config)))
    compiled = Compiler(arch="sm_90").compile(plan)
    _, functions = load_module(compiled.cubin, plan.entries, "/tmp", keep=False)
    opt_in_shared_memory(functions, plan.all_launches)
    launches = tuple(dataclasses.replace(lc, grid=lc.grid_on(sm_count)) for lc in plan.launches)
    flush = session._l2_flush()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    buffers = family.buffers(problem)
    print(f"{problem.key}: {args.config}")
    print(
        "| pad (MiB) | x address mod 2 MiB | median ms | min ms | max ms |\n|--:|--:|--:|--:|--:|"
    )
    for pad_mib in args.pad_mib or [0.0]:
        cp.get_default_memory_pool().free_all_blocks()
        pad = cp.empty(int(pad_mib * 2**20) + 1, dtype=cp.uint8)
        arrays = plan_arrays(session, buffers, plan)
        calls = bind(prepare(launches, functions), arrays)
        times = [timed_run(calls, flush, start, stop) for _ in range(args.repeats)]
        x = arrays["x"].data.ptr
        print(
            f"| {pad_mib:g} | {x % 2**21:#x} | {statistics.median(times):.4f} | "
            f"{min(times):.4f} | {max(times):.4f} |"
        )
        del arrays, calls, pad


if __name__ == "__main__":
    main()
