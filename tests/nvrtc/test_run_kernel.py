"""run_kernel without a GPU: NVRTC compiles the kernel for sm_90 at the configuration given, and a
stand-in for CuPy's launch runs vector_add in NumPy, so that what the launch receives (grid,
block, shared memory, constants, arguments) and what comes back are checked; then the one-line
errors. tests/gpu/test_gpu_run_kernel.py runs the same on the GPU."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import autotune
from autotune.gpu import launch
from autotune.gpu.jobs import NoGpu
from autotune.gpu.nvrtc_library import CompileError
from autotune.kt import api
from autotune.kt import run as run_module
from autotune.kt.arguments import TuneKernelError

VECTOR_ADD = """
__constant__ float offset[1];
__global__ void vector_add(float *c, const float *a, const float *b, int n) {
    extern __shared__ float unused[];
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i] + offset[0];
}
"""


class Array:
    """A CuPy array as the stand-in holds it: NumPy data."""

    def __init__(self, data: np.ndarray) -> None:
        self.data = data


@pytest.fixture
def gpu(compiler, monkeypatch, tmp_path):
    """CuPy's surface that run_kernel touches, with one device of compute capability 9.0; the
    launches it receives, and each run as vector_add does it (c = a + b + offset)."""
    monkeypatch.setattr(api, "CACHE_ROOT", tmp_path / "cache")
    launched = []

    def loaded_entry(_launch, cubin, entry, smem_bytes, constants):
        def function(grid, block, args, shared_mem):
            launched.append(SimpleNamespace(grid=grid, block=block, args=args, smem=shared_mem))
            (offset,) = dict(constants)["offset"]
            c, a, b, n = args
            c.data[:n] = a.data[:n] + b.data[:n] + offset

        assert cubin and entry == "vector_add"
        return None, function

    class Device:
        compute_capability = "90"

        def __init__(self, index):
            if index != 0:
                raise RuntimeError(f"cudaErrorInvalidDevice: no device {index}")

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    cp = SimpleNamespace(
        ndarray=Array,
        asarray=lambda a: Array(np.array(a)),
        asnumpy=lambda a: a.data,
        cuda=SimpleNamespace(
            Device=Device,
            get_current_stream=lambda: SimpleNamespace(synchronize=lambda: None),
        ),
    )
    monkeypatch.setattr(launch, "cp", cp)
    monkeypatch.setattr(run_module, "loaded_entry", loaded_entry)
    return launched


def vector_add_args(n: int = 1000):
    a = np.linspace(-1, 1, n, dtype=np.float32)
    return [np.zeros(n, np.float32), a, np.ones(n, np.float32), np.int32(n)]


def test_the_kernel_runs_once_at_the_configuration_and_every_argument_comes_back(gpu) -> None:
    args = vector_add_args()
    c, a, b, n = autotune.run_kernel(
        "vector_add",
        VECTOR_ADD,
        1000,
        args,
        {"block_size_x": 128},
        cmem_args={"offset": np.float32([0.5])},
        smem_args={"size": "block_size_x * 4"},
    )
    assert len(gpu) == 1
    (run,) = gpu
    # Kernel Tuner's launch: the grid is the problem size over the block size, rounded up.
    assert run.grid == (8, 1, 1) and run.block == (128, 1, 1) and run.smem == 512
    np.testing.assert_array_equal(c, args[1] + args[2] + np.float32(0.5))
    assert isinstance(c, np.ndarray) and c is not args[0]  # the caller's arrays stay as they were
    assert not args[0].any()
    np.testing.assert_array_equal(a, args[1])
    assert n == 1000 and isinstance(n, np.int32)


def test_no_params_take_kernel_tuners_default_block(gpu) -> None:
    autotune.run_kernel(
        "vector_add",
        VECTOR_ADD,
        1000,
        vector_add_args(),
        {},
        cmem_args={"offset": np.float32([0.0])},
    )
    assert gpu[0].block == (256, 1, 1) and gpu[0].grid == (4, 1, 1)


def test_a_kernel_that_does_not_compile_says_so_with_nvrtcs_log(gpu) -> None:
    broken = VECTOR_ADD.replace("a[i] + b[i]", "a[i] + missing[i]")
    with pytest.raises(CompileError, match="run_kernel: vector_add did not compile: .*missing"):
        autotune.run_kernel("vector_add", broken, 1000, vector_add_args(), {"block_size_x": 128})
    assert gpu == []


@pytest.mark.parametrize(
    "params, options, message",
    [
        ({"block_size_x": [64, 128]}, {}, "params\\['block_size_x'\\] must be one value"),
        ([("block_size_x", 64)], {}, "params must be a dict"),
        ({"block_size_x": 64}, {"texmem_args": {"t": 1}}, "texmem_args is not supported"),
        ({"block_size_x": 64}, {"lang": "OpenCL"}, "lang='OpenCL' is not supported"),
    ],
)
def test_bad_input_is_one_line_naming_run_kernel(gpu, params, options, message) -> None:
    with pytest.raises(TuneKernelError, match=f"^run_kernel: {message}") as err:
        autotune.run_kernel("vector_add", VECTOR_ADD, 1000, vector_add_args(), params, **options)
    assert "\n" not in str(err.value) and gpu == []


def test_a_device_that_is_not_there_is_named(gpu) -> None:
    with pytest.raises(NoGpu, match="^run_kernel: no usable CUDA GPU 3: .*no device 3"):
        autotune.run_kernel("vector_add", VECTOR_ADD, 10, vector_add_args(10), {}, device=3)
