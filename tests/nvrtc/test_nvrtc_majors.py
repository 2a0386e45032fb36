"""NVRTC of CUDA 12 and of CUDA 13 (the `cuda12` and `cuda13` extras) each compile a family's
kernel on the CPU, side by side in one environment; the compiler picks the installed CuPy's."""

from __future__ import annotations

import pytest

from autotune.families import get_family
from autotune.gpu import nvrtc_library
from autotune.gpu.compiler import Compiler
from autotune.gpu.nvrtc_library import (
    WHEEL_LIBRARIES,
    compile_program,
    nvrtc_version,
    wheel_nvrtc_libraries,
)
from autotune.gpu.ptxas import parse_resources
from autotune.model.problem import ConvProblem
from autotune.model.space import ARCH_LIMITS

# The test extra installs both NVRTC wheels; without one of them these tests say so and skip.
INSTALL_BOTH = "the test extra (pip install -e '.[cuda13,test]') brings NVRTC 12 and 13"


def _wheel(major: int):
    path = wheel_nvrtc_libraries().get(major)
    if path is None:
        pytest.skip(f"no NVRTC {major} wheel installed: {INSTALL_BOTH}")
    return path


@pytest.mark.parametrize("major", sorted(WHEEL_LIBRARIES))
def test_each_nvrtc_major_compiles_a_kernel_on_the_cpu(major):
    _wheel(major)
    assert nvrtc_version(major).split(".")[0] == str(major)
    family = get_family("chen_general")
    problem = ConvProblem(N=32, K=3, C=64, F=64)
    bound = family.load_space().bind(problem.fields(), ARCH_LIMITS["sm_90"])
    plan = family.plan(problem, bound.configs[0])
    compiler = Compiler(arch="sm_90")
    text = plan.source.read_text()
    flags, headers = compiler._flags(plan.defines), compiler.headers(plan.source, text)
    cubin, log, _ = compile_program(text, plan.source.name, flags, major, headers)
    assert cubin[:4] == b"\x7fELF"
    resources = parse_resources(log)
    assert set(plan.entries) <= set(resources)
    assert all(resources[entry].registers > 0 for entry in plan.entries)


@pytest.mark.parametrize("major", sorted(WHEEL_LIBRARIES))
def test_the_compiler_uses_the_nvrtc_of_the_installed_cupy(major, monkeypatch):
    # A cubin must load on the driver CuPy runs on, so with both NVRTCs installed the compiler
    # takes the one of CuPy's CUDA major.
    for each in WHEEL_LIBRARIES:
        _wheel(each)
    monkeypatch.setattr(nvrtc_library, "_libs", {})
    monkeypatch.setattr(nvrtc_library, "cupy_cuda_major", lambda: major)
    assert nvrtc_version().split(".")[0] == str(major)
