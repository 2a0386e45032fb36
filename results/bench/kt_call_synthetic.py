"""One tune_kernel call of Kernel Tuner's vector_add (15 configurations) on a machine without a
GPU: the real worker process with the synthetic session inside (no timings), NVRTC compiling
in the compile pool from an empty cubin cache, a new results database each time. Prints the
call's wall time and the worker's close, median of 5. For the host side of a call only (the
GPU worker's boot there takes cupy's import and a CUDA context, which this has not).
From the checkout root:  python3 results/bench/kt_call_synthetic.py"""

import statistics
import tempfile
import time
from pathlib import Path

import numpy

from autotune import tune_kernel
from autotune.gpu.evaluator import GpuEvaluator
from autotune.gpu.synthetic import SyntheticSession

SOURCE = """
__global__ void vector_add(float *c, float *a, float *b, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""
SESSION = f"{SyntheticSession.__module__}:{SyntheticSession.__name__}"

if __name__ == "__main__":
    size = 1_000_000
    a = numpy.random.randn(size).astype(numpy.float32)
    args = [numpy.zeros_like(a), a, a.copy(), numpy.int32(size)]
    params = {"block_size_x": [128 + 64 * i for i in range(15)]}
    calls, closes = [], []
    for _ in range(5):
        with tempfile.TemporaryDirectory() as scratch:
            start = time.perf_counter()
            worker = GpuEvaluator(session=SESSION, wait=False)
            tune_kernel(
                "vector_add",
                SOURCE,
                size,
                args,
                params,
                quiet=True,
                evaluator=worker,
                storage=str(Path(scratch) / "r.db"),
                compiler_cache=Path(scratch) / "cubins",
            )
            calls.append(time.perf_counter() - start)
            start = time.perf_counter()
            worker.close()
            closes.append(time.perf_counter() - start)
    print("| call, cold cubin cache (s) | worker close (s) |\n|--:|--:|")
    print(f"| {statistics.median(calls):.3f} | {statistics.median(closes):.3f} |")
