"""Clusters of four (MULTICAST = 3): do a persistent grid's clusters all run at once, and what
does the grid's size do to a configuration's time?

First a probe: a kernel in clusters of 2, 4 and 8 whose blocks each note their start
(%globaltimer) and multiprocessor, then spin 200 us; launched with as many blocks as the device
has multiprocessors (rounded down to whole clusters). A block that starts more than 100 us after
the first waited for another cluster to leave: its cluster was not resident with the others.
Then the configuration timed as protocol 2 times it (L2 flushed, events around the launch) with
its plan's grid and with each --grid in its place.

    python3 square.py --shape N=20,K=5,C=96,F=256,B=128 --dtype bf16 --config JSON \
        [--grid 128 --grid 120] [--repeats 30]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from pathlib import Path

import cupy as cp

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "20261201"))
from sk_trace import plan_arrays, timed_run  # session 58's, beside placement.py

from autotune.families import get_family
from autotune.gpu.compiler import Compiler
from autotune.gpu.launch import bind, load_module, opt_in_shared_memory, prepare
from autotune.gpu.session import GpuSession
from autotune.model.problem import ConvProblem
from autotune.model.space import Config

PROBE = r"""
extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1) probe(unsigned long long* start, int* sm)
{
    unsigned long long t0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    if (threadIdx.x == 0) {
        int id;
        asm("mov.u32 %0, %%smid;" : "=r"(id));
        start[blockIdx.x] = t0;
        sm[blockIdx.x] = id;
    }
    unsigned long long t = t0;
    while (t - t0 < 200000ull) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
}
"""


def probe(sm_count: int) -> None:
    print("| cluster | blocks | started late | multiprocessors used |\n|--:|--:|--:|--:|")
    for size in (2, 4, 8):
        kernel = cp.RawKernel(PROBE.replace("CLUSTER", str(size)), "probe")
        blocks = sm_count - sm_count % size
        start = cp.zeros(blocks, dtype=cp.uint64)
        sm = cp.zeros(blocks, dtype=cp.int32)
        # A large block, so that a multiprocessor holds one: 1,024 threads.
        kernel((blocks,), (1024,), (start, sm))
        cp.cuda.Device().synchronize()
        s = start.get()
        late = int(((s - s.min()) > 100_000).sum())
        print(f"| {size} | {blocks} | {late} | {len(set(sm.get().tolist()))} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", required=True)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--config", required=True, help="JSON of the tunables")
    ap.add_argument("--grid", type=int, action="append", default=[])
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args()

    session = GpuSession(0)
    sm_count = session.info().sm_count
    probe(sm_count)
    family = get_family("tc_wgmma")
    fields = {k: int(v) for k, v in (kv.split("=") for kv in args.shape.split(","))}
    problem = ConvProblem(**fields, dtype=args.dtype, layout="NHWC")
    plan = family.plan(problem, family.complete(Config.from_json(args.config)))
    compiled = Compiler(arch="sm_90").compile(plan)
    _, functions = load_module(compiled.cubin, plan.entries, "/tmp", keep=False)
    opt_in_shared_memory(functions, plan.all_launches)
    flush = session._l2_flush()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    arrays = plan_arrays(session, family.buffers(problem), plan)
    (first, *rest) = plan.launches
    planned = first.grid_on(sm_count)[0]
    print(f"\n{problem.key}: {args.config}\n")
    print("| grid | median ms | min ms |\n|--:|--:|--:|")
    for grid in (planned, *args.grid):
        launch = dataclasses.replace(first, grid=(grid, *first.grid[1:]), blocks_per_sm=0)
        calls = bind(prepare((launch, *rest), functions), arrays)
        times = [timed_run(calls, flush, start, stop) for _ in range(args.repeats)]
        print(f"| {grid} | {statistics.median(times):.4f} | {min(times):.4f} |")


if __name__ == "__main__":
    main()
