"""On a CUDA device (Hopper for tc_wgmma): fused epilogues. The float64 reference applies each
epilogue as an independent NumPy version does, over the stored inputs; tc_wgmma with each
epilogue passes the check at odd shapes in TF32, BF16 and FP16 (both store paths, split-K's
reduction, TMA); and a kernel that leaves the epilogue out fails it."""

from __future__ import annotations

import dataclasses
import os
import random
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from autotune.families import conv2d, get_family
from autotune.families.tc_wgmma import TcWgmma
from autotune.gpu.compiler import Compiler
from autotune.gpu.storage import stored_values
from autotune.model.epilogue import EPILOGUES
from autotune.model.problem import ConvProblem
from autotune.model.records import Status
from autotune.tuning.studies import plan_studies
from tests.gpu import test_gpu_tc_wgmma
from tests.gpu.test_gpu_tc_wgmma import CONFIGS, QUICK, SHAPES
from tests.gpu_checks import failures
from tests.nvrtc.test_tc_wgmma import nhwc

pytestmark = pytest.mark.gpu

FAMILY = get_family("tc_wgmma")
NAMES = sorted(EPILOGUES)
PRECISIONS = [(d, layout) for d in ("fp32", "tf32", "bf16", "fp16") for layout in ("NCHW", "NHWC")]

# The tc_wgmma tests' tuner (a compile pool and a scratch database), shared.
tuner = test_gpu_tc_wgmma.tuner


@pytest.fixture(scope="module")
def session():
    from autotune.gpu.session import GpuSession

    return GpuSession(0)


@pytest.mark.parametrize("name", NAMES)
def test_the_reference_applies_the_epilogue_as_numpy_does(name, evaluator, session):
    import cupy as cp

    compiler = Compiler(arch=evaluator.device.arch)
    for i, (dtype, layout) in enumerate(PRECISIONS):
        if i % 2 != NAMES.index(name) % 2:
            continue  # each epilogue in half the precisions, every precision by 8 epilogues
        problem = ConvProblem(
            N=7, K=3, C=5, F=9, B=3, stride=2, dtype=dtype, layout=layout, epilogue=name
        )
        buffers = conv2d.buffers(problem)
        arrays = session.fresh_inputs(buffers, seed=3)
        stored = {n: stored_values(arrays[n].get(), dtype) for n, _ in buffers.inputs}
        plan = conv2d.reference_plan(problem)
        functions = session.load(compiler.compile(plan).cubin, plan.entries)
        arrays["y_ref"] = cp.full(problem.output_shape, np.nan, dtype=cp.float64)
        session.runner(plan.launches, functions, arrays)()
        session.sync()
        plain = conv2d.reference_numpy(problem, stored["x"], stored["w"])
        np.testing.assert_allclose(
            arrays["y_ref"].get(),
            conv2d.epilogue_numpy(problem, plain, stored),
            rtol=1e-12,
            atol=1e-12,
            err_msg=problem.key,
        )


def compiled_failures(tuner, picks) -> list[str]:
    """The (study, config) picks' failures, their plans compiled in parallel first."""
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        list(
            pool.map(
                lambda p: tuner.runner.compiler.compile(FAMILY.plan(p[0].problem, p[1])), picks
            )
        )
    return failures(tuner, picks, QUICK.min_repeats)


@pytest.mark.parametrize("dtype", ["tf32", "bf16", "fp16"])
def test_each_epilogue_correct_at_odd_shapes(tuner, evaluator, dtype):
    rng = random.Random(f"epilogue-{dtype}")
    problems = [
        dataclasses.replace(nhwc(SHAPES[(2 * i + k) % len(SHAPES)], dtype), epilogue=name)
        for i, name in enumerate(NAMES)
        for k in (0, 1)
    ]
    studies, skipped = plan_studies([(FAMILY, p) for p in problems], evaluator.limits)
    assert len(studies) == len(problems), skipped
    picks = []
    for study in studies:
        fixed = [c for c in CONFIGS if study.space.is_valid(c)]
        configs = rng.sample(fixed, min(2, len(fixed))) or rng.sample(study.space.configs, 1)
        # Where the space holds them, a split-K config (the epilogue in the reduction), a TMA
        # one and a TMA-store one (the epilogue before the staging tile) as well.
        for key, least in (("SPLIT_K", 2), ("TMA", 1), ("STORE_TMA", 1)):
            some = [c for c in study.space.configs if int(c[key]) >= least]
            configs += [rng.choice(some)] if some else []
        picks += [(study, c) for c in dict.fromkeys(configs)]
    failed = compiled_failures(tuner, picks)
    assert not failed, "\n".join(failed)


