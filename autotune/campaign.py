"""Once per device and shape: measure the device ceilings and the library baselines, and store
them beside the tuned results."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable

from autotune import KERNELS_DIR
from autotune.baselines import BaselineResult, Ceiling, CudnnConv, MeasureCeilings
from autotune.compiler import Compiler
from autotune.device import TimingPolicy
from autotune.evaluator import Evaluator
from autotune.families import conv2d
from autotune.problem import ConvProblem
from autotune.records import Measurement
from autotune.store import Store

CEILING_NAMES = ("fma_peak", "copy_bandwidth", "sgemm")
TASK_TIMEOUT_S = 300.0  # cuDNN's algorithm search at a large shape takes a while
CUDNN = "cudnn"


def ensure_ceilings(
    evaluator: Evaluator,
    compiler: Compiler,
    store: Store,
    device_id: int,
    timing: TimingPolicy,
    remeasure: bool = False,
) -> list[Ceiling] | Measurement | None:
    """Measure and store the ceilings unless this device has them all (None then)."""
    stored = store.ceilings(device=evaluator.device.name)
    if not remeasure and set(CEILING_NAMES) <= set(stored["name"]):
        return None
    fma = compiler.compile_source(KERNELS_DIR / "ceiling_fma.cu", ())
    result = evaluator.call(MeasureCeilings(fma.cubin, timing), TASK_TIMEOUT_S)
    if isinstance(result, Measurement):
        return result
    for c in result:
        store.record_ceiling(device_id, c.name, c.value, c.unit, c.detail, c.samples_ms)
    return result


def measure_baselines(
    evaluator: Evaluator,
    compiler: Compiler,
    store: Store,
    device_id: int,
    problems: Iterable[ConvProblem],
    timing: TimingPolicy,
    remeasure: bool = False,
    on_result: Callable[[ConvProblem, BaselineResult | None], None] | None = None,
) -> list[tuple[ConvProblem, BaselineResult]]:
    """cuDNN on every problem not measured yet on this device. Stops early (and says so through
    the result's error) when the library is missing, rather than failing every shape."""
    done = []
    for problem in dict.fromkeys(problems):
        if not remeasure and store.has_baseline(device_id, CUDNN, problem):
            if on_result:
                on_result(problem, None)
            continue
        ref_plan = conv2d.reference_plan(problem)
        ref = compiler.compile(ref_plan)
        task = CudnnConv(
            problem,
            conv2d.buffers(problem),
            ref_plan,
            ref.cubin,
            ref.key,
            1e-5,
            timing,
            seed=zlib.crc32(f"cudnn|{problem.key}".encode()),
        )
        result = evaluator.call(task, TASK_TIMEOUT_S)
        if isinstance(result, Measurement):  # the worker hung or died
            result = BaselineResult(result)
        done.append((problem, result))
        if on_result:
            on_result(problem, result)
        if not result.available:
            break
        store.record_baseline(
            device_id,
            CUDNN,
            problem,
            result.algorithm,
            result.version,
            result.measurement,
            problem.flops,
        )
    return done


def library_missing(results: list[tuple[ConvProblem, BaselineResult]]) -> str | None:
    """Why no baseline could be measured at all, or None."""
    return next((r.measurement.error for _, r in results if not r.available), None)
