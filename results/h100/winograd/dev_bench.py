"""Per-kernel times of one winograd configuration at a few layers, outside the tuner (on a GPU):
a 128 MiB write before each sample (cold L2), CUDA events between the four launches, median of
10 samples. Not the tool's measurement: a development probe of where the time goes.

    PYTHONPATH=. python3 results/h100/winograd/dev_bench.py [m ...]
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

import cupy as cp
import numpy as np

from autotune.families import get_family
from autotune.gpu.compiler import Compiler
from autotune.model.problem import ConvProblem
from autotune.model.space import Config

FAMILY = get_family("winograd")
BASE = dict(BM=128, BN=128, BK=16, TM=8, TN=8, DOUBLE_BUFFER=2, VEC=4, MIN_BLOCKS=1,
            IN_BLOCK=128, OUT_BLOCK=128, OUT_STAGE=0)  # fmt: skip
SHAPES = {
    "alexnet conv3": ConvProblem(N=13, K=3, C=192, F=384, B=128),
    "alexnet conv4": ConvProblem(N=13, K=3, C=384, F=256, B=128),
    "overfeat L3": ConvProblem(N=12, K=3, C=256, F=512, B=128),
    "overfeat L5": ConvProblem(N=12, K=3, C=1024, F=1024, B=128),
    "vgg16 conv3_2": ConvProblem(N=56, K=3, C=256, F=256, B=32),
    "vgg16 conv5_1": ConvProblem(N=14, K=3, C=512, F=512, B=32),
    "vgg16 conv1_2": ConvProblem(N=224, K=3, C=64, F=64, B=32),
}


def bench(problem: ConvProblem, config: dict, compiler: Compiler, reps: int = 10) -> dict:
    plan = FAMILY.plan(problem, Config.of(config))
    compiled = compiler.compile(plan)
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as fh:
        fh.write(compiled.cubin)
    module = cp.RawModule(path=fh.name)
    kernels = {name: module.get_function(name) for name in plan.entries}
    os.unlink(fh.name)
    bufs = {
        "x": cp.random.random(problem.input_shape, dtype=cp.float32) * 2 - 1,
        "w": cp.random.random(problem.filter_shape, dtype=cp.float32) * 2 - 1,
        "y": cp.full(problem.output_shape, cp.nan, cp.float32),
    }
    for name, shape in plan.scratch:
        bufs[name] = cp.full(shape, cp.nan, cp.float32)
    for launch in plan.launches:
        if launch.smem_bytes:
            kernels[launch.kernel].max_dynamic_shared_size_bytes = launch.smem_bytes

    def go(launch) -> None:
        args = tuple(bufs[a] if isinstance(a, str) else np.int32(a) for a in launch.args)
        kernels[launch.kernel](launch.grid, launch.block, args, shared_mem=launch.smem_bytes)

    flush = cp.empty(32 * 2**20, cp.float32)
    times: dict[str, list[float]] = {launch.kernel: [] for launch in plan.launches}
    totals = []
    for r in range(reps + 1):
        flush.fill(r)
        events = [cp.cuda.Event() for _ in range(len(plan.launches) + 1)]
        events[0].record()
        for i, launch in enumerate(plan.launches):
            go(launch)
            events[i + 1].record()
        events[-1].synchronize()
        if r == 0:
            continue  # warm-up
        for i, launch in enumerate(plan.launches):
            times[launch.kernel].append(cp.cuda.get_elapsed_time(events[i], events[i + 1]))
        totals.append(cp.cuda.get_elapsed_time(events[0], events[-1]))
    total = float(np.median(totals))
    return {
        "shape": problem.key,
        "m": config["OUT_TILE"],
        "total_ms": round(total, 4),
        "gflops": round(problem.flops / total / 1e6),
        **{k: round(float(np.median(v)), 4) for k, v in times.items()},
        "scratch_mib": plan.scratch_bytes // 2**20,
    }


def main(tiles: list[int]) -> None:
    compiler = Compiler(arch="sm_90")
    for name, problem in SHAPES.items():
        for m in tiles:
            print(name, json.dumps(bench(problem, {**BASE, "OUT_TILE": m}, compiler)), flush=True)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [2, 4, 5, 6])
