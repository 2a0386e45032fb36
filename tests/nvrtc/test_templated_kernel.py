"""A templated kernel named as Kernel Tuner names it ("vector_add<float_type>", the tunable a
macro when it compiles): NVRTC instantiates the name, gives its lowered name, and the plan the
GPU worker loads names the entry as its cubin does."""

from __future__ import annotations

import numpy as np
import pytest

from autotune.families.plan import KernelPlan, Launch
from autotune.gpu.compiler import Compiler, lowered_plan
from autotune.gpu.cuda_headers import cuda_include_dir
from autotune.kt import api
from autotune.kt.api import tune_kernel
from autotune.kt.tuned import tuned_kernel
from tests.conftest import SyntheticEvaluator

# accuracy.py's kernel (Kernel Tuner's examples/cuda), `half` from the toolkit's cuda_fp16.h.
VECTOR_ADD = """
#include <cuda_fp16.h>
using half = __half;

template <typename T>
__global__ void vector_add(int n, const T* left, const T* right, T* output) {
    int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i < n) {
        output[i] = left[i] + right[i];
    }
}
"""
SCALE = """
template <typename T, int N>
__global__ void scale(T* y, const T* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * (T)N;
}
"""
needs_toolkit = pytest.mark.skipif(
    cuda_include_dir() is None, reason="no CUDA toolkit headers (cuda_fp16.h) found"
)


@pytest.fixture(autouse=True)
def _scratch(compiler, tmp_path, monkeypatch):
    monkeypatch.setattr(api, "CACHE_ROOT", tmp_path / "cache")


def plan_of(tmp_path, text: str, name: str, defines) -> KernelPlan:
    source = tmp_path / "k.cu"
    source.write_text(text)
    return KernelPlan(source, defines, (Launch(name, (1, 1, 1), (32, 1, 1), ("a", "b")),))


@needs_toolkit
@pytest.mark.parametrize(
    ("float_type", "mangled"), [("float", "IfE"), ("double", "IdE"), ("half", "I6__halfE")]
)
def test_each_precision_instantiates_and_is_loaded_by_its_lowered_name(
    tmp_path, float_type, mangled
):
    compiler = Compiler(arch="sm_90", cache_dir=tmp_path / "cubins")
    plan = plan_of(tmp_path, VECTOR_ADD, "vector_add<float_type>", (("float_type", float_type),))
    compiled = compiler.compile(plan)
    entry = compiled.entry("vector_add<float_type>")
    assert entry.startswith("_Z10vector_add") and mangled in entry
    assert entry.encode() in compiled.cubin
    assert entry in compiled.resources  # the ptxas report names the lowered entry
    (launch,) = lowered_plan(plan, compiled).launches
    assert launch.kernel == entry
    again = compiler.compile(plan)  # from the cubin cache: the lowered name comes with it
    assert again.cached and again.entry("vector_add<float_type>") == entry


def test_template_arguments_are_macros_as_kernel_tuner_compiles_them(tmp_path):
    compiler = Compiler(arch="sm_90")
    plan = plan_of(tmp_path, SCALE, "scale<float_type, 4>", (("float_type", "double"),))
    assert compiler.compile(plan).entry("scale<float_type, 4>") == "_Z5scaleIdLi4EEvPT_PKS0_i"
    plain = plan_of(
        tmp_path,
        'extern "C" '
        + SCALE.replace("template <typename T, int N>", "")
        .replace("(T)N", "2.0f")
        .replace("T*", "float*"),
        "scale",
        (),
    )
    assert lowered_plan(plain, compiler.compile(plain)) == plain  # extern "C": as it was


def test_tune_kernel_takes_a_templated_name_and_tuned_kernel_loads_its_best(tmp_path):
    n = 1000
    x = np.linspace(-1, 1, n)
    evaluator = SyntheticEvaluator(
        lambda d: 1.0 + d["block_size_x"] / 1000 + (d["float_type"] == "double")
    )
    call = (
        "scale<float_type, 4>",
        SCALE,
        n,
        [np.zeros_like(x), x, np.int32(n)],
        {"block_size_x": [64, 128], "float_type": ["float", "double"]},
    )
    where = {"storage": str(tmp_path / "r.db"), "compiler_cache": None}
    results, env = tune_kernel(*call, evaluator=evaluator, quiet=True, **where)
    assert [r["status"] for r in results] == ["OK"] * 4
    names = {dict(j.plan.defines)["float_type"]: j.plan.launches[0].kernel for j in evaluator.jobs}
    assert names == {"float": "_Z5scaleIfLi4EEvPT_PKS0_i", "double": "_Z5scaleIdLi4EEvPT_PKS0_i"}
    assert env["study"].startswith("scale<float_type, 4> ")
    best = tuned_kernel(*call, **where)
    assert best.config == {"block_size_x": 64, "float_type": "float"}
    assert best.entry == "_Z5scaleIfLi4EEvPT_PKS0_i" and best.entry.encode() in best.cubin
