"""One tc_wgmma configuration launched a few times in this process, for ncu (no check, no timing):

    python results/h100/tf32wg/profile_one.py 'N=..,K=..,C=..,F=..,B=..,dtype=..,layout=NHWC' \
        'CONFIG JSON'
"""

from __future__ import annotations

import sys

import cupy as cp
import numpy as np

from autotune.families import get_family
from autotune.gpu.compiler import Compiler
from autotune.gpu.launch import opt_in_shared_memory
from autotune.gpu.session import GpuSession
from autotune.model.parsing import parse_shape
from autotune.model.space import Config

LAUNCHES = 3


def main(shape: str, config_json: str) -> None:
    family = get_family("tc_wgmma")
    problem = parse_shape(shape)
    config = family.complete(Config.from_json(config_json))
    plan = family.plan(problem, config)
    compiled = Compiler(arch="sm_90").compile(plan)
    session = GpuSession()
    functions = session.load(compiled.cubin, plan.entries)
    opt_in_shared_memory(functions, plan.all_launches)
    buffers = family.buffers(problem)
    arrays = session.fresh_inputs(buffers, seed=0)
    for name, shape_ in buffers.outputs:
        arrays[name] = session.poisoned(shape_, buffers.dtype)
    for name, shape_ in plan.scratch:
        arrays[name] = cp.zeros(shape_, dtype=cp.float32)
    run = session.runner(plan.launches, functions, arrays)
    for _ in range(LAUNCHES):
        run()
    session.sync()
    y = cp.asnumpy(arrays["y"]).astype(np.float64)
    print(problem.key, config, "registers", compiled.max_registers, "finite", np.isfinite(y).all())


if __name__ == "__main__":
    main(*sys.argv[1:3])
