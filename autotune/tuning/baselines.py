"""Once per device and shape: measure the device ceilings and the library baselines, and store
them beside the tuned results."""

from __future__ import annotations

import sys
import zlib
from collections.abc import Callable, Iterable

from autotune import package_path
from autotune.families import conv2d, gemm
from autotune.gpu.compiler import Compiler
from autotune.gpu.jobs import Check
from autotune.gpu.library_tasks import (
    CEILING_NAMES,
    TENSOR_CORE_CEILINGS,
    BaselineResult,
    Ceiling,
    CublasGemm,
    CudnnConv,
    MeasureCeilings,
    wgmma_defines,
)
from autotune.gpu.timing import TimingPolicy
from autotune.model.evaluator import Evaluator
from autotune.model.kinds import library_of
from autotune.model.observe import ENERGY_J, POWER_W, SM_CLOCK_MHZ, Observe
from autotune.model.problem import Problem
from autotune.model.records import Measurement
from autotune.store import Store

# Shipped beside this module: a ceiling is part of the package, not of a family.
CEILING_FMA_SOURCE = package_path("autotune.gpu", "ceiling_fma.cu")
CEILING_WGMMA_SOURCE = package_path("autotune.gpu", "ceiling_wgmma.cu")
WGMMA_TARGET = "sm_90a"  # wgmma's only target: its cubin runs on compute capability 9.0 alone
TASK_TIMEOUT_S = 300.0  # cuDNN's algorithm search at a large shape takes a while
FP32_TOLERANCE = 1e-5  # a library without a dtype (cuBLAS SGEMM): FP32's


def baseline_library(problem: Problem) -> str | None:
    """The library measured as the baseline of a problem's kind, or None (conv3d has none; nor
    has a convolution with a fused epilogue: cuDNN's forward convolution applies none, so its
    output would fail that problem's check)."""
    if getattr(problem, "epilogue", ""):
        return None
    return library_of(problem.kind)


def missing_ceilings(
    stored_names: Iterable[str], remeasure: bool = False, only: Iterable[str] = ()
) -> tuple[str, ...]:
    """The ceilings to measure on a device that has `stored_names`: all of them (or those in
    `only`) to remeasure, else those it lacks (a device measured before the tensor-core peaks
    gets only those)."""
    have = set() if remeasure else set(stored_names)
    wanted = set(only) or set(CEILING_NAMES)
    return tuple(name for name in CEILING_NAMES if name in wanted and name not in have)


def ensure_ceilings(
    evaluator: Evaluator,
    compiler: Compiler,
    store: Store,
    device_id: int,
    timing: TimingPolicy,
    remeasure: bool = False,
    say: Callable[[str], None] | None = None,
    only: Iterable[str] = (),
) -> list[Ceiling] | Measurement | None:
    """Measure and store the ceilings this device lacks, or with `remeasure` all of them, either
    restricted to `only` when it names some (None when there is nothing to measure). The
    tensor-core peaks are our own wgmma loop's on sm_90 (compiled here, one cubin per dtype
    asked), cuBLAS's GEMM through PyTorch elsewhere; those the worker could not measure for want
    of PyTorch are said (to stderr unless `say` is given) and left missing, so a later run with
    PyTorch measures them."""
    stored = store.ceilings(device=evaluator.device.name)
    names = missing_ceilings(stored["name"], remeasure, only)
    if not names:
        return None
    fma = compiler.compile_source(CEILING_FMA_SOURCE, ())
    task = MeasureCeilings(fma.cubin, timing, names, wgmma_cubins(compiler, names))
    result = evaluator.call(task, TASK_TIMEOUT_S)
    if isinstance(result, Measurement):
        return result
    for c in result:
        store.record_ceiling(device_id, c.name, c.value, c.unit, c.detail, c.samples_ms)
    skipped = [n for n in names if n in TENSOR_CORE_CEILINGS and n not in {c.name for c in result}]
    if skipped:
        text = (
            f"autotune: tensor-core ceilings not measured ({', '.join(skipped)}): off sm_90 they "
            "are cuBLAS's GEMM through PyTorch, which is not importable in the GPU worker; the "
            "other ceilings are measured"
        )
        (say or say_on_stderr)(text)
    return result


def wgmma_cubins(compiler: Compiler, names: Iterable[str]) -> dict[str, bytes]:
    """The wgmma loop's cubin for each tensor-core ceiling in `names`, by dtype, where the
    compiler targets sm_90 (the loop's sm_90a); none elsewhere, where cuBLAS measures them."""
    if compiler.target(arch_specific=True) != WGMMA_TARGET:
        return {}
    return {
        dtype: compiler.compile_source(
            CEILING_WGMMA_SOURCE, wgmma_defines(dtype), arch_specific=True
        ).cubin
        for name, dtype in TENSOR_CORE_CEILINGS.items()
        if name in names
    }


def say_on_stderr(text: str) -> None:
    print(text, file=sys.stderr)


