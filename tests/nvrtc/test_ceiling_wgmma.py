"""The tensor-core peak's wgmma loop (gpu/ceiling_wgmma.cu) compiles for sm_90a in each dtype,
with its entry, without spills, and with its wgmmas pipelined."""

from __future__ import annotations

import pytest

from autotune.gpu.compiler import CompileError, Compiler
from autotune.gpu.library_tasks import WGMMA_STORAGE, WGMMA_WARPGROUPS, wgmma_defines
from autotune.model.precision import CEILING_NAMES
from autotune.model.space import ARCH_LIMITS
from autotune.tuning.baselines import CEILING_WGMMA_SOURCE, wgmma_cubins
from tests.nvrtc.cubin_text import code

LIMITS = ARCH_LIMITS["sm_90"]


@pytest.mark.parametrize("dtype", list(WGMMA_STORAGE))
def test_the_loop_compiles_for_sm90a_in_each_dtype(compiler, dtype):
    compiled = compiler.compile_source(CEILING_WGMMA_SOURCE, wgmma_defines(dtype), True)
    assert compiled.cubin.startswith(b"\x7fELF") and "sm_90a" in compiled.log
    assert ".text.wgmma_peak" in code(compiled.cubin)  # the entry MeasureCeilings launches
    loop = compiled.resources["wgmma_peak"]
    assert compiled.spills == 0 and loop.stack_bytes == 0, compiled.log
    # One block of two warpgroups an SM: its registers and its 48 KiB of tiles fit.
    assert loop.registers * 128 * WGMMA_WARPGROUPS <= LIMITS.REGS_PER_BLOCK
    assert loop.smem_bytes == (WGMMA_WARPGROUPS * 64 + 256) * 128
    # ptxas says where it injected waits for the wgmmas (their accumulators touched between
    # them) or serialized them: a loop like that would measure the waits, not the tensor cores.
    assert "serialized" not in compiled.log and "injected" not in compiled.log, compiled.log


def test_the_plain_sm90_target_is_refused_with_the_reason(compiler):
    with pytest.raises(CompileError, match="needs the sm_90a target"):
        compiler.compile_source(CEILING_WGMMA_SOURCE, wgmma_defines("bf16"), False)


def test_ensure_ceilings_compiles_one_cubin_a_dtype_on_sm90_only(compiler):
    cubins = wgmma_cubins(compiler, CEILING_NAMES)
    assert set(cubins) == {"tf32", "bf16", "fp16"} and len(set(cubins.values())) == 3
    assert all(cubin.startswith(b"\x7fELF") for cubin in cubins.values())
    assert wgmma_cubins(Compiler(arch="sm_80"), CEILING_NAMES) == {}
