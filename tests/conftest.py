"""Shared fixtures: GPU detection for tests marked gpu, and a synthetic evaluator."""

from __future__ import annotations

import functools
import os

import pytest

from autotune.gpu.synthetic import _readings  # made-up readings where a timing observes
from autotune.model.evaluator import Evaluator
from autotune.model.records import TIMING_PROTOCOL, DeviceInfo, Measurement, Status
from autotune.model.space import DeviceLimits

# In CI the property tests draw the same examples every run, so a landing never depends on the
# draw; elsewhere they explore new ones each time (a failure prints how to reproduce it).
try:
    from hypothesis import settings
except ImportError:  # the GPU machine runs the GPU tests without the test extra
    settings = None
if settings is not None:
    settings.register_profile("ci", derandomize=True)
    if os.environ.get("CI"):
        settings.load_profile("ci")


@functools.cache
def gpu_unavailable_reason() -> str | None:
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            return None
        return "no CUDA device"
    except Exception as err:  # no driver, no CuPy
        from autotune.gpu.evaluator import no_gpu_reason

        text = no_gpu_reason(f"{type(err).__name__}: {str(err).splitlines()[0]}")
        return f"no usable CUDA GPU ({text})"


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items:
        return
    reason = gpu_unavailable_reason()
    if reason:
        skip = pytest.mark.skip(reason=reason)
        for item in gpu_items:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def evaluator():
    """The GPU worker process, one per test module, for the tests marked gpu."""
    from autotune.gpu.evaluator import GpuEvaluator

    with GpuEvaluator() as ev:
        yield ev


class SyntheticEvaluator(Evaluator):
    """Answers like the GPU worker, from a cost function of the config's defines; no GPU.

    `cost(defines) -> float | Status` gives a time in ms, or the status of a failure.
    """

    def __init__(self, cost, name: str = "Synthetic GPU") -> None:
        self.device = DeviceInfo(name=name, compute_capability="9.0", sm_count=132)
        self.limits = DeviceLimits()
        self.protocol = TIMING_PROTOCOL
        self.cost = cost
        self.jobs = []
        self.tasks = []
        self.cudnn_ms: float | None = 2.0  # None: as if PyTorch were missing
        self.cublas_ms: float | None = 4.0  # None: as if CuPy had no cuBLAS

    def call(self, task, timeout_s: float):
        """Ceilings and library baselines, answered with fixed synthetic figures."""
        from autotune.gpu.library_tasks import (
            BaselineResult,
            Ceiling,
            CublasGemm,
            CudnnConv,
            MeasureCeilings,
        )

        self.tasks.append(task)
        if isinstance(task, MeasureCeilings):
            return [
                Ceiling(name, value, unit, "synthetic", (1.0,))
                for name, value, unit in (
                    ("fma_peak", 64700.0, "GFlop/s"),
                    ("copy_bandwidth", 2990.0, "GB/s"),
                    ("sgemm", 51300.0, "GFlop/s"),
                    ("tc_peak_tf32", 429000.0, "GFlop/s"),
                    ("tc_peak_bf16", 787000.0, "GFlop/s"),
                    ("tc_peak_fp16", 785000.0, "GFlop/s"),
                )
                if name in task.names
            ]
        if isinstance(task, CudnnConv):
            if self.cudnn_ms is None:
                return BaselineResult(
                    Measurement(Status.LAUNCH_ERROR, error="PyTorch is not importable"),
                    available=False,
                )
            readings = _readings(task.check.timing.observe, self.cudnn_ms)
            return BaselineResult(
                Measurement.from_samples([self.cudnn_ms] * 3, **readings), "synthetic_algo", "9.19"
            )
        if isinstance(task, CublasGemm):
            if self.cublas_ms is None:
                return BaselineResult(
                    Measurement(Status.LAUNCH_ERROR, error="cuBLAS unavailable"), available=False
                )
            return BaselineResult(
                Measurement.from_samples([self.cublas_ms] * 3), "synthetic_gemm", "130000"
            )
        return self.evaluate(task, timeout_s)

    def evaluate(self, job, timeout_s: float) -> Measurement:
        self.jobs.append(job)
        result = self.cost(dict(job.plan.defines))
        if isinstance(result, Status):
            return Measurement(result, error=f"synthetic {result.value}")
        readings = _readings(job.check.timing.observe, result)
        return Measurement.from_samples([result, result * 1.01, result * 0.99], **readings)

    def close(self) -> None:
        pass


@pytest.fixture
def synthetic_evaluator():
    def cost(d):
        if d["BLOCK_X"] * d["BLOCK_Y"] == 512:
            return Status.WRONG_RESULT
        return 1.0 + abs(d["BLOCK_X"] - 32) / 32 + abs(d["BLOCK_Y"] - 4) / 4 + d["FILTER_IN_CONST"]

    return SyntheticEvaluator(cost)


@pytest.fixture(scope="module")
def compiler():
    """NVRTC for sm_90 (no GPU needed); the family tests skip where NVRTC cannot load."""
    from autotune.gpu.compiler import Compiler
    from autotune.gpu.nvrtc_library import CompilerUnavailable, nvrtc_version

    try:
        nvrtc_version()
    except CompilerUnavailable as err:
        pytest.skip(str(err))
    return Compiler(arch="sm_90")
