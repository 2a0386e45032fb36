"""On a CUDA device: every family correct at odd shapes, the reference, and the fault cases."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from autotune.cli.options import family_precisions
from autotune.families import FAMILIES, conv2d
from autotune.families.plan import KernelPlan, Launch, cdiv
from autotune.gpu.compiler import Compiler
from autotune.gpu.session import Check, Job, TimingPolicy
from autotune.model.problem import ConvProblem
from autotune.model.records import Status
from autotune.model.shapes import in_precisions
from autotune.store import Store
from autotune.tuning.runners import GpuRunner
from autotune.tuning.studies import plan_studies
from autotune.tuning.tuner import Tuner
from tests.gpu_checks import failures

pytestmark = pytest.mark.gpu

QUICK = TimingPolicy(warmup=1, min_repeats=2, min_time_s=0.0, max_repeats=3, max_time_s=0.5)

# Odd sizes: N not a multiple of any tile; small and large channel counts; batch and stride.
ODD_SHAPES = [
    ConvProblem(N=37, K=3, C=1, F=3),
    ConvProblem(N=61, K=5, C=1, F=17),
    ConvProblem(N=1000, K=7, C=1, F=2),
    ConvProblem(N=130, K=1, C=1, F=64, B=2),
    ConvProblem(N=29, K=5, C=7, F=9),
    ConvProblem(N=33, K=3, C=64, F=70, B=3),
    ConvProblem(N=13, K=11, C=3, F=20, stride=4, B=2),
]


@pytest.fixture(scope="module")
def tuner(evaluator, tmp_path_factory):
    path = tmp_path_factory.mktemp("gpu") / "gpu.db"
    compiler = Compiler(arch=evaluator.device.arch)
    return Tuner(GpuRunner(compiler, evaluator), Store(str(path)), strategy="random", timing=QUICK)


CONV2D_FAMILIES = [name for name, f in FAMILIES.items() if f.problem_type is ConvProblem]


@pytest.mark.parametrize("family_name", CONV2D_FAMILIES)
def test_family_correct_on_random_configs_at_odd_shapes(family_name, tuner, evaluator):
    family = FAMILIES[family_name]
    # In the dtypes and layouts the family is tuned in (a tensor-core family's own, not fp32).
    problems = in_precisions(ODD_SHAPES, *family_precisions(family))
    studies, _ = plan_studies([(family, p) for p in problems], evaluator.limits)
    assert studies, f"{family_name} supports none of the odd shapes"
    rng = random.Random(7)
    picks = [
        (study, config)
        for study in studies
        for config in rng.sample(study.space.configs, min(6, len(study.space)))
    ]
    failed = failures(tuner, picks, QUICK.min_repeats)
    assert not failed, "\n".join(failed)


def test_gpu_reference_matches_numpy(evaluator):
    import cupy as cp

    problem = ConvProblem(N=9, K=3, C=5, F=4, B=2, stride=2)
    compiled = Compiler(arch=evaluator.device.arch).compile(conv2d.reference_plan(problem))
    rng = np.random.default_rng(0)
    x = rng.standard_normal(problem.input_shape).astype(np.float32)
    w = rng.standard_normal(problem.filter_shape).astype(np.float32)
    module = cp.RawModule(path=_write(compiled.cubin))
    y = cp.empty(problem.output_shape, dtype=cp.float64)
    launch = conv2d.reference_plan(problem).launches[0]
    module.get_function("reference_conv2d")(
        launch.grid, launch.block, (cp.asarray(x), cp.asarray(w), y)
    )
    np.testing.assert_allclose(
        y.get(), conv2d.reference_numpy(problem, x, w), rtol=1e-12, atol=1e-12
    )


def _write(cubin: bytes) -> str:
    import tempfile

    fd, path = tempfile.mkstemp(suffix=".cubin")
    Path(path).write_bytes(cubin)
    return path


FAULTY = Path(__file__).parents[1] / "data" / "faulty.cu"


FAULT_PROBLEM = ConvProblem(N=17, K=3, C=2, F=3)


def _faulty_job(evaluator, kernel: str, problem: ConvProblem = FAULT_PROBLEM) -> Job:
    compiler = Compiler(arch=evaluator.device.arch)
    ref_plan = conv2d.reference_plan(problem)
    outputs = problem.B * problem.F * problem.N * problem.N
    plan = KernelPlan(
        FAULTY,
        ref_plan.defines,
        (Launch(kernel, (cdiv(outputs, 128), 1, 1), (128, 1, 1), ("x", "w", "y")),),
    )
    ref = compiler.compile(ref_plan)
    check = Check(conv2d.buffers(problem), ref_plan, ref.cubin, ref.key, 1e-5, QUICK, seed=1)
    return Job(kernel, plan, compiler.compile(plan).cubin, check)


def test_wrong_result_is_caught(evaluator):
    m = evaluator.evaluate(_faulty_job(evaluator, "zeros"), timeout_s=60)
    assert m.status is Status.WRONG_RESULT and m.rel_error == pytest.approx(1.0)


def test_unwritten_output_is_caught_by_the_nan_poison(evaluator):
    m = evaluator.evaluate(_faulty_job(evaluator, "skip_last"), timeout_s=60)
    assert m.status is Status.WRONG_RESULT


def test_illegal_address_is_a_crash_and_the_worker_recovers(evaluator):
    before = evaluator.restarts
    m = evaluator.evaluate(_faulty_job(evaluator, "out_of_bounds"), timeout_s=60)
    assert m.status is Status.CRASH
    assert "ILLEGALADDRESS" in m.error.upper().replace("_", ""), m.error
    assert evaluator.restarts == before + 1
    assert evaluator.evaluate(_faulty_job(evaluator, "zeros"), 60).status is Status.WRONG_RESULT


def test_hung_kernel_times_out_and_the_worker_recovers(evaluator):
    m = evaluator.evaluate(_faulty_job(evaluator, "spin"), timeout_s=5)
    assert m.status is Status.TIMEOUT
    assert evaluator.evaluate(_faulty_job(evaluator, "zeros"), 60).status is Status.WRONG_RESULT


def test_launch_error_is_recorded_not_raised(evaluator):
    job = _faulty_job(evaluator, "zeros")
    bad = Launch("zeros", (1, 1, 1), (2048, 1, 1), ("x", "w", "y"))  # over 1024 threads
    job = Job(
        job.label, KernelPlan(job.plan.source, job.plan.defines, (bad,)), job.cubin, job.check
    )
    m = evaluator.evaluate(job, timeout_s=60)
    assert m.status is Status.LAUNCH_ERROR and m.error


def test_ceilings_are_measured_and_plausible(evaluator):
    from autotune.gpu.library_tasks import MeasureCeilings
    from autotune.tuning.baselines import CEILING_FMA_SOURCE

    fma = Compiler(arch=evaluator.device.arch).compile_source(CEILING_FMA_SOURCE, ())
    result = evaluator.call(MeasureCeilings(fma.cubin, QUICK), timeout_s=300)
    assert isinstance(result, list), result
    values = {c.name: c.value for c in result}
    # Loose sanity bounds for any recent data-centre GPU: the point is that they are measured.
    assert 1_000 < values["fma_peak"] < 500_000
    assert 100 < values["copy_bandwidth"] < 50_000
    assert 1_000 < values["sgemm"] <= values["fma_peak"] * 1.05


def test_cudnn_baseline_is_checked_and_timed(evaluator):
    pytest.importorskip("torch")
    from autotune.gpu.library_tasks import CudnnConv

    problem = ConvProblem(N=29, K=5, C=7, F=9, B=2, stride=2)
    ref_plan = conv2d.reference_plan(problem)
    ref = Compiler(arch=evaluator.device.arch).compile(ref_plan)
    check = Check(conv2d.buffers(problem), ref_plan, ref.cubin, ref.key, 1e-5, QUICK, seed=3)
    task = CudnnConv(problem, check)
    result = evaluator.call(task, timeout_s=300)
    m = result.measurement
    assert m.status is Status.OK, m.error
    assert m.rel_error <= 1e-5 and m.time_ms > 0
    assert result.version and result.algorithm


def test_device_limits_are_the_devices(evaluator):
    limits = evaluator.limits
    assert limits.MAX_THREADS == 1024 and limits.WARP_SIZE == 32
    assert 48 * 1024 <= limits.SMEM_PER_BLOCK <= limits.SMEM_PER_BLOCK_OPTIN < 1024 * 1024
    assert limits.CONST_BYTES == 64 * 1024
    assert limits.REGS_PER_BLOCK == 64 * 1024
    assert limits.SM_COUNT == evaluator.device.sm_count
