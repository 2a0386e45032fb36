"""On a CUDA device: conv3d correct on random configurations at odd 3D shapes, and its reference."""

from __future__ import annotations

import random

import numpy as np
import pytest

from autotune.families import get_family
from autotune.families.conv3d import reference_numpy, tile_bytes
from autotune.gpu.compiler import Compiler
from autotune.gpu.session import TimingPolicy
from autotune.model.problem import Conv3dProblem
from autotune.model.space import Config
from autotune.store import Store
from autotune.tuning.runners import GpuRunner
from autotune.tuning.studies import plan_studies
from autotune.tuning.tuner import Tuner
from tests.gpu_checks import failures

pytestmark = pytest.mark.gpu

QUICK = TimingPolicy(warmup=1, min_repeats=2, min_time_s=0.0, max_repeats=3, max_time_s=0.5)
FAMILY = get_family("conv3d")

# No side a multiple of any tile; thin and single-output shapes; a filter flat along one axis.
ODD_SHAPES = [
    Conv3dProblem(D=37, R=29, Cc=41, Kd=3, Kr=5, Kc=3),
    Conv3dProblem(D=9, R=9, Cc=9, Kd=9, Kr=9, Kc=9),
    Conv3dProblem(D=20, R=33, Cc=70, Kd=1, Kr=1, Kc=7),
    Conv3dProblem(D=70, R=13, Cc=131, Kd=5, Kr=5, Kc=5),
]
BLOG = Conv3dProblem(D=256, R=128, Cc=128, Kd=5, Kr=5, Kc=5)
HALF_ALIGNED = Conv3dProblem(D=40, R=21, Cc=68, Kd=3, Kr=3, Kc=3)
# The blog's fastest kernel, and tiles past 48 KB of shared memory (dynamic, opted in), on the
# blog's shape and on an odd one.
CHOSEN = [
    (BLOG, dict(TILE_X=32, TILE_Y=16, TILE_Z=1, COARSEN=4, COARSEN_AXIS=2, VEC=1, USE_SMEM=1)),
    (BLOG, dict(TILE_X=32, TILE_Y=8, TILE_Z=1, COARSEN=8, COARSEN_AXIS=2, VEC=4, USE_SMEM=1)),
    (
        ODD_SHAPES[3],
        dict(TILE_X=32, TILE_Y=8, TILE_Z=1, COARSEN=4, COARSEN_AXIS=2, VEC=4, USE_SMEM=1),
    ),
]
CHOSEN = [(problem, dict(values, RING=0)) for problem, values in CHOSEN]
RING = dict(
    TILE_X=32, TILE_Y=8, TILE_Z=1, COARSEN=4, COARSEN_AXIS=1, VEC=2, USE_SMEM=1, Z_STEPS=8, RING=1
)
# The depth ring: the blog's shape (float2 and float4 columns, shared memory past 48 KB, a last
# walk shorter than the ring), odd shapes (unaligned rows and columns, 1-float copies, walks too
# short to fill the ring, a filter one deep) and the 7^3 cube.
RING_WALKS = [
    (BLOG, RING),
    (BLOG, dict(RING, TILE_Y=16, Z_STEPS=12)),
    (BLOG, dict(RING, COARSEN=1, COARSEN_AXIS=2, VEC=4, TILE_Y=16, Z_STEPS=48)),
    (BLOG, dict(RING, COARSEN=4, COARSEN_AXIS=0, VEC=1, TILE_Y=16, Z_STEPS=6)),
    (ODD_SHAPES[3], dict(RING, TILE_Y=4, COARSEN=2, VEC=2, Z_STEPS=8)),
    (ODD_SHAPES[3], dict(RING, COARSEN=1, COARSEN_AXIS=2, VEC=4, Z_STEPS=6)),
    (ODD_SHAPES[0], dict(RING, TILE_X=16, COARSEN=2, Z_STEPS=4)),
    (ODD_SHAPES[0], dict(RING, TILE_X=8, TILE_Y=4, COARSEN=2, COARSEN_AXIS=0, VEC=1, Z_STEPS=16)),
    (ODD_SHAPES[2], dict(RING, TILE_Y=4, COARSEN=2, Z_STEPS=6)),
    (
        Conv3dProblem(D=128, R=128, Cc=128, Kd=7, Kr=7, Kc=7),
        dict(RING, TILE_Y=8, COARSEN=2, VEC=1, Z_STEPS=12),
    ),
    # 66 output columns: rows of 4 stored as float2 pairs, with and without the ring.
    (HALF_ALIGNED, dict(RING, TILE_Y=4, COARSEN=2, VEC=4, Z_STEPS=6)),
    (HALF_ALIGNED, dict(RING, TILE_Y=4, TILE_Z=2, COARSEN=2, VEC=4, Z_STEPS=2, RING=0)),
]
# Blocks walking 1, 2, 3 (a partial last walk) or 8 depth tiles, double-buffered.
WALKS = [
    (problem, dict(values, Z_STEPS=steps)) for problem, values in CHOSEN for steps in (1, 2, 8)
] + [
    (
        ODD_SHAPES[3],
        dict(
            TILE_X=32, TILE_Y=4, TILE_Z=2, COARSEN=2, COARSEN_AXIS=2, VEC=2, USE_SMEM=1, Z_STEPS=4
        ),
    ),
    (
        ODD_SHAPES[0],
        dict(
            TILE_X=16, TILE_Y=4, TILE_Z=2, COARSEN=4, COARSEN_AXIS=1, VEC=2, USE_SMEM=1, Z_STEPS=2
        ),
    ),
    (
        ODD_SHAPES[0],
        dict(
            TILE_X=16, TILE_Y=8, TILE_Z=1, COARSEN=4, COARSEN_AXIS=2, VEC=1, USE_SMEM=0, Z_STEPS=4
        ),
    ),
]
WALKS = [(problem, dict(values, RING=values.get("RING", 0))) for problem, values in WALKS]
WALKS += RING_WALKS


