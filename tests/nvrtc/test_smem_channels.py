"""smem_channels without a GPU: the space binds, plans fit the launch limits, NVRTC compiles it."""

from __future__ import annotations

import random

import pytest

from autotune.families import UnsupportedProblem, get_family
from autotune.families.plan import cdiv
from autotune.model.problem import ConvProblem
from autotune.model.shapes import named_shapes
from autotune.model.space import ARCH_LIMITS, Config

FAMILY = get_family("smem_channels")
LIMITS = ARCH_LIMITS["sm_90"]
ODD_SHAPES = [
    ConvProblem(N=1, K=1, C=1, F=1),
    ConvProblem(N=37, K=3, C=1, F=3),
    ConvProblem(N=29, K=5, C=7, F=9),
    ConvProblem(N=33, K=3, C=64, F=70, B=3),
    ConvProblem(N=13, K=11, C=3, F=20, B=2, stride=4),
    ConvProblem(N=130, K=1, C=5, F=64, B=2),
    ConvProblem(N=61, K=7, C=3, F=1, stride=2),
]
SHAPES = [
    *named_shapes("general"),
    *named_shapes("alexnet"),
    *named_shapes("overfeat"),
    *ODD_SHAPES,
]

# (problem, config), each with both filter paths: partial channel groups and stages past C, filter
# groups past F, strides 2 and 4, K = 11 (taps unrolled one row at a time), and a 1024-thread block
# at its 64-register budget.
COMPILE_SAMPLE = [
    (
        ConvProblem(N=29, K=5, C=7, F=9),
        dict(TILE_W=16, TILE_H=8, THREADS_Y=2, CH_PER_BLOCK=4, CH_STAGE=4, FILTERS_PER_BLOCK=4),
    ),
    (
        ConvProblem(N=33, K=3, C=64, F=70, B=3),
        dict(TILE_W=32, TILE_H=4, THREADS_Y=4, CH_PER_BLOCK=16, CH_STAGE=2, FILTERS_PER_BLOCK=8),
    ),
    (
        ConvProblem(N=13, K=11, C=3, F=20, B=2, stride=4),
        dict(TILE_W=8, TILE_H=4, THREADS_Y=4, CH_PER_BLOCK=2, CH_STAGE=1, FILTERS_PER_BLOCK=2),
    ),
    (
        ConvProblem(N=61, K=7, C=3, F=1, stride=2),
        dict(TILE_W=32, TILE_H=8, THREADS_Y=1, CH_PER_BLOCK=4, CH_STAGE=4, FILTERS_PER_BLOCK=1),
    ),
    (
        ConvProblem(N=128, K=3, C=64, F=64),
        dict(TILE_W=64, TILE_H=32, THREADS_Y=16, CH_PER_BLOCK=8, CH_STAGE=2, FILTERS_PER_BLOCK=4),
    ),
    (
        ConvProblem(N=55, K=11, C=3, F=64, B=128, stride=4),
        dict(TILE_W=32, TILE_H=2, THREADS_Y=1, CH_PER_BLOCK=4, CH_STAGE=1, FILTERS_PER_BLOCK=4),
    ),
]


def shared_bytes(problem: ConvProblem, config: Config) -> int:
    """The kernel's static shared memory: CH_STAGE input tiles, plus their taps when staged."""
    d = config.as_dict()
    in_w = (int(d["TILE_W"]) - 1) * problem.stride + problem.K
    in_h = (int(d["TILE_H"]) - 1) * problem.stride + problem.K
    taps = int(d["FILTER_IN_SMEM"]) * int(d["FILTERS_PER_BLOCK"]) * problem.K**2
    return int(d["CH_STAGE"]) * (in_h * in_w + taps) * 4


