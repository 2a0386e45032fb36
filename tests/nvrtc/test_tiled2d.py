"""tiled2d without a GPU: Kernel Tuner's example space binds, plans fit the launch limits, NVRTC
compiles sampled configs with the shared memory the constraints assume."""

from __future__ import annotations

import itertools

import pytest

from autotune.families import UnsupportedProblem, get_family
from autotune.families.tiled2d import TUNABLES, shared_bytes
from autotune.model.problem import ConvProblem
from autotune.model.shapes import named_shapes
from autotune.model.space import ARCH_LIMITS, Config

FAMILY = get_family("tiled2d")
LIMITS = ARCH_LIMITS["sm_90"]

# Kernel Tuner's convolution example, value for value.
KT_PARAMETERS = {
    "BLOCK_SIZE_X": [16 * i for i in range(1, 9)],
    "BLOCK_SIZE_Y": [2**i for i in range(6)],
    "TILE_SIZE_X": list(range(1, 9)),
    "TILE_SIZE_Y": list(range(1, 9)),
    "USE_PADDING": [0, 1],
    "READ_ONLY": [0, 1],
}

ODD_SHAPES = [
    ConvProblem(N=n, K=k, C=c, F=f, B=b)
    for n in (1, 37, 61, 1000)
    for k in (1, 3, 5, 17)
    for c, f, b in ((1, 1, 1), (7, 9, 1), (1, 64, 2))
    if f * c * k * k * 4 <= 64 * 1024
]
SHAPES = named_shapes("tiled2d") + ODD_SHAPES

COMPILE_SAMPLE = [
    (ConvProblem(N=4096, K=5, C=1, F=1), dict(BLOCK_SIZE_X=16, BLOCK_SIZE_Y=1, TILE_SIZE_X=1,
                                              TILE_SIZE_Y=1, USE_PADDING=0, READ_ONLY=0)),
    (ConvProblem(N=4096, K=5, C=1, F=1), dict(BLOCK_SIZE_X=32, BLOCK_SIZE_Y=8, TILE_SIZE_X=4,
                                              TILE_SIZE_Y=4, USE_PADDING=1, READ_ONLY=1)),
    (ConvProblem(N=4096, K=5, C=1, F=1), dict(BLOCK_SIZE_X=128, BLOCK_SIZE_Y=8, TILE_SIZE_X=1,
                                              TILE_SIZE_Y=3, USE_PADDING=1, READ_ONLY=0)),
    (ConvProblem(N=4096, K=17, C=1, F=1), dict(BLOCK_SIZE_X=80, BLOCK_SIZE_Y=4, TILE_SIZE_X=1,
                                               TILE_SIZE_Y=3, USE_PADDING=0, READ_ONLY=1)),
    (ConvProblem(N=61, K=3, C=7, F=9), dict(BLOCK_SIZE_X=48, BLOCK_SIZE_Y=2, TILE_SIZE_X=2,
                                            TILE_SIZE_Y=5, USE_PADDING=1, READ_ONLY=1)),
]  # fmt: skip


def bound(problem: ConvProblem):
    return FAMILY.load_space().bind(problem.fields(), LIMITS)


def test_the_space_and_the_shapes_are_kernel_tuners() -> None:
    space = FAMILY.load_space()
    assert {p.name: list(p.values) for p in space.parameters} == KT_PARAMETERS
    assert tuple(KT_PARAMETERS) == TUNABLES
    assert [(p.N, p.K, p.C, p.F, p.B) for p in named_shapes("tiled2d")] == [
        (4096, 5, 1, 1, 1),
        (4096, 17, 1, 1, 1),
    ]


@pytest.mark.parametrize("k", [5, 17])
def test_constraints_admit_exactly_the_launchable_configs(k: int) -> None:
    """Against the whole Cartesian product: a config is in the space iff its threads and its
    static shared memory fit (registers cannot refuse a launch: __launch_bounds__)."""
    problem = ConvProblem(N=4096, K=k, C=1, F=1)
    space = bound(problem)
    admitted = 0
    for values in itertools.product(*KT_PARAMETERS.values()):
        config = Config.of(dict(zip(KT_PARAMETERS, values, strict=True)))
        fits = (
            config["BLOCK_SIZE_X"] * config["BLOCK_SIZE_Y"] <= LIMITS.MAX_THREADS
            and shared_bytes(problem, config) <= LIMITS.SMEM_PER_BLOCK
        )
        assert space.is_valid(config) == fits, config
        admitted += fits
    assert admitted == len(space) == {5: 7656, 17: 6164}[k]


