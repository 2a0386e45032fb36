"""Launch maxdnn's main kernel once per (shape, config) of a JSON file, for Nsight Compute.

Usage (on the GPU machine, from the worktree root):
    ncu -k regex:^maxdnn$ --set full -o prof \\
        python3 results/h100/maxdnn_profile/drive.py CONFIGS.json [REPEATS]

CONFIGS.json maps a shape ("N=12,K=3,C=256,F=512,B=128") to a config (the tunables, as
`autotune best --format csv` stores them); a missing tunable takes its default. Setup (layout
conversion, offsets table) runs first; then the timed launches (with split-K, zero_fill and
maxdnn) run REPEATS times (default 2; the profiles used 1, so ncu saw one maxdnn per shape, in
the file's order). Prints each kernel's registers and spills as NVRTC reports them.
"""

from __future__ import annotations

import json
import sys

import cupy as cp

from autotune.families import get_family
from autotune.families.conv2d import buffers
from autotune.gpu.compiler import Compiler
from autotune.gpu.launch import load_module
from autotune.gpu.session import GpuSession
from autotune.model.parsing import parse_shape
from autotune.model.space import Config


def prepared(session: GpuSession, compiled, plan, problem):
    """The plan's timed run, ready to call, and its arrays: the cubin loaded, the inputs drawn,
    the setup launches run and the constants copied (bound/bound.py uses it too)."""
    module, functions = load_module(compiled.cubin, plan.entries, session._tmp.name, False)
    for launch in plan.all_launches:
        if launch.smem_bytes > 48 * 1024:
            functions[launch.kernel].max_dynamic_shared_size_bytes = launch.smem_bytes
    arrays = session.fresh_inputs(buffers(problem), 0)
    for name, shp in (*buffers(problem).outputs, *plan.scratch):
        arrays[name] = cp.zeros(shp, dtype=cp.float32)
    session.runner(plan.setup, functions, arrays)()
    for symbol, buffer in plan.constants:
        source = arrays[buffer]
        module.get_global(symbol).copy_from_device(source.data, source.nbytes)
    return session.runner(plan.launches, functions, arrays), arrays


def main(path: str, repeats: int = 2) -> None:
    family = get_family("maxdnn")
    defaults = {p.name: p.values[0] for p in family.load_space().parameters}
    session = GpuSession(0)
    compiler = Compiler(arch="sm_90")
    for shape, config in json.load(open(path)).items():
        problem = parse_shape(shape)
        config = {**defaults, **config}
        plan = family.plan(problem, Config.of(config))
        compiled = compiler.compile(plan)
        res = compiled.resources.get("maxdnn")
        usage = f"regs={res.registers} spills={res.spill_stores + res.spill_loads}" if res else ""
        print(f"{shape} {json.dumps(config, sort_keys=True)} {usage}", flush=True)
        run, arrays = prepared(session, compiled, plan, problem)
        for _ in range(repeats):
            run()
        session.sync()
        del arrays
        cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2)
