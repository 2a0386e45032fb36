"""Where one `tune_kernel` call's seconds go, as Kernel Tuner's vector_add example makes it (15
configurations, 10 M floats, brute force), under cProfile in the calling process: the call's
wall, and the functions of autotune and the standard library that held the most of it (cumulative,
so waits on the GPU worker, the compile pool and the store show as the functions that wait).
On the GPU machine, from the checkout root:  python3 results/h200/20261130b/kt_call_profile.py"""

import cProfile
import io
import pstats
import time

import numpy

from autotune import tune_kernel

SOURCE = """
__global__ void vector_add(float *c, float *a, float *b, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""

if __name__ == "__main__":
    size = 10_000_000
    a = numpy.random.randn(size).astype(numpy.float32)
    b = numpy.random.randn(size).astype(numpy.float32)
    args = [numpy.zeros_like(b), a, b, numpy.int32(size)]
    params = {"block_size_x": [128 + 64 * i for i in range(15)]}
    profile = cProfile.Profile()
    start = time.perf_counter()
    profile.enable()
    results, env = tune_kernel("vector_add", SOURCE, size, args, params, quiet=True)
    profile.disable()
    wall = time.perf_counter() - start
    print(f"tune_kernel: {wall:.2f} s wall, {len(results)} results, tuning_s {env['tuning_s']:.2f}")
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(45)
    print(text.getvalue())
