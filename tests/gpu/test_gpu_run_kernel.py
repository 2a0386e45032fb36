"""run_kernel on the GPU: a kernel run once at one configuration, its arguments back as the run
left them (a kernel that accumulates shows one run, not several), with constant and dynamic
shared memory, and Kernel Tuner's convolution example's answer computed by it."""

from __future__ import annotations

import numpy as np
import pytest

from autotune import run_kernel

pytestmark = pytest.mark.gpu

VECTOR_ADD = """
__constant__ float offset[1];
__global__ void vector_add(float *c, const float *a, const float *b, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i] + offset[0];
}
"""
# Each block adds its sum (made in dynamic shared memory) into one total: a second run would
# double it.
ACCUMULATE = """
__global__ void accumulate(float *total, const float *x, int n) {
    extern __shared__ float part[];
    int i = blockIdx.x * block_size_x + threadIdx.x;
    part[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int half = block_size_x / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(total, part[0]);
}
"""


def test_vector_add_runs_at_the_configuration_with_its_constants() -> None:
    n = 100_003  # not a multiple of the block
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    c = np.zeros(n, np.float32)
    for block in (64, 512):
        out = run_kernel(
            "vector_add",
            VECTOR_ADD,
            n,
            [c, a, b, np.int32(n)],
            {"block_size_x": block},
            cmem_args={"offset": np.float32([2.0])},
        )
        np.testing.assert_allclose(out[0], a + b + 2.0, rtol=1e-6)
        np.testing.assert_array_equal(out[1], a)
        assert out[3] == n and not c.any()  # the caller's array is not written


def test_a_kernel_that_accumulates_shows_one_run() -> None:
    n = 1 << 20
    x = np.ones(n, np.float32)
    total, _, _ = run_kernel(
        "accumulate",
        ACCUMULATE,
        n,
        [np.zeros(1, np.float32), x, np.int32(n)],
        {"block_size_x": 256},
        smem_args={"size": "block_size_x * 4"},
    )
    assert total[0] == n


def test_the_answer_of_kernel_tuners_convolution_example() -> None:
    # convolution_correct.py's way: run a naive kernel once for the answer tune_kernel checks.
    naive = """
    __global__ void convolve(float *out, const float *in, const float *filter, int w, int k) {
        int x = blockIdx.x * block_size_x + threadIdx.x;
        int y = blockIdx.y * block_size_y + threadIdx.y;
        if (x >= w || y >= w) return;
        float sum = 0.0f;
        for (int j = 0; j < k; j++)
            for (int i = 0; i < k; i++)
                sum += in[(y + j) * (w + k - 1) + x + i] * filter[j * k + i];
        out[y * w + x] = sum;
    }
    """
    w, k = 509, 7
    rng = np.random.default_rng(2)
    image = rng.standard_normal((w + k - 1, w + k - 1), dtype=np.float32)
    filt = rng.standard_normal((k, k), dtype=np.float32)
    (out, *_) = run_kernel(
        "convolve",
        naive,
        (w, w),
        [np.zeros((w, w), np.float32), image, filt, np.int32(w), np.int32(k)],
        {"block_size_x": 32, "block_size_y": 8},
    )
    windows = np.lib.stride_tricks.sliding_window_view(image.astype(np.float64), (k, k))
    expected = np.einsum("yxji,ji->yx", windows, filt.astype(np.float64))
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
