"""tuned_kernel on the GPU: tuned by tune_kernel, then launched at its stored best (on CuPy's
stream and on one of the caller's, with dynamic shared memory and constant memory) and checked
against the answer."""

from __future__ import annotations

import numpy as np
import pytest

from autotune import tune_kernel, tuned_kernel

pytestmark = pytest.mark.gpu

SOURCE = """
__constant__ float scale_by[1];
__global__ void scaled_sums(float *sums, const float *x, int n) {
    extern __shared__ float part[];
    int i = blockIdx.x * block_size_x + threadIdx.x;
    part[threadIdx.x] = i < n ? scale_by[0] * x[i] : 0.0f;
    __syncthreads();
    for (int half = block_size_x / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) sums[blockIdx.x] = part[0];
}
"""
N = 100_000
TUNE = {"block_size_x": [64, 128, 256, 512]}


def call_arguments():
    x = np.random.default_rng(3).random(N, dtype=np.float32)
    sums = np.zeros(N // 64 + 1, np.float32)
    options = dict(
        smem_args={"size": "block_size_x * 4"},
        cmem_args={"scale_by": np.array([2.0], np.float32)},
    )
    return x, [sums, x, np.int32(N)], options


def test_the_tuned_kernel_runs_and_gives_the_answer(tmp_path):
    cp = pytest.importorskip("cupy")
    x, arguments, options = call_arguments()
    storage = str(tmp_path / "r.db")
    results, env = tune_kernel(
        "scaled_sums", SOURCE, N, arguments, TUNE, storage=storage, quiet=True, **options
    )
    kernel = tuned_kernel("scaled_sums", SOURCE, N, arguments, TUNE, storage=storage, **options)
    assert kernel.config == {"block_size_x": env["best_config"]["block_size_x"]}
    bx = kernel.block[0]
    assert kernel.smem_bytes == 4 * bx and kernel.grid == (-(-N // bx), 1, 1)
    blocks = kernel.grid[0]
    expected = np.add.reduceat(2 * x.astype(np.float64), np.arange(0, N, bx))
    for stream in (None, cp.cuda.Stream(non_blocking=True)):
        sums = cp.full(blocks, np.nan, cp.float32)
        kernel(sums, cp.asarray(x), np.int32(N), stream=stream)
        (stream or cp.cuda.get_current_stream()).synchronize()
        np.testing.assert_allclose(cp.asnumpy(sums), expected, rtol=1e-5)