@pytest.fixture(scope="module")
def tuner(evaluator, tmp_path_factory):
    path = tmp_path_factory.mktemp("gpu3d") / "gpu.db"
    compiler = Compiler(arch=evaluator.device.arch)
    return Tuner(GpuRunner(compiler, evaluator), Store(str(path)), strategy="random", timing=QUICK)


def test_correct_on_random_configs_at_odd_shapes(tuner, evaluator):
    studies, skipped = plan_studies([(FAMILY, p) for p in ODD_SHAPES], evaluator.limits)
    assert not skipped and len(studies) == len(ODD_SHAPES)
    rng = random.Random(11)
    picks = [
        (study, config)
        for study in studies
        for config in rng.sample(study.space.configs, min(5, len(study.space)))
    ]
    failed = failures(tuner, picks, QUICK.min_repeats)
    assert not failed, "\n".join(failed)


def test_correct_on_chosen_configs(tuner, evaluator):
    problems = list(dict.fromkeys(p for p, _ in WALKS))
    studies, _ = plan_studies([(FAMILY, p) for p in problems], evaluator.limits)
    by_problem = {s.problem: s for s in studies}
    picks = []
    for problem, values in WALKS:
        config = Config.of(values)
        study = by_problem[problem]
        assert study.space.is_valid(config), config
        picks.append((study, config))
    assert tile_bytes(BLOG, Config.of(WALKS[3][1])) > 48 * 1024
    failed = failures(tuner, picks, QUICK.min_repeats)
    assert not failed, "\n".join(failed)


def test_gpu_reference_matches_numpy(evaluator):
    import cupy as cp

    problem = Conv3dProblem(D=7, R=6, Cc=9, Kd=3, Kr=2, Kc=4)
    plan = FAMILY.reference_plan(problem)
    compiled = Compiler(arch=evaluator.device.arch).compile(plan)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(problem.input_shape).astype(np.float32)
    w = rng.standard_normal(problem.filter_shape).astype(np.float32)
    module = cp.RawModule(path=_write(compiled.cubin))
    y = cp.empty(problem.output_shape, dtype=cp.float64)
    (launch,) = plan.launches
    module.get_function("reference_conv3d")(
        launch.grid, launch.block, (cp.asarray(x), cp.asarray(w), y)
    )
    np.testing.assert_allclose(y.get(), reference_numpy(problem, x, w), rtol=1e-12, atol=1e-12)


def _write(cubin: bytes) -> str:
    import tempfile
    from pathlib import Path

    fd, path = tempfile.mkstemp(suffix=".cubin")
    Path(path).write_bytes(cubin)
    return path
