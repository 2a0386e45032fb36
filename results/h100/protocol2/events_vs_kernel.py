"""What protocol 2's events add to a kernel: the conv3d best configuration at 256 x 128 x 128 with
5^3 and an empty kernel, timed by the tool's timer (events) and, under Nsight Compute, by the
GPU's own kernel duration with caches flushed (ncu --cache-control all). Run on the GPU machine:
    python3 results/h100/protocol2/events_vs_kernel.py events
    ncu --cache-control all --clock-control none --metrics gpu__time_duration.sum \
        python3 results/h100/protocol2/events_vs_kernel.py launch
"""

from __future__ import annotations

import sys
from pathlib import Path

import cupy as cp
import numpy as np

from autotune.families import get_family
from autotune.gpu.compiler import Compiler
from autotune.gpu.launch import load_module
from autotune.gpu.session import GpuSession
from autotune.gpu.timing import TimingPolicy
from autotune.model.parsing import problem_from_dict
from autotune.model.space import Config
from autotune.store import Store

ROOT = Path(__file__).resolve().parents[3]
SHAPE = "D=256,R=128,Cc=128,Kd=5,Kr=5,Kc=5"


def conv3d_run(session: GpuSession):
    best = Store(ROOT / "results" / "autotune.db", create=False).best(family="conv3d")
    row = best[best["problem_key"] == SHAPE].iloc[0]
    family = get_family("conv3d")
    problem = problem_from_dict(row["shape"], "conv3d")
    config = family.complete(Config.from_json(row["config"]))
    plan = family.plan(problem, config)
    compiled = Compiler(arch=session.info().arch).compile(plan)
    module, functions = load_module(compiled.cubin, plan.entries, session._tmp.name, keep=True)
    for launch in plan.all_launches:
        if launch.smem_bytes > 48 * 1024:
            functions[launch.kernel].max_dynamic_shared_size_bytes = launch.smem_bytes
    arrays = session.fresh_inputs(family.buffers(problem), 0)
    for name, shape in (*family.buffers(problem).outputs, *plan.scratch):
        arrays[name] = cp.zeros(shape, dtype=cp.float32)
    session.runner(plan.setup, functions, arrays)()
    for symbol, buffer in plan.constants:
        module.get_global(symbol).copy_from_device(arrays[buffer].data, arrays[buffer].nbytes)
    print(f"conv3d {SHAPE} {config}, {problem.flops / 1e9:.2f} GFLOP")
    return session.runner(plan.launches, functions, arrays), problem.flops


def main(mode: str) -> None:
    session = GpuSession(0)
    timer = Compiler(arch=session.info().arch).compile_source(
        ROOT / "tests" / "data" / "timer_kernels.cu", ()
    )
    empty = session.load(timer.cubin, ("empty_kernel",))["empty_kernel"]
    runs = {"empty": (lambda: empty((1,), (1,), ()), 0), "conv3d": conv3d_run(session)}
    for name, (run, flops) in runs.items():
        if mode == "events":
            median = float(np.median(session.time_runs(run, TimingPolicy(early_stop=None))))
            rate = f", {flops / median / 1e9:,.1f} GFlop/s" if flops else ""
            print(f"{name}: events median {median * 1e3:.2f} us{rate}")
        else:
            for _ in range(5):
                run()
            session.sync()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "events")