@pytest.mark.slow
@pytest.mark.parametrize("problem", SHAPES, ids=str)
def test_space_binds_and_every_config_launches(problem: ConvProblem) -> None:
    FAMILY.check(problem)
    space = bound(problem)
    assert len(space) > 0
    for config in space:
        plan = FAMILY.plan(problem, config)
        (launch,) = plan.launches
        bx, by = config["BLOCK_SIZE_X"], config["BLOCK_SIZE_Y"]
        tx, ty = config["TILE_SIZE_X"], config["TILE_SIZE_Y"]
        assert launch.block == (bx, by, 1)
        assert launch.threads <= LIMITS.MAX_THREADS
        assert launch.smem_bytes == 0
        assert shared_bytes(problem, config) <= LIMITS.SMEM_PER_BLOCK
        gx, gy, gz = launch.grid
        assert gx * bx * tx >= problem.N > (gx - 1) * bx * tx
        assert gy * by * ty >= problem.N > (gy - 1) * by * ty
        assert gz == problem.B * problem.F and gy <= 65535


def test_padding_makes_the_row_stride_congruent_to_the_block_width() -> None:
    problem = ConvProblem(N=4096, K=5, C=1, F=1)
    for bx in KT_PARAMETERS["BLOCK_SIZE_X"]:
        values = dict(BLOCK_SIZE_X=bx, BLOCK_SIZE_Y=1, TILE_SIZE_X=3, TILE_SIZE_Y=1, READ_ONLY=0)
        bare = shared_bytes(problem, Config.of({**values, "USE_PADDING": 0})) // 4 // 5
        padded = shared_bytes(problem, Config.of({**values, "USE_PADDING": 1})) // 4 // 5
        assert bare == 3 * bx + 4
        assert bare <= padded < bare + 32 and (padded - bx) % 32 == 0


def test_plan_defines_and_constants() -> None:
    problem = ConvProblem(N=4096, K=17, C=1, F=1)
    config = Config.of(
        dict(BLOCK_SIZE_X=32, BLOCK_SIZE_Y=4, TILE_SIZE_X=2, TILE_SIZE_Y=8, USE_PADDING=1,
             READ_ONLY=0)
    )  # fmt: skip
    plan = FAMILY.plan(problem, config)
    assert dict(plan.defines) == dict(
        B=1, C=1, N=4096, K=17, F=1, STRIDE=1, BLOCK_SIZE_X=32, BLOCK_SIZE_Y=4, TILE_SIZE_X=2,
        TILE_SIZE_Y=8, USE_PADDING=1, READ_ONLY=0,
    )  # fmt: skip
    assert plan.constants == (("c_filter", "w"),)
    assert plan.entries == ("tiled2d",)
    assert plan.launches[0].args == ("x", "y")
    assert plan.launches[0].grid == (64, 128, 1)


@pytest.mark.parametrize(
    "problem",
    [ConvProblem(N=64, K=3, C=1, F=1, stride=2), ConvProblem(N=64, K=11, C=16, F=16)],
    ids=str,
)
def test_check_refuses(problem: ConvProblem) -> None:
    with pytest.raises(UnsupportedProblem) as err:
        FAMILY.check(problem)
    assert "\n" not in str(err.value)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("problem", "values"), COMPILE_SAMPLE, ids=[f"{p}:{v}" for p, v in COMPILE_SAMPLE]
)
def test_nvrtc_compiles_within_the_assumed_resources(compiler, problem, values) -> None:
    config = Config.of(values)
    assert bound(problem).is_valid(config)
    plan = FAMILY.plan(problem, config)
    res = compiler.compile(plan).resources["tiled2d"]
    threads = plan.launches[0].threads
    assert res.spill_stores == 0 and res.spill_loads == 0
    assert res.smem_bytes == shared_bytes(problem, config) <= LIMITS.SMEM_PER_BLOCK
    assert res.registers <= LIMITS.REGS_PER_THREAD
    assert res.registers * threads <= LIMITS.REGS_PER_BLOCK
    assert res.cmem_bytes >= 0


def test_kernel_tuner_spelling_compiles_the_same_source(compiler) -> None:
    """What Kernel Tuner hands NVRTC: '#define NAME value' lines before the source, N and K as
    one-value parameters, no B, C, F, STRIDE."""
    from autotune.gpu.nvrtc_library import compile_program
    from autotune.gpu.ptxas import parse_resources

    values = dict(COMPILE_SAMPLE[1][1])
    prefix = "".join(f"#define {k} {v}\n" for k, v in {**values, "N": 4096, "K": 5}.items())
    source = prefix + "#line 1\n" + FAMILY.source_path.read_text()
    cubin, log, _ = compile_program(source, "tiled2d.cu", ["-arch=sm_90", "-Xptxas=-v"])
    ours = compiler.compile(FAMILY.plan(ConvProblem(N=4096, K=5, C=1, F=1), Config.of(values)))
    assert cubin and parse_resources(log)["tiled2d"].smem_bytes == (
        ours.resources["tiled2d"].smem_bytes
    )
