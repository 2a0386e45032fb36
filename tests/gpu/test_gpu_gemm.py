"""On a CUDA device: sgemm correct at odd GEMM shapes, the GEMM reference, the cuBLAS baseline."""

from __future__ import annotations

import random

import numpy as np
import pytest

from autotune.families import gemm, get_family
from autotune.gpu.compiler import Compiler
from autotune.gpu.session import Check, TimingPolicy
from autotune.model.problem import GemmProblem
from autotune.model.records import Status
from autotune.model.space import Config
from autotune.store import Store
from autotune.tuning.runners import GpuRunner
from autotune.tuning.studies import plan_studies
from autotune.tuning.tuner import Tuner
from tests.gpu_checks import failures

pytestmark = pytest.mark.gpu

QUICK = TimingPolicy(warmup=1, min_repeats=2, min_time_s=0.0, max_repeats=3, max_time_s=0.5)

# Odd sizes: no dimension a multiple of any tile; a single row (GEMV-like); a single column;
# K shorter than one step; and an aligned shape where VEC = 4 and split K are possible.
ODD_SHAPES = [
    GemmProblem(M=37, N=61, K=29),
    GemmProblem(M=1, N=1000, K=4096),
    GemmProblem(M=129, N=257, K=65),
    GemmProblem(M=3, N=1, K=5),
    GemmProblem(M=200, N=96, K=3),
    GemmProblem(M=256, N=512, K=1024),
]
FIXED = [  # the SGEMM-class configuration and its split-K and single-buffer variants
    dict(BM=128, BN=128, BK=8, TM=8, TN=8, VEC=4, DOUBLE_BUFFER=1, SPLIT_K=1, WARP_TX=16),
    dict(BM=128, BN=128, BK=16, TM=8, TN=8, VEC=4, DOUBLE_BUFFER=1, SPLIT_K=4, WARP_TX=8),
    dict(BM=64, BN=128, BK=8, TM=8, TN=4, VEC=4, DOUBLE_BUFFER=0, SPLIT_K=2, WARP_TX=32),
]


@pytest.fixture(scope="module")
def tuner(evaluator, tmp_path_factory):
    path = tmp_path_factory.mktemp("gpu_gemm") / "gpu.db"
    compiler = Compiler(arch=evaluator.device.arch)
    return Tuner(GpuRunner(compiler, evaluator), Store(str(path)), strategy="random", timing=QUICK)


def test_sgemm_correct_on_random_configs_at_odd_shapes(tuner, evaluator):
    family = get_family("sgemm")
    studies, skipped = plan_studies([(family, p) for p in ODD_SHAPES], evaluator.limits)
    assert len(studies) == len(ODD_SHAPES), skipped
    rng = random.Random(11)
    picks = []
    for study in studies:
        configs = rng.sample(study.space.configs, min(8, len(study.space)))
        configs += [
            Config.of({**values, "MIN_BLOCKS": 2})
            for values in FIXED
            if study.space.is_valid(Config.of({**values, "MIN_BLOCKS": 2}))
        ]
        picks += [(study, config) for config in configs]
    failed = failures(tuner, picks, QUICK.min_repeats)
    assert not failed, "\n".join(failed)


def test_split_k_records_its_scratch_bytes(tuner, evaluator):
    family = get_family("sgemm")
    problem = GemmProblem(M=256, N=512, K=1024)
    [study], _ = plan_studies([(family, problem)], evaluator.limits)
    config = Config.of({**FIXED[1], "MIN_BLOCKS": 2})
    m = tuner.evaluate(study, config)
    assert m.status is Status.OK, m.error
    assert m.scratch_bytes == 4 * 4 * 256 * 512


def test_gemm_reference_matches_numpy(evaluator, tmp_path):
    import cupy as cp

    problem = GemmProblem(M=37, N=61, K=29)
    plan = gemm.reference_plan(problem)
    compiled = Compiler(arch=evaluator.device.arch).compile(plan)
    rng = np.random.default_rng(0)
    a = rng.standard_normal(problem.a_shape).astype(np.float32)
    b = rng.standard_normal(problem.b_shape).astype(np.float32)
    path = tmp_path / "reference_gemm.cubin"
    path.write_bytes(compiled.cubin)
    module = cp.RawModule(path=str(path))
    c = cp.empty(problem.c_shape, dtype=cp.float64)
    launch = plan.launches[0]
    module.get_function("reference_gemm")(
        launch.grid, launch.block, (cp.asarray(a), cp.asarray(b), c)
    )
    result = c.get()
    np.testing.assert_allclose(result, gemm.reference_numpy(problem, a, b), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "problem", [GemmProblem(M=37, N=61, K=29), GemmProblem(M=1, N=1000, K=4096)]
)
def test_cublas_baseline_is_checked_and_timed(evaluator, problem):
    from autotune.gpu.library_tasks import CublasGemm

    ref_plan = gemm.reference_plan(problem)
    ref = Compiler(arch=evaluator.device.arch).compile(ref_plan)
    check = Check(gemm.buffers(problem), ref_plan, ref.cubin, ref.key, 1e-5, QUICK, seed=3)
    task = CublasGemm(problem, check)
    result = evaluator.call(task, timeout_s=300)
    m = result.measurement
    assert m.status is Status.OK, m.error
    assert m.rel_error <= 1e-5 and m.time_ms > 0
    assert result.version and "TF32=0" in result.algorithm