def register_budget(threads: int) -> int:
    """What __launch_bounds__(THREADS, MIN_BLOCKS) leaves a thread."""
    return min(LIMITS.REGS_PER_THREAD, LIMITS.REGS_PER_BLOCK // max(512, threads))


def bound(problem: ConvProblem):
    return FAMILY.load_space().bind(problem.fields(), LIMITS)


def test_bias_is_an_input_and_the_reference_adds_it() -> None:
    problem = ConvProblem(N=13, K=3, C=5, F=7, B=2, stride=2)
    buffers = FAMILY.buffers(problem)
    assert buffers.inputs == (
        ("x", (2, 5, 27, 27)),
        ("w", (7, 5, 3, 3)),
        ("bias", (7,)),
    )
    assert buffers.outputs == (("y", (2, 7, 13, 13)),)
    ref = FAMILY.reference_plan(problem)
    (launch,) = ref.launches
    assert ref.source.name == "reference_conv2d_bias.cu" and ref.source.is_file()
    assert ref.entries == ("reference_conv2d_bias",)
    assert launch.args == ("x", "w", "bias", "y_ref")
    assert launch.grid[0] * launch.block[0] >= 2 * 7 * 13 * 13
    assert dict(ref.defines) == dict(B=2, C=5, N=13, K=3, F=7, STRIDE=2)
    # The bias is not counted as work (DESIGN, section 2).
    assert problem.flops == 2 * 2 * 13 * 13 * 3 * 3 * 5 * 7


def test_plan_zeroes_then_convolves_then_adds_the_bias() -> None:
    problem = ConvProblem(N=50, K=5, C=70, F=9, B=3)
    values = dict(
        TILE_W=16,
        TILE_H=8,
        THREADS_Y=2,
        CH_PER_BLOCK=32,
        CH_STAGE=4,
        FILTERS_PER_BLOCK=4,
        FILTER_IN_SMEM=1,
    )
    plan = FAMILY.plan(problem, Config.of(values))
    assert dict(plan.defines) == dict(B=3, C=70, N=50, K=5, F=9, STRIDE=1, **values)
    assert plan.entries == ("smem_channels_zero", "smem_channels", "smem_channels_bias")
    zero, conv, bias = plan.launches  # all three timed
    assert plan.setup == () and plan.finish == ()
    assert plan.constants == (("c_bias", "bias"),)
    outputs = 3 * 9 * 50 * 50
    for elementwise in (zero, bias):
        assert elementwise.args == ("y",)
        assert elementwise.grid[0] * elementwise.block[0] >= outputs
        assert (elementwise.grid[0] - 1) * elementwise.block[0] < outputs
    # 4 x 7 tiles, 3 channel groups (32, 32, 6), 3 filter groups (4, 4, 1), 3 images.
    assert conv.grid == (4 * 7 * 3, 3, 3)
    assert conv.block == (16, 2, 1)
    assert conv.args == ("x", "w", "y")


@pytest.mark.slow
@pytest.mark.parametrize("problem", SHAPES, ids=str)
def test_space_binds_and_every_config_launches(problem: ConvProblem) -> None:
    FAMILY.check(problem)
    space = bound(problem)
    assert len(space) > 0
    for config in space:
        d = config.as_dict()
        tile_w, tile_h, threads_y = int(d["TILE_W"]), int(d["TILE_H"]), int(d["THREADS_Y"])
        rows, fpb = tile_h // threads_y, int(d["FILTERS_PER_BLOCK"])
        plan = FAMILY.plan(problem, config)
        zero, conv, bias = plan.launches
        assert conv.block == (tile_w, threads_y, 1)
        assert tile_h % threads_y == 0
        assert conv.threads % LIMITS.WARP_SIZE == 0
        assert conv.threads <= LIMITS.MAX_THREADS
        assert conv.smem_bytes == 0
        assert shared_bytes(problem, config) <= LIMITS.SMEM_PER_BLOCK
        # A row of K taps' loads and the accumulators fit the register budget.
        need = problem.K * (rows + fpb) + fpb * rows + 32
        assert need <= register_budget(conv.threads)
        # The grid covers every tile, channel group, filter and image exactly once.
        tiles = cdiv(problem.N, tile_w) * cdiv(problem.N, tile_h)
        groups = cdiv(problem.C, int(d["CH_PER_BLOCK"]))
        assert conv.grid == (tiles * groups, cdiv(problem.F, fpb), problem.B)
        assert (groups - 1) * int(d["CH_PER_BLOCK"]) < problem.C
        assert int(d["CH_PER_BLOCK"]) % int(d["CH_STAGE"]) == 0
        assert conv.grid[0] < 2**31 and conv.grid[1] <= 65535 and conv.grid[2] <= 65535
        assert zero.grid[0] < 2**31 and zero.block[0] <= LIMITS.MAX_THREADS
        assert problem.F * 4 <= LIMITS.CONST_BYTES


def test_space_at_a_general_shape_spans_both_extremes() -> None:
    """Single-channel groups (the report's most parallel form) and one group for all C."""
    space = bound(ConvProblem(N=128, K=3, C=64, F=64))
    groups = {int(c["CH_PER_BLOCK"]) for c in space}
    assert 1 in groups and 64 in groups and 128 not in groups
    assert {int(c["FILTER_IN_SMEM"]) for c in space} == {0, 1}
    assert {int(c["FILTERS_PER_BLOCK"]) for c in space} == {1, 2, 4, 8}


def test_check_refuses_another_kind_and_space_refuses_oversized_bias() -> None:
    from autotune.model.problem import Conv3dProblem

    with pytest.raises(UnsupportedProblem) as err:
        FAMILY.check(Conv3dProblem(D=9, R=9, Cc=9, Kd=3, Kr=3, Kc=3))
    assert "\n" not in str(err.value)
    # A bias of more than 16384 filters does not fit the constant bank: no valid configuration.
    assert len(bound(ConvProblem(N=8, K=3, C=2, F=16385))) == 0
    assert len(bound(ConvProblem(N=8, K=3, C=2, F=16384))) > 0


def _check_compiled(compiler, problem: ConvProblem, config: Config) -> None:
    assert bound(problem).is_valid(config), config
    plan = FAMILY.plan(problem, config)
    compiled = compiler.compile(plan)
    assert set(plan.entries) <= set(compiled.resources)
    res = compiled.resources["smem_channels"]
    threads = plan.launches[1].threads
    assert res.spill_stores == 0 and res.spill_loads == 0, (config, res)
    assert res.smem_bytes == shared_bytes(problem, config) <= LIMITS.SMEM_PER_BLOCK
    assert res.registers <= register_budget(threads)
    assert res.registers * threads <= LIMITS.REGS_PER_BLOCK
    for entry in ("smem_channels_zero", "smem_channels_bias"):
        assert compiled.resources[entry].spill_stores == 0
    assert compiled.resources["smem_channels_bias"].cmem_bytes >= 0


@pytest.mark.slow
@pytest.mark.parametrize("filter_in_smem", [0, 1])
@pytest.mark.parametrize(
    ("problem", "values"), COMPILE_SAMPLE, ids=[f"{p}:{v}" for p, v in COMPILE_SAMPLE]
)
def test_nvrtc_compiles_without_spills(
    compiler, problem: ConvProblem, values: dict, filter_in_smem: int
) -> None:
    _check_compiled(compiler, problem, Config.of({**values, "FILTER_IN_SMEM": filter_in_smem}))


def test_nvrtc_compiles_random_configs_at_the_register_edge(compiler) -> None:
    """Configurations whose tap row only just fits the budget, where a wrong model would spill."""
    rng = random.Random(3)
    problem = ConvProblem(N=27, K=5, C=64, F=192, B=2)
    space = bound(problem)

    def slack(config: Config) -> int:
        d = config.as_dict()
        rows, fpb = int(d["TILE_H"]) // int(d["THREADS_Y"]), int(d["FILTERS_PER_BLOCK"])
        threads = int(d["TILE_W"]) * int(d["THREADS_Y"])
        return register_budget(threads) - (problem.K * (rows + fpb) + fpb * rows + 32)

    edge = [c for c in space if slack(c) < 8 and int(c["CH_STAGE"]) <= 2]
    assert edge
    for config in rng.sample(edge, 3):
        _check_compiled(compiler, problem, config)


def test_reference_compiles(compiler) -> None:
    problem = ConvProblem(N=13, K=11, C=3, F=20, B=2, stride=4)
    compiled = compiler.compile(FAMILY.reference_plan(problem))
    res = compiled.resources["reference_conv2d_bias"]
    assert res.spill_stores == 0 and res.registers > 0