class WithoutEpilogue(TcWgmma):
    """tc_wgmma that plans the plain kernel for a fused problem: its output lacks the epilogue."""

    def plan(self, problem, config):
        return super().plan(dataclasses.replace(problem, epilogue=""), config)


@pytest.mark.parametrize("name", ["bias", "bias_relu", "scale_bias_add_gelu"])
def test_an_output_without_the_epilogue_fails_the_check(tuner, evaluator, name):
    problem = dataclasses.replace(nhwc(SHAPES[3], "bf16"), epilogue=name)
    family = WithoutEpilogue()
    (study,), _ = plan_studies([(family, problem)], evaluator.limits)
    config = next(c for c in CONFIGS if study.space.is_valid(c))
    m = tuner.evaluate(study, config)
    assert m.status is Status.WRONG_RESULT, (m.status, m.rel_error)


# With TMA stores, the residual is loaded into the staging tile halfway through each tile's
# main loop and added there (RESIDUAL_TMA): odd sides, a stride of 2, a 1x1 layer, one and two
# consumer warpgroups, one and two m64 tiles a warpgroup, and blocks of one tile and of
# several, where each tile's load must wait for the last tile's stores and its barrier's phase
# turns, the warpgroups sharing each tile or taking tiles in turn (PINGPONG).
RESIDUAL_SHAPES = [
    ConvProblem(N=13, K=3, C=64, F=200, B=3, stride=2),
    ConvProblem(N=7, K=1, C=64, F=256, B=3),
    ConvProblem(N=56, K=1, C=64, F=256, B=3),  # enough tiles for blocks of two and four
    ConvProblem(N=37, K=1, C=32, F=64, B=1),
]


def row_groups(config) -> int:
    """Consumer warpgroups sharing a tile's rows: all, or one with PINGPONG."""
    return 1 if int(config["PINGPONG"]) else int(config["WG"])


@pytest.mark.parametrize("dtype", ["tf32", "bf16", "fp16"])
def test_the_residual_staged_by_tma_is_added_right(tuner, evaluator, dtype):
    rng = random.Random(f"residual-tma-{dtype}")
    problems = [
        dataclasses.replace(nhwc(shape, dtype), epilogue=name)
        for shape in RESIDUAL_SHAPES
        for name in ("bias_add", "scale_bias_add_gelu")
    ]
    studies, skipped = plan_studies([(FAMILY, p) for p in problems], evaluator.limits)
    assert len(studies) == len(problems), skipped
    picks = []
    for study in studies:
        staged = [c for c in study.space.configs if int(c["STORE_TMA"])]
        groups = {}
        for c in staged:
            # MI, a warpgroup's m64 tiles, sets the epilogue's runs of column pairs (4 / MI);
            # with two staging tiles a tile's epilogue loads the next tile's residual.
            # With PINGPONG each warpgroup stages whole tiles of its own, in turn.
            mi = int(c["BM"]) // (64 * row_groups(c))
            several = int(c["TILES_PER_BLOCK"]) > 1
            key = (int(c["WG"]), several, mi, int(c["STAGING"]), int(c["PINGPONG"]))
            groups.setdefault(key, []).append(c)
        picks += [(study, rng.choice(group)) for group in groups.values()]
    assert any(int(c["TILES_PER_BLOCK"]) > 1 and int(c["WG"]) == 2 for _, c in picks)
    assert any(int(c["STAGING"]) == 2 and int(c["WG"]) == 2 for _, c in picks)
    assert any(int(c["PINGPONG"]) and int(c["STAGING"]) == 2 for _, c in picks)
    assert {int(c["BM"]) // (64 * row_groups(c)) for _, c in picks} == {1, 2}
    failed = compiled_failures(tuner, picks)
    assert not failed, "\n".join(failed)
