"""A kernel of the user's that includes CCCL's headers with angle brackets compiles through
NVRTC (Kernel Tuner's expdist example reduces with cub::BlockReduce behind <cub/cub.cuh>),
and a kernel that includes none is compiled exactly as before (no extra flags, same cache key)."""

from __future__ import annotations

import pytest

from autotune.gpu.cccl import cccl_flags, cccl_root
from autotune.gpu.compiler import CompileError, Compiler

pytestmark = pytest.mark.skipif(cccl_root() is None, reason="no CuPy copy of CCCL installed")

BLOCK_SUM = """#include <cub/cub.cuh>
extern "C" __global__ void block_sum(const float *x, float *out) {
    typedef cub::BlockReduce<float, 128> Reduce;
    __shared__ typename Reduce::TempStorage scratch;
    float total = Reduce(scratch).Sum(x[blockIdx.x * 128 + threadIdx.x]);
    if (threadIdx.x == 0) out[blockIdx.x] = total;
}
"""
PLAIN = 'extern "C" __global__ void k(float *y) { y[threadIdx.x] = 1.0f; }\n'


def test_a_kernel_using_cub_block_reduce_compiles(tmp_path):
    source = tmp_path / "block_sum.cu"
    source.write_text(BLOCK_SUM)
    compiled = Compiler(cache_dir=tmp_path / "cache").compile_source(source, ())
    assert compiled.cubin.startswith(b"\x7fELF")
    assert "block_sum" in compiled.resources
    # Again from the cache, under the same key.
    again = Compiler(cache_dir=tmp_path / "cache").compile_source(source, ())
    assert again.key == compiled.key and again.cubin == compiled.cubin


def test_the_device_wide_algorithms_stay_out_of_reach(tmp_path):
    # A kernel cannot call cub::DeviceReduce (host code): NVRTC says so, as it would without us.
    source = tmp_path / "device_wide.cu"
    source.write_text(
        '#include <cub/cub.cuh>\nextern "C" __global__ void k(float *x) '
        "{ size_t n = 0; cub::DeviceReduce::Sum(nullptr, n, x, x, 4); }\n"
    )
    with pytest.raises(CompileError, match="DeviceReduce"):
        Compiler().compile_source(source, ())


def test_a_kernel_without_cccl_gets_no_extra_flags(tmp_path):
    assert cccl_flags(PLAIN) == ()
    assert cccl_flags("// #include <cub/cub.cuh> in a comment line\n" + PLAIN) == ()
    assert cccl_flags(BLOCK_SUM)[0].endswith("nvrtc")
    source = tmp_path / "k.cu"
    source.write_text(PLAIN)
    compiler = Compiler()
    assert compiler.cache_key(PLAIN, ()) == compiler.cache_key(PLAIN, (), cccl=False)
    assert compiler.compile_source(source, ()).key == compiler.cache_key(PLAIN, ())
