"""conv3d without a GPU: the space binds, plans fit the launch limits, NVRTC compiles it."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from autotune.families import UnsupportedProblem, get_family
from autotune.families.conv3d import output_tile, per_thread, reference_numpy, tile_bytes
from autotune.families.plan import cdiv
from autotune.model.problem import Conv3dProblem, ConvProblem
from autotune.model.shapes import named_shapes
from autotune.model.space import ARCH_LIMITS, Config

FAMILY = get_family("conv3d")
LIMITS = ARCH_LIMITS["sm_90"]
STATIC_SMEM = 48 * 1024

ODD_SHAPES = [
    Conv3dProblem(D=37, R=29, Cc=41, Kd=3, Kr=5, Kc=3),
    Conv3dProblem(D=1, R=1, Cc=1, Kd=1, Kr=1, Kc=1),
    Conv3dProblem(D=9, R=9, Cc=9, Kd=9, Kr=9, Kc=9),
    Conv3dProblem(D=20, R=33, Cc=70, Kd=1, Kr=1, Kc=7),
    Conv3dProblem(D=300, R=3, Cc=5, Kd=2, Kr=3, Kc=2),
    Conv3dProblem(D=30, R=30, Cc=30, Kd=15, Kr=15, Kc=15),
]
SHAPES = [*named_shapes("conv3d"), *ODD_SHAPES]

BLOG = Conv3dProblem(D=256, R=128, Cc=128, Kd=5, Kr=5, Kc=5)
# The blog post's fastest kernel: a 32 x 16 block, each thread 4 outputs down the depth.
BLOG_FASTEST = dict(
    TILE_X=32, TILE_Y=16, TILE_Z=1, COARSEN=4, COARSEN_AXIS=2, VEC=1, USE_SMEM=1, Z_STEPS=1, RING=0
)
# The depth ring: a 32 x 8 block, each thread 4 rows x 2 columns for Kd output depths, walking 8.
BLOG_RING = dict(
    TILE_X=32, TILE_Y=8, TILE_Z=1, COARSEN=4, COARSEN_AXIS=1, VEC=2, USE_SMEM=1, Z_STEPS=8, RING=1
)


def ring(**values) -> dict:
    return dict(BLOG_RING, **values)


# (problem, config): the blog's kernels (8 x 8 x 8 tiles; its fastest), every axis and VEC,
# shared and global paths, static and dynamic shared memory, blocks walking several depth tiles
# (double-buffered), a filter too large to unroll whole, a 1024-thread block at its 64-register
# budget, and odd sides everywhere.
COMPILE_SAMPLE = [
    (BLOG, BLOG_FASTEST),
    (
        BLOG,
        dict(
            TILE_X=8,
            TILE_Y=8,
            TILE_Z=8,
            COARSEN=1,
            COARSEN_AXIS=2,
            VEC=1,
            USE_SMEM=1,
            Z_STEPS=1,
            RING=0,
        ),
    ),
    (
        BLOG,
        dict(
            TILE_X=32,
            TILE_Y=8,
            TILE_Z=1,
            COARSEN=8,
            COARSEN_AXIS=2,
            VEC=2,
            USE_SMEM=1,
            Z_STEPS=1,
            RING=0,
        ),
    ),
    (
        BLOG,
        dict(
            TILE_X=32,
            TILE_Y=8,
            TILE_Z=1,
            COARSEN=4,
            COARSEN_AXIS=2,
            VEC=4,
            USE_SMEM=1,
            Z_STEPS=1,
            RING=0,
        ),
    ),
    (
        BLOG,
        dict(
            TILE_X=32,
            TILE_Y=4,
            TILE_Z=1,
            COARSEN=8,
            COARSEN_AXIS=2,
            VEC=2,
            USE_SMEM=0,
            Z_STEPS=1,
            RING=0,
        ),
    ),
    (
        BLOG,
        dict(
            TILE_X=32,
            TILE_Y=8,
            TILE_Z=1,
            COARSEN=4,
            COARSEN_AXIS=2,
            VEC=2,
            USE_SMEM=1,
            Z_STEPS=4,
            RING=0,
        ),
    ),
    (
        BLOG,
        dict(
            TILE_X=32,
            TILE_Y=8,
            TILE_Z=1,
            COARSEN=8,
            COARSEN_AXIS=2,
            VEC=2,
            USE_SMEM=1,
            Z_STEPS=8,
            RING=0,
        ),
    ),
    (
        BLOG,
        dict(
            TILE_X=32,
            TILE_Y=8,
            TILE_Z=1,
            COARSEN=8,
            COARSEN_AXIS=2,
            VEC=2,
            USE_SMEM=0,
            Z_STEPS=2,
            RING=0,
        ),
    ),
    (
        ODD_SHAPES[0],
        dict(
            TILE_X=16,
            TILE_Y=4,
            TILE_Z=2,
            COARSEN=4,
            COARSEN_AXIS=1,
            VEC=2,
            USE_SMEM=1,
            Z_STEPS=1,
            RING=0,
        ),
    ),
    (
        ODD_SHAPES[0],
        dict(
            TILE_X=8,
            TILE_Y=8,
            TILE_Z=1,
            COARSEN=4,
            COARSEN_AXIS=0,
            VEC=1,
            USE_SMEM=1,
            Z_STEPS=1,
            RING=0,
        ),
    ),
    (
        ODD_SHAPES[0],
        dict(
            TILE_X=32,
            TILE_Y=2,
            TILE_Z=1,
            COARSEN=2,
            COARSEN_AXIS=0,
            VEC=1,
            USE_SMEM=0,
            Z_STEPS=1,
            RING=0,
        ),
    ),
    (
        ODD_SHAPES[5],
        dict(
            TILE_X=32,
            TILE_Y=4,
            TILE_Z=1,
            COARSEN=2,
            COARSEN_AXIS=2,
            VEC=1,
            USE_SMEM=1,
            Z_STEPS=1,
            RING=0,
        ),
    ),
    (
        Conv3dProblem(D=64, R=64, Cc=64, Kd=3, Kr=3, Kc=3),
        dict(
            TILE_X=64,
            TILE_Y=16,
            TILE_Z=1,
            COARSEN=2,
            COARSEN_AXIS=2,
            VEC=1,
            USE_SMEM=1,
            Z_STEPS=1,
            RING=0,
        ),
    ),
    # The ring: the blog's shape at several in-plane tiles and float4 columns, shared memory past
    # 48 KB (dynamic), the other cubes, and odd shapes (unaligned rows: 1-float copies; a filter
    # one deep: no fill or drain).
    (BLOG, BLOG_RING),
    (BLOG, ring(TILE_Y=4, Z_STEPS=16)),
    (BLOG, ring(COARSEN=1, COARSEN_AXIS=2, VEC=4, TILE_Y=16)),
    (BLOG, ring(TILE_Y=16)),
    (BLOG, ring(COARSEN=4, COARSEN_AXIS=0, VEC=1, TILE_Y=16)),
    (Conv3dProblem(D=64, R=64, Cc=64, Kd=3, Kr=3, Kc=3), ring(TILE_Y=4, COARSEN=4, Z_STEPS=6)),
    (Conv3dProblem(D=128, R=128, Cc=128, Kd=7, Kr=7, Kc=7), ring(COARSEN=2, VEC=1, Z_STEPS=12)),
    (ODD_SHAPES[0], ring(TILE_X=16, COARSEN=2, Z_STEPS=4)),
    (Conv3dProblem(D=70, R=13, Cc=131, Kd=5, Kr=5, Kc=5), ring(TILE_Y=4, COARSEN=2)),
    (ODD_SHAPES[3], ring(COARSEN=1, COARSEN_AXIS=2, VEC=4, Z_STEPS=6)),
    # 66 output columns: rows of 4 stored as float2 pairs.
    (Conv3dProblem(D=40, R=21, Cc=68, Kd=3, Kr=3, Kc=3), ring(TILE_Y=4, COARSEN=2, VEC=4)),
]


def register_budget(threads: int) -> int:
    """What __launch_bounds__(THREADS, MIN_BLOCKS) leaves a thread."""
    return min(LIMITS.REGS_PER_THREAD, LIMITS.REGS_PER_BLOCK // max(512, threads))


def bound(problem: Conv3dProblem):
    return FAMILY.load_space().bind(problem.fields(), LIMITS)


def test_buffers_constants_and_reference() -> None:
    problem = Conv3dProblem(D=37, R=29, Cc=41, Kd=3, Kr=5, Kc=3)
    buffers = FAMILY.buffers(problem)
    assert buffers.inputs == (("x", (37, 29, 41)), ("w", (3, 5, 3)))
    assert buffers.outputs == (("y", (35, 25, 39)),)
    ref = FAMILY.reference_plan(problem)
    (launch,) = ref.launches
    assert ref.source.name == "reference_conv3d.cu" and ref.source.is_file()
    assert ref.entries == ("reference_conv3d",)
    assert launch.args == ("x", "w", "y_ref")
    assert launch.grid[0] * launch.block[0] >= 35 * 25 * 39
    assert dict(ref.defines) == dict(D=37, R=29, Cc=41, Kd=3, Kr=5, Kc=3)


def test_plan_of_the_blogs_fastest_kernel() -> None:
    plan = FAMILY.plan(BLOG, Config.of(BLOG_FASTEST))
    (launch,) = plan.launches
    assert plan.constants == (("c_filter", "w"),)
    assert plan.entries == ("conv3d",)
    assert dict(plan.defines) == dict(D=256, R=128, Cc=128, Kd=5, Kr=5, Kc=5, **BLOG_FASTEST)
    assert launch.args == ("x", "y")
    assert launch.block == (32, 16, 1)
    # 124 x 124 x 252 outputs in 32 x 16 x 4 tiles.
    assert launch.grid == (4, 8, 63)
    # (4 + 4) x (16 + 4) x (32 + 4) floats: static shared memory.
    assert tile_bytes(BLOG, Config.of(BLOG_FASTEST)) == 8 * 20 * 36 * 4
    assert launch.smem_bytes == 0
    assert bound(BLOG).is_valid(Config.of(BLOG_FASTEST))


def test_blocks_walking_the_depth_double_buffer() -> None:
    values = dict(BLOG_FASTEST, Z_STEPS=4)
    config = Config.of(values)
    (launch,) = FAMILY.plan(BLOG, config).launches
    # 63 depth tiles of 4, 4 per block; two buffers of the fastest kernel's tile.
    assert launch.grid == (4, 8, 16)
    assert tile_bytes(BLOG, config) == 2 * tile_bytes(BLOG, Config.of(BLOG_FASTEST))
    assert launch.smem_bytes == 0 and dict(FAMILY.plan(BLOG, config).defines)["Z_STEPS"] == 4
    assert bound(BLOG).is_valid(config)
    # Walks no longer than twice the depth's tiles; a single depth tile leaves only Z_STEPS = 1.
    thin = Conv3dProblem(D=8, R=40, Cc=40, Kd=5, Kr=3, Kc=3)  # 4 output slices
    steps_by_tiles: dict[int, set[int]] = {}
    ring_steps = set()
    for c in bound(thin):
        if int(c["RING"]):
            ring_steps.add(int(c["Z_STEPS"]))
            continue
        tiles = cdiv(thin.OD, output_tile(c)[0])
        steps_by_tiles.setdefault(tiles, set()).add(int(c["Z_STEPS"]))
    assert steps_by_tiles == {1: {1}, 2: {1, 2}, 4: {1, 2, 4}}
    # The ring walks single depths, at least 4 of them, and no walk is twice the depth's length.
    assert ring_steps == {4, 6}


def test_plan_of_the_depth_ring() -> None:
    config = Config.of(BLOG_RING)
    plan = FAMILY.plan(BLOG, config)
    (launch,) = plan.launches
    assert dict(plan.defines)["RING"] == 1
    assert launch.block == (32, 8, 1)
    # 124 x 124 outputs in 64 x 32 tiles; 252 depths in walks of 8.
    assert launch.grid == (2, 4, 32)
    # 3 stages of one input slice: (32 + 4) rows of (64 + 4) floats.
    assert tile_bytes(BLOG, config) == 3 * 36 * 68 * 4 == 29376
    assert launch.smem_bytes == 0
    big = Config.of(ring(TILE_Y=16))
    assert tile_bytes(BLOG, big) == 3 * 68 * 68 * 4 == FAMILY.plan(BLOG, big).launches[0].smem_bytes
    space = bound(BLOG)
    assert space.is_valid(config) and space.is_valid(big)
    rings = [c for c in space if int(c["RING"])]
    assert rings
    for c in rings:
        assert int(c["TILE_Z"]) == 1 and int(c["USE_SMEM"]) == 1 and int(c["Z_STEPS"]) >= 4
        assert output_tile(c)[0] == 1
    # Too many accumulators for the register budget: 8 rows x 2 columns x 5 depths.
    assert not space.is_valid(Config.of(ring(COARSEN=8, TILE_Y=4)))
    # The tile walks keep their 1, 2, 4 or 8 steps.
    assert {int(c["Z_STEPS"]) for c in space if not int(c["RING"])} == {1, 2, 4, 8}


def test_large_tiles_use_dynamic_shared_memory() -> None:
    values = dict(
        TILE_X=32, TILE_Y=8, TILE_Z=1, COARSEN=8, COARSEN_AXIS=2, VEC=4, USE_SMEM=1, Z_STEPS=1
    )
    # Stored before RING existed: the same kernel as RING = 0.
    assert FAMILY.plan(BLOG, Config.of(values)) == FAMILY.plan(
        BLOG, Config.of(dict(values, RING=0))
    )
    values["RING"] = 0
    config = Config.of(values)
    (launch,) = FAMILY.plan(BLOG, config).launches
    # (8 + 4) x (8 + 4) x (128 + 4) floats.
    assert tile_bytes(BLOG, config) == 12 * 12 * 132 * 4 == launch.smem_bytes > STATIC_SMEM
    assert bound(BLOG).is_valid(config)


@pytest.mark.slow
@pytest.mark.parametrize("problem", SHAPES, ids=str)
def test_space_binds_and_every_config_launches(problem: Conv3dProblem) -> None:
    FAMILY.check(problem)
    space = bound(problem)
    assert len(space) > 0
    for config in space:
        d = config.as_dict()
        plan = FAMILY.plan(problem, config)
        (launch,) = plan.launches
        assert launch.block == (d["TILE_X"], d["TILE_Y"], d["TILE_Z"])
        assert launch.threads % LIMITS.WARP_SIZE == 0
        assert launch.threads <= LIMITS.MAX_THREADS
        smem = tile_bytes(problem, config)
        assert smem <= LIMITS.SMEM_PER_BLOCK_OPTIN
        assert launch.smem_bytes == (smem if smem > STATIC_SMEM else 0)
        assert d["USE_SMEM"] or smem == 0
        # The grid covers the output exactly: no tile wholly outside it, and every block's
        # first depth tile inside it.
        oz, oy, ox = output_tile(config)
        depth_tiles = cdiv(problem.OD, oz)
        assert launch.grid == (
            cdiv(problem.OC, ox),
            cdiv(problem.OR, oy),
            cdiv(depth_tiles, d["Z_STEPS"]),
        )
        assert (launch.grid[2] - 1) * d["Z_STEPS"] < depth_tiles
        assert launch.grid[1] <= 65535 and launch.grid[2] <= 65535
        # Accumulators and a window row within the register budget.
        cz, cy, cx = per_thread(config)
        assert cz * cy * cx == d["COARSEN"] * (d["VEC"] if d["COARSEN_AXIS"] else 1)
        need = cz * cy * cx + cx + problem.Kc + 24
        assert need <= register_budget(launch.threads)
        assert d["VEC"] == 1 or d["COARSEN_AXIS"] != 0


def test_space_holds_every_axis_and_both_paths_at_the_blog_shape() -> None:
    space = bound(BLOG)
    combos = {(int(c["COARSEN_AXIS"]), int(c["USE_SMEM"]), int(c["VEC"])) for c in space}
    for axis, smem in itertools.product((0, 1, 2), (0, 1)):
        assert (axis, smem, 1) in combos
    assert (2, 1, 4) in combos and (1, 1, 2) in combos
    # The blog's 8 x 8 x 8 block without coarsening is there too.
    assert space.is_valid(
        Config.of(
            dict(
                TILE_X=8,
                TILE_Y=8,
                TILE_Z=8,
                COARSEN=1,
                COARSEN_AXIS=2,
                VEC=1,
                USE_SMEM=1,
                Z_STEPS=1,
                RING=0,
            )
        )
    )


def test_check_refuses_another_kind_and_a_filter_past_the_constant_bank() -> None:
    with pytest.raises(UnsupportedProblem):
        FAMILY.check(ConvProblem(N=8, K=3, C=1, F=1))
    with pytest.raises(UnsupportedProblem) as err:
        FAMILY.check(Conv3dProblem(D=50, R=50, Cc=50, Kd=26, Kr=26, Kc=26))
    assert "\n" not in str(err.value)
    FAMILY.check(Conv3dProblem(D=50, R=50, Cc=50, Kd=25, Kr=25, Kc=25))


def test_numpy_reference_is_the_definition() -> None:
    problem = Conv3dProblem(D=5, R=6, Cc=7, Kd=2, Kr=3, Kc=4)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(problem.input_shape)
    w = rng.standard_normal(problem.filter_shape)
    expect = np.zeros(problem.output_shape)
    for z, y, c in itertools.product(*(range(n) for n in problem.output_shape)):
        expect[z, y, c] = np.sum(x[z : z + 2, y : y + 3, c : c + 4] * w)
    np.testing.assert_allclose(reference_numpy(problem, x, w), expect, rtol=1e-12, atol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("problem", "values"), COMPILE_SAMPLE, ids=[f"{p}:{v}" for p, v in COMPILE_SAMPLE]
)
def test_nvrtc_compiles_without_spills(compiler, problem: Conv3dProblem, values: dict) -> None:
    config = Config.of(values)
    assert bound(problem).is_valid(config), config
    plan = FAMILY.plan(problem, config)
    compiled = compiler.compile(plan)
    res = compiled.resources["conv3d"]
    (launch,) = plan.launches
    assert res.spill_stores == 0 and res.spill_loads == 0, res
    smem = tile_bytes(problem, config)
    assert res.smem_bytes == (smem if smem <= STATIC_SMEM else 0)
    assert res.registers <= register_budget(launch.threads)
    assert res.registers * launch.threads <= LIMITS.REGS_PER_BLOCK


def test_reference_compiles(compiler) -> None:
    compiled = compiler.compile(FAMILY.reference_plan(ODD_SHAPES[0]))
    assert compiled.resources["reference_conv3d"].spill_stores == 0
