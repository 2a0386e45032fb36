"""On a CUDA device: tc_implicit_gemm correct through the project's GPU path at odd shapes
(channels that are not whole 16-byte chunks, N = 1, 7, 13, 37, batches of 1 and 3, strides 2 and
4, F not a multiple of 8) for every dtype it computes, including split-K and the element-wise
gather, within the dtype's tolerance against the float64 reference over the stored inputs."""

from __future__ import annotations

import random

import pytest

from autotune.families import get_family
from autotune.gpu.compiler import Compiler
from autotune.gpu.session import TimingPolicy
from autotune.model.problem import ConvProblem
from autotune.store import Store
from autotune.tuning.runners import GpuRunner
from autotune.tuning.studies import plan_studies
from autotune.tuning.tuner import Tuner
from tests.gpu_checks import failures

pytestmark = pytest.mark.gpu

QUICK = TimingPolicy(warmup=1, min_repeats=2, min_time_s=0.0, max_repeats=3, max_time_s=0.5)
FAMILY = get_family("tc_implicit_gemm")
SHAPES = [
    dict(N=7, K=3, C=5, F=10, B=3),
    dict(N=13, K=11, C=3, F=100, B=1, stride=4),
    dict(N=37, K=5, C=12, F=10, B=3, stride=2),
    dict(N=1, K=1, C=96, F=7, B=1),
    dict(N=13, K=3, C=64, F=100, B=3, stride=2),
    dict(N=37, K=3, C=3, F=64, B=1, stride=1),
]


@pytest.fixture(scope="module")
def tuner(evaluator, tmp_path_factory):
    path = tmp_path_factory.mktemp("gpu_tc_implicit_gemm") / "gpu.db"
    compiler = Compiler(arch=evaluator.device.arch)
    return Tuner(GpuRunner(compiler, evaluator), Store(str(path)), strategy="random", timing=QUICK)


@pytest.mark.parametrize("dtype", FAMILY.dtypes)
def test_correct_at_odd_shapes(dtype, tuner, evaluator):
    problems = [ConvProblem(**s, dtype=dtype, layout="NHWC") for s in SHAPES]
    studies, skipped = plan_studies([(FAMILY, p) for p in problems], evaluator.limits)
    assert len(studies) == len(problems), skipped
    rng = random.Random(dtype)
    picks = []
    for study in studies:
        configs = list(study.space.configs)
        split = [c for c in configs if int(c["SPLIT_K"]) > 1]
        big = [c for c in configs if int(c["BM"]) * int(c["BN"]) >= 128 * 64]
        for pool in (configs, split, big):
            picks += [(study, c) for c in rng.sample(pool, min(1, len(pool)))]
    failed = failures(tuner, picks, QUICK.min_repeats)
    assert not failed, "\n".join(failed)