def measure_baselines(
    evaluator: Evaluator,
    compiler: Compiler,
    store: Store,
    device_id: int,
    problems: Iterable[Problem],
    timing: TimingPolicy,
    remeasure: bool = False,
    on_result: Callable[[Problem, BaselineResult | None], None] | None = None,
) -> list[tuple[Problem, BaselineResult]]:
    """Its kind's library (cuDNN for conv2d, cuBLAS for gemm) on every problem not measured yet
    on this device; kinds without a library are passed over. Once a library turns out missing,
    its remaining shapes are not tried (its first result's error says why)."""
    done = []
    missing: set[str] = set()
    for problem in dict.fromkeys(problems):
        library = baseline_library(problem)
        if library is None or library in missing:
            continue
        if not remeasure and store.has_baseline(device_id, library, problem):
            if on_result:
                on_result(problem, None)
            continue
        task = _baseline_task(compiler, problem, timing)
        result = evaluator.call(task, TASK_TIMEOUT_S)
        if isinstance(result, Measurement):  # the worker hung or died
            result = BaselineResult(result)
        done.append((problem, result))
        if on_result:
            on_result(problem, result)
        if not result.available:
            missing.add(library)
            continue
        store.record_baseline(
            device_id,
            library,
            problem,
            result.algorithm,
            result.version,
            result.measurement,
            problem.flops,
        )
    return done


def _baseline_task(compiler: Compiler, problem: Problem, timing: TimingPolicy):
    """The worker task measuring a problem's library, with its float64 reference compiled."""
    shared = conv2d if problem.kind == "conv2d" else gemm
    ref_plan = shared.reference_plan(problem)  # type: ignore[arg-type]
    ref = compiler.compile(ref_plan)
    task = CudnnConv if problem.kind == "conv2d" else CublasGemm
    check = Check(
        shared.buffers(problem),  # type: ignore[arg-type]
        ref_plan,
        ref.cubin,
        ref.key,
        baseline_tolerance(problem),
        timing,
        seed=zlib.crc32(f"{baseline_library(problem)}|{problem.key}".encode()),
    )
    return task(problem, check)  # type: ignore[arg-type]


def baseline_tolerance(problem: Problem) -> float:
    """The relative L2 error a library's output must stay within: its dtype's tolerance for a
    convolution (cuDNN runs in the problem's dtype), FP32's for the rest."""
    precision = getattr(problem, "precision", None)
    return precision.tolerance if precision is not None else FP32_TOLERANCE


def library_missing(results: list[tuple[Problem, BaselineResult]]) -> str | None:
    """Why no baseline could be measured at all, or None."""
    return next((r.measurement.error for _, r in results if not r.available), None)


def library_name(problem: Problem) -> str:
    """How messages name the library a problem is compared with ("" for none)."""
    from autotune.model.kinds import KIND_SPECS

    return KIND_SPECS[problem.kind].library_label or ""


def ceiling_text(ceilings) -> str:
    return ", ".join(f"{c.name} {c.value:,.0f} {c.unit}" for c in ceilings)


def readings_text(m: Measurement) -> str:
    """A measurement's power, energy a run and mean SM clock as a message's tail ("" where the
    device was not observed)."""
    seen = m.observed
    shown = ((POWER_W, ".0f", "W"), (ENERGY_J, ".4g", "J a run"), (SM_CLOCK_MHZ, ".0f", "MHz"))
    parts = [f"{seen[name]:{spec}} {unit}" for name, spec, unit in shown if name in seen]
    return f" ({', '.join(parts)})" if parts else ""


def measure_ceilings(
    evaluator: Evaluator,
    compiler: Compiler,
    store: Store,
    device_id: int,
    say: Callable[[str], None],
) -> None:
    """Measure the ceilings this device lacks (once per device, seconds), saying what was
    measured or why nothing was."""
    ceilings = ensure_ceilings(evaluator, compiler, store, device_id, TimingPolicy(), say=say)
    if ceilings is not None and not isinstance(ceilings, list):
        say(f"autotune: ceilings not measured: {ceilings.error}")
    elif ceilings:
        say("autotune: measured " + ceiling_text(ceilings))


def ceilings_and_baselines(
    evaluator: Evaluator,
    compiler: Compiler,
    store: Store,
    device_id: int,
    problems: Iterable[Problem],
    say: Callable[[str], None] | None = None,
    observe: Observe | None = None,
) -> None:
    """Measure what this device lacks: its ceilings once, each shape's library once (cuDNN for a
    convolution, cuBLAS for a GEMM), saying each result (to stderr unless `say` is given); the
    libraries observed as `observe` asks (`autotune run --observe`)."""
    say = say or say_on_stderr
    measure_ceilings(evaluator, compiler, store, device_id, say)

    def report(problem, result) -> None:
        if result is None or not result.available:
            return
        m = result.measurement
        if m.status.ok:
            text = f"{m.gflops(problem.flops):,.1f} GFlop/s" + readings_text(m)
        else:
            text = f"{m.status.value}: {m.error.splitlines()[0] if m.error else ''}"
        say(f"autotune: {library_name(problem)} {problem.key}: {text}")

    timing = TimingPolicy(observe=observe)
    results = measure_baselines(
        evaluator, compiler, store, device_id, problems, timing, on_result=report
    )
    for problem, result in results:
        if not result.available:
            text = result.measurement.error
            say(f"autotune: no {library_name(problem)} baseline ({text}); going on without")
