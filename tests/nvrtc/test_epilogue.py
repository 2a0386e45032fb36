"""Fused epilogues without a GPU: the float64 reference compiles with each epilogue in every
storage type and layout, and tc_wgmma compiles for sm_90a with each at sampled configurations
(both store paths, split-K's reduction, TMA, stream-K, odd F) without spills; a plain problem's
plan is the one it always was."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.families import conv2d, get_family
from autotune.families.plan import TensorMap
from autotune.families.tc_wgmma import threads
from autotune.model.epilogue import EPILOGUES
from autotune.model.problem import ConvProblem
from autotune.model.space import ARCH_LIMITS
from tests.nvrtc.test_tc_wgmma import cfg, nhwc, tma

FAMILY = get_family("tc_wgmma")
LIMITS = ARCH_LIMITS["sm_90"]
NAMES = sorted(EPILOGUES)
PRECISIONS = [(d, layout) for d in ("fp32", "tf32", "bf16", "fp16") for layout in ("NCHW", "NHWC")]


@pytest.mark.parametrize("name", NAMES)
def test_the_reference_compiles_with_each_epilogue(compiler, name: str) -> None:
    dtype, layout = PRECISIONS[NAMES.index(name) % len(PRECISIONS)]
    problem = ConvProblem(N=7, K=3, C=5, F=33, B=3, dtype=dtype, layout=layout, epilogue=name)
    compiled = compiler.compile(conv2d.reference_plan(problem))
    assert set(compiled.resources) == {"reference_conv2d", "reference_epilogue"}
    assert compiled.spills == 0, compiled.log


@pytest.mark.parametrize(("dtype", "layout"), PRECISIONS)
def test_the_reference_reads_every_storage_type_and_layout(compiler, dtype, layout) -> None:
    problem = ConvProblem(N=7, K=3, C=5, F=33, dtype=dtype, layout=layout)
    fused = dataclasses.replace(problem, epilogue="scale_bias_add_gelu")
    assert compiler.compile(conv2d.reference_plan(fused)).spills == 0


# Each epilogue once, over the kernel's cases: both consumer counts and the producer warpgroup
# (setmaxnreg leaves the consumers 216 or 224 registers), both output types (16-bit pairs and
# FP32), odd F (the element-wise store), split-K (the epilogue in the reduction), TMA, the widest
# tiles (the most accumulators a thread beside the epilogue's registers), TMA stores.
CONV3 = ConvProblem(N=13, K=3, C=192, F=384, B=128)
ODD_F = ConvProblem(N=13, K=3, C=40, F=33, B=3)
CASES = [
    (CONV3, "bf16", cfg(256, 128, 2, 4)),
    (CONV3, "fp16", cfg(128, 256, 2, 4, producer=1)),
    (CONV3, "tf32", tma(256, 128, 2, 4, tiles=2)),
    (CONV3, "bf16", tma(128, 256, 2, 4)),
    (ODD_F, "bf16", cfg(64, 64, 1, 3)),
    (ODD_F, "tf32", cfg(64, 64, 1, 3, producer=1)),
    (ConvProblem(N=7, K=3, C=256, F=64), "bf16", cfg(64, 64, 1, 6, split=8)),
    (ConvProblem(N=7, K=3, C=256, F=64), "tf32", tma(64, 64, 1, 6, split=4)),
    # TMA stores: the epilogue applied before the staging tile.
    (CONV3, "bf16", tma(256, 128, 2, 3, tiles=2, store=1)),
    (CONV3, "tf32", tma(128, 96, 1, 4, store=1)),
    # Stream-K: the last share of a tile to arrive applies it in the direct store.
    (ConvProblem(N=14, K=1, C=1024, F=256, B=32), "bf16", tma(128, 128, 2, 4, store=1, stream_k=1)),
    (ConvProblem(N=14, K=1, C=1024, F=256, B=32), "tf32", tma(128, 128, 2, 4, stream_k=1)),
]


@pytest.mark.parametrize("name", NAMES)
def test_tc_wgmma_compiles_with_each_epilogue_without_spills(compiler, name: str) -> None:
    base, dtype, config = CASES[NAMES.index(name) % len(CASES)]
    problem = dataclasses.replace(nhwc(base, dtype), epilogue=name)
    FAMILY.check(problem)
    assert FAMILY.load_space().bind(problem.fields(), LIMITS).is_valid(config), config
    plan = FAMILY.plan(problem, config)
    inputs = EPILOGUES[name].inputs
    if int(config["SPLIT_K"]) == 1:  # the epilogue's inputs follow y
        assert plan.launches[0].args[2 : 3 + len(inputs)] == ("y", *inputs)
    else:  # the partial sums are plain; the reduction applies the epilogue
        assert plan.launches[0].args[2] == "y_split"
        assert plan.launches[1].args == ("y_split", "y", *inputs)
    compiled = compiler.compile(plan)
    assert compiled.spills == 0, compiled.log
    gemm = compiled.resources["tc_wgmma"]
    assert gemm.stack_bytes == 0 and gemm.registers <= LIMITS.REGS_PER_BLOCK // threads(config)
    assert compiled.resources["tc_wgmma_reduce"].stack_bytes == 0


@pytest.mark.parametrize(("base", "dtype", "config"), CASES[:1] + CASES[4:5] + CASES[6:7])
def test_the_epilogue_changes_the_cubin_and_a_plain_plan_is_unchanged(
    compiler, base, dtype, config
) -> None:
    plain = nhwc(base, dtype)
    plan = FAMILY.plan(plain, config)
    assert not any(name.startswith("EPI") for name, _ in plan.defines)
    assert all(a not in ("scale", "bias", "residual") for la in plan.launches for a in la.args)
    fused = FAMILY.plan(dataclasses.replace(plain, epilogue="bias_add_relu"), config)
    assert fused.defines[: len(plan.defines)] == plan.defines
    assert compiler.compile(fused).cubin != compiler.compile(plan).cubin


# The heaviest epilogue (a scale, a bias and a residual a pair of outputs, GELU) on the tiles
# with the most accumulators a thread: fetching the scale and bias with each run's residual
# spilled the first of these (8 bytes; 168 registers at most for 384 threads).
@pytest.mark.parametrize(
    "dtype, config",
    [
        ("bf16", tma(256, 128, 2, 3, tiles=2)),
        ("tf32", tma(256, 128, 2, 4, tiles=2)),
        ("bf16", cfg(128, 256, 2, 4, producer=1)),
        ("fp16", tma(128, 256, 2, 4)),
        # The residual staged by TMA (RESIDUAL_TMA).
        ("bf16", tma(256, 128, 2, 3, tiles=2, store=1)),
        ("tf32", tma(128, 128, 1, 4, tiles=2, store=1)),
        ("fp16", tma(128, 256, 2, 3, store=1)),
        # Two staging tiles (the next tile's residual issued from this tile's epilogue).
        ("bf16", tma(128, 256, 2, 2, tiles=2, store=1, staging=2)),
        ("tf32", tma(128, 128, 1, 2, tiles=2, store=1, staging=2)),
    ],
)
def test_the_heaviest_epilogue_fits_the_widest_tiles_without_spills(compiler, dtype, config):
    problem = dataclasses.replace(nhwc(CONV3, dtype), epilogue="scale_bias_add_gelu")
    assert FAMILY.load_space().bind(problem.fields(), LIMITS).is_valid(config), config
    compiled = compiler.compile(FAMILY.plan(problem, config))
    assert compiled.spills == 0, compiled.log


# With TMA stores a residual is loaded into the staging tile by tensor-memory copies: the
# launch takes its map after the output's.
@pytest.mark.parametrize("dtype", ["bf16", "fp16", "tf32"])
def test_a_residual_with_tma_stores_is_staged_by_its_map(compiler, dtype) -> None:
    config = tma(128, 128, 1, 4, store=1)
    problem = dataclasses.replace(nhwc(CONV3, dtype), epilogue="bias_add_relu")
    assert FAMILY.load_space().bind(problem.fields(), LIMITS).is_valid(config), config
    plan = FAMILY.plan(problem, config)
    maps = [a.buffer for a in plan.launches[0].args if isinstance(a, TensorMap)]
    assert maps == ["x", "w", "y", "residual"]
    compiled = compiler.compile(plan)
    assert compiled.spills == 0, compiled.log


# A padded problem's reference: a kernel of its own (reference_conv2d.cu's text is in every
# family's digest), with and without an epilogue, in every storage type and layout.
@pytest.mark.parametrize(("dtype", "layout"), PRECISIONS)
def test_the_padded_reference_compiles_with_and_without_an_epilogue(compiler, dtype, layout):
    problem = ConvProblem(N=7, K=3, C=5, F=9, B=3, stride=2, dtype=dtype, layout=layout, padding=2)
    plain = compiler.compile(conv2d.reference_plan(problem))
    assert "reference_conv2d_padded" in plain.resources and plain.spills == 0
    fused = conv2d.reference_plan(dataclasses.replace(problem, epilogue="scale_bias_add_gelu"))
    assert [launch.kernel for launch in fused.launches] == [
        "reference_conv2d_padded",
        "reference_epilogue",
    ]
    assert compiler.compile(fused).spills == 0


def test_the_padded_numpy_reference_reads_zeros_around_the_input():
    import numpy as np

    rng = np.random.default_rng(5)
    problem = ConvProblem(N=5, K=3, C=2, F=3, B=2, stride=2, padding=1)
    x = rng.standard_normal(problem.input_shape)  # (2, 2, 9, 9)
    w = rng.standard_normal(problem.filter_shape)
    side = problem.input_size
    expected = np.zeros(problem.output_shape)
    for b, f, oy, ox in np.ndindex(*problem.output_shape):
        for c, ky, kx in np.ndindex(2, 3, 3):
            iy, ix = 2 * oy + ky - 1, 2 * ox + kx - 1
            if 0 <= iy < side and 0 <= ix < side:
                expected[b, f, oy, ox] += x[b, c, iy, ix] * w[f, c, ky, kx]
    np.testing.assert_allclose(conv2d.reference_numpy(problem, x, w), expected, atol=1e-12)
    nhwc = dataclasses.replace(problem, layout="NHWC")
    got = conv2d.reference_numpy(nhwc, x.transpose(0, 2, 3, 1), w.transpose(0, 2, 3, 1))
    np.testing.assert_allclose(got.transpose(0, 3, 1, 2), expected, atol=1e-12)
    # With a tail: a 10 x 10 input, whose last row and column the last window reads where the
    # 9 x 9 one had its padding's zeros; the padding after them is in no window.
    tailed = dataclasses.replace(problem, tail=1)
    wide = np.pad(x, ((0, 0), (0, 0), (0, 1), (0, 1)), constant_values=7.0)
    assert wide.shape == tailed.input_shape
    expected_wide = np.zeros(problem.output_shape)
    for b, f, oy, ox in np.ndindex(*problem.output_shape):
        for c, ky, kx in np.ndindex(2, 3, 3):
            iy, ix = 2 * oy + ky - 1, 2 * ox + kx - 1
            if 0 <= iy < 10 and 0 <= ix < 10:
                expected_wide[b, f, oy, ox] += wide[b, c, iy, ix] * w[f, c, ky, kx]
    assert not np.allclose(expected_wide, expected)  # row and column 9 count
    got = conv2d.reference_numpy(tailed, wide, w)
    np.testing.assert_allclose(got, expected_wide, atol=1e-12)
    plan = conv2d.reference_plan(tailed)
    assert plan.launches[0].kernel == "reference_conv2d_padded" and ("TAIL", 1) in plan.defines
