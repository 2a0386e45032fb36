"""How much of conv3d's timed run at the blog's shape is the launch: per config, the median of
one launch between two CUDA events (the timing protocol, DESIGN section 2) against 100 launches
back to back between two events; and the same for an empty kernel (one block).

usage (GPU machine, checkout root): python3 results/h100/conv3d/launch_overhead.py CONFIG_JSON...
"""

import json
import sys
from pathlib import Path

import cupy as cp
import numpy as np

from autotune.families import get_family
from autotune.gpu.compiler import Compiler
from autotune.model.problem import Conv3dProblem
from autotune.model.space import Config

FAMILY = get_family("conv3d")
BLOG = Conv3dProblem(D=256, R=128, Cc=128, Kd=5, Kr=5, Kc=5)


def medians_ms(launch) -> tuple[float, float]:
    """(one launch between events, mean of 100 back to back), medians of 200 and 10 samples."""
    for _ in range(20):
        launch()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    one = []
    for _ in range(200):
        start.record()
        launch()
        end.record()
        end.synchronize()
        one.append(cp.cuda.get_elapsed_time(start, end))
    many = []
    for _ in range(10):
        start.record()
        for _ in range(100):
            launch()
        end.record()
        end.synchronize()
        many.append(cp.cuda.get_elapsed_time(start, end) / 100)
    return float(np.median(one)), float(np.median(many))


x = cp.random.uniform(-1, 1, BLOG.input_shape, dtype=cp.float32)
w = cp.random.uniform(-1, 1, BLOG.filter_shape, dtype=cp.float32)
y = cp.empty(BLOG.output_shape, dtype=cp.float32)
empty = cp.RawKernel('extern "C" __global__ void empty(float* y) {}', "empty")
one, many = medians_ms(lambda: empty((1,), (32,), (y,)))
print(f"empty kernel: one launch {one * 1e3:.2f} us, back to back {many * 1e3:.2f} us", flush=True)
compiler = Compiler(arch="sm_90")
for i, text in enumerate(sys.argv[1:]):
    plan = FAMILY.plan(BLOG, Config.of(json.loads(text)))
    path = Path(f"/tmp/launch_overhead_{i}.cubin")  # CuPy caches modules by path
    path.write_bytes(compiler.compile(plan).cubin)
    module = cp.RawModule(path=str(path))
    symbol = module.get_global("c_filter")
    cp.cuda.runtime.memcpy(symbol.ptr, w.data.ptr, w.nbytes, cp.cuda.runtime.memcpyDeviceToDevice)
    (launch,) = plan.launches
    kernel = module.get_function(launch.kernel)
    if launch.smem_bytes > 48 * 1024:
        kernel.max_dynamic_shared_size_bytes = launch.smem_bytes
    one, many = medians_ms(
        lambda: kernel(launch.grid, launch.block, (x, y), shared_mem=launch.smem_bytes)
    )
    print(
        f"{text}\n  one launch {one * 1e3:.2f} us ({BLOG.flops / one / 1e6:.0f} GFlop/s), "
        f"back to back {many * 1e3:.2f} us ({BLOG.flops / many / 1e6:.0f} GFlop/s)",
        flush=True,
    )
