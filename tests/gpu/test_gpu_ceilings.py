"""On a compute capability 9.0 device: the tensor-core peaks from our own wgmma loop
(gpu/ceiling_wgmma.cu) stay under what the tensor cores can do at the SM clock's maximum, reach
cuBLAS's GEMM in the same dtype, and take twice the time for twice the iterations."""

from __future__ import annotations

import statistics

import pytest

from autotune.gpu.compiler import Compiler
from autotune.gpu.library_tasks import WGMMA_ITERATIONS, MeasureCeilings
from autotune.gpu.timing import TimingPolicy
from autotune.model.precision import TENSOR_CORE_CEILINGS
from autotune.tuning.baselines import CEILING_FMA_SOURCE, wgmma_cubins

pytestmark = pytest.mark.gpu

QUICK = TimingPolicy(warmup=1, min_repeats=5, min_time_s=0.0, max_repeats=10, max_time_s=0.5)
NAMES = tuple(TENSOR_CORE_CEILINGS)
# Dense FLOPs a clock of one SM's tensor cores on sm_90 (H100/H200: 989 TFLOP/s BF16 at 1830 MHz
# on 132 SMs), FP32 accumulation.
DENSE_FLOPS_PER_CLOCK = {"bf16": 4096, "fp16": 4096, "tf32": 2048}


@pytest.fixture(scope="module")
def measure(evaluator):
    """The tensor-core ceilings measured with the given wgmma cubins (none: cuBLAS's GEMM)."""
    if evaluator.device.compute_capability != "9.0":
        pytest.skip("the wgmma loop runs on compute capability 9.0 (sm_90a) only")
    compiler = Compiler(arch=evaluator.device.arch)
    fma = compiler.compile_source(CEILING_FMA_SOURCE, ())
    cubins = wgmma_cubins(compiler, NAMES)
    assert set(cubins) == {"tf32", "bf16", "fp16"}

    def run(own_loop: bool = True, iterations: int = WGMMA_ITERATIONS):
        task = MeasureCeilings(fma.cubin, QUICK, NAMES, cubins if own_loop else {}, iterations)
        result = evaluator.call(task, timeout_s=300)
        assert isinstance(result, list), result
        assert [c.name for c in result] == list(NAMES)
        return {c.name: c for c in result}

    return run


@pytest.fixture(scope="module")
def loop(measure):
    return measure()


def test_the_loop_stays_under_the_tensor_cores_bound(loop, evaluator):
    device = evaluator.device
    assert device.clock_mhz > 0, device  # the SM clock's maximum, from the device's attribute
    for name, ceiling in loop.items():
        assert ceiling.detail.startswith("wgmma m64n256"), ceiling.detail
        per_clock = DENSE_FLOPS_PER_CLOCK[TENSOR_CORE_CEILINGS[name]]
        bound_gflops = device.sm_count * device.clock_mhz * 1e6 * per_clock * 1.02 / 1e9
        assert ceiling.value <= bound_gflops, (name, ceiling.value, bound_gflops)


def test_the_loop_reaches_cublas_gemm(loop, measure):
    pytest.importorskip("torch")
    cublas = measure(own_loop=False)
    for name, ceiling in loop.items():
        assert cublas[name].detail.startswith("cuBLAS GEMM"), cublas[name].detail
        assert ceiling.value >= 0.97 * cublas[name].value, (name, ceiling.value, cublas[name])


def test_twice_the_iterations_take_twice_the_time(loop, measure):
    doubled = measure(iterations=2 * WGMMA_ITERATIONS)
    for name, ceiling in loop.items():
        ratio = statistics.median(doubled[name].samples_ms) / statistics.median(ceiling.samples_ms)
        assert 1.8 <= ratio <= 2.2, (name, ratio)
