"""On a CUDA device: winograd correct at odd shapes for every output tile (N not a multiple of m,
odd C and F, batches of 1 and 3), within the FP32 tolerance."""

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
FAMILY = get_family("winograd")
ODD_SHAPES = [
    ConvProblem(N=37, K=3, C=1, F=3),
    ConvProblem(N=7, K=3, C=5, F=9, B=3),
    ConvProblem(N=13, K=3, C=3, F=1, B=3),
    ConvProblem(N=15, K=3, C=17, F=33),
    ConvProblem(N=30, K=3, C=65, F=70, B=3),
    ConvProblem(N=1, K=3, C=9, F=7, B=1),
]


@pytest.fixture(scope="module")
def tuner(evaluator, tmp_path_factory):
    path = tmp_path_factory.mktemp("gpu_winograd") / "gpu.db"
    compiler = Compiler(arch=evaluator.device.arch)
    return Tuner(GpuRunner(compiler, evaluator), Store(str(path)), strategy="random", timing=QUICK)


@pytest.mark.parametrize("m", [2, 4, 5, 6])
def test_every_tile_correct_at_odd_shapes(m, tuner, evaluator):
    studies, skipped = plan_studies([(FAMILY, p) for p in ODD_SHAPES], evaluator.limits)
    assert len(studies) == len(ODD_SHAPES), skipped
    rng = random.Random(m)
    picks = []
    for study in studies:
        configs = [c for c in study.space.configs if int(c["OUT_TILE"]) == m]
        picks += [(study, c) for c in rng.sample(configs, min(2, len(configs)))]
    failed = failures(tuner, picks, QUICK.min_repeats)
    assert not failed, "\n".join(failed)
