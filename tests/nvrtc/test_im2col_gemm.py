"""im2col_gemm without a GPU: the space binds, both launches cover their work, NVRTC compiles it."""

from __future__ import annotations

import pytest

from autotune.families import UnsupportedProblem, get_family
from autotune.families.im2col_gemm import shared_bytes, unrolled_shape
from autotune.families.plan import tiled_threads
from autotune.model.problem import ConvProblem
from autotune.model.shapes import named_shapes
from autotune.model.space import ARCH_LIMITS, Config

FAMILY = get_family("im2col_gemm")
LIMITS = ARCH_LIMITS["sm_90"]
ODD_SHAPES = [
    ConvProblem(N=29, K=5, C=7, F=9),
    ConvProblem(N=33, K=3, C=64, F=70, B=3),
    ConvProblem(N=13, K=11, C=3, F=20, stride=4, B=2),
    ConvProblem(N=1, K=1, C=1, F=1),
    ConvProblem(N=16, K=1, C=8, F=33, stride=2, B=2),
]
SHAPES = named_shapes("general") + named_shapes("alexnet") + named_shapes("overfeat") + ODD_SHAPES


def tile(bm: int, bn: int, bk: int, tm: int, tn: int, vec: int, unroll_block: int) -> dict:
    return dict(BM=bm, BN=bn, BK=bk, TM=tm, TN=tn, VEC=vec, UNROLL_BLOCK=unroll_block)


# (problem, config): the largest tiles, the SGEMM-class 128 x 128 / 8 x 8 at BK 8 and 16, every
# VEC, small tiles, odd sizes with partial tiles everywhere, stride 4, every unroll block size.
COMPILE_SAMPLE = [
    (ConvProblem(N=128, K=3, C=64, F=64), tile(64, 128, 8, 8, 8, 4, 256)),
    (ConvProblem(N=256, K=3, C=256, F=256), tile(128, 128, 8, 8, 8, 4, 512)),
    (ConvProblem(N=256, K=5, C=256, F=256), tile(128, 128, 16, 8, 8, 4, 1024)),
    (ConvProblem(N=256, K=7, C=256, F=256), tile(256, 128, 8, 8, 8, 2, 128)),
    (ConvProblem(N=12, K=3, C=512, F=1024, B=128), tile(128, 256, 8, 8, 8, 4, 64)),
    (ConvProblem(N=32, K=3, C=64, F=64), tile(32, 32, 16, 4, 4, 4, 256)),
    (ConvProblem(N=32, K=5, C=64, F=64), tile(32, 64, 4, 2, 2, 2, 1024)),
    (ConvProblem(N=55, K=11, C=3, F=64, B=128, stride=4), tile(64, 64, 8, 4, 4, 1, 128)),
    (ConvProblem(N=33, K=3, C=64, F=70, B=3), tile(128, 64, 32, 8, 4, 1, 64)),
    (ConvProblem(N=29, K=5, C=7, F=9), tile(32, 256, 8, 2, 8, 1, 512)),
]


def bound(problem: ConvProblem):
    return FAMILY.load_space().bind(problem.fields(), LIMITS)


@pytest.mark.slow
@pytest.mark.parametrize("problem", SHAPES, ids=str)
def test_space_binds_and_every_config_launches(problem: ConvProblem) -> None:
    FAMILY.check(problem)
    space = bound(problem)
    assert len(space) > 0
    rows, pixels = problem.C * problem.K**2, problem.N**2
    for config in space:
        plan = FAMILY.plan(problem, config)
        unroll, gemm = plan.launches
        bm, bn, bk = int(config["BM"]), int(config["BN"]), int(config["BK"])
        tm, tn, vec = int(config["TM"]), int(config["TN"]), int(config["VEC"])
        block = int(config["UNROLL_BLOCK"])
        # The unroll kernel: a thread per column of a block, rows in y (strided past 65535).
        assert unroll.block == (block, 1, 1) and unroll.threads <= LIMITS.MAX_THREADS
        ux, uy, uz = unroll.grid
        assert ux * block >= pixels and (ux - 1) * block < pixels
        assert uy == min(rows, 65535) and uz == problem.B
        # The GEMM: whole warps, aligned vectors, shared memory within the opt-in limit.
        assert bm % tm == 0 and bn % tn == 0 and bk % vec == 0
        assert rows % vec == 0 and pixels % vec == 0
        assert gemm.block == (tiled_threads(config), 1, 1)
        assert gemm.threads % LIMITS.WARP_SIZE == 0 and gemm.threads <= LIMITS.MAX_THREADS
        assert gemm.threads % (bk // vec) == 0
        assert gemm.smem_bytes == shared_bytes(config) <= LIMITS.SMEM_PER_BLOCK_OPTIN
        assert tm * tn + tm + tn <= LIMITS.REGS_PER_BLOCK // gemm.threads
        gx, gy, gz = gemm.grid
        assert gx * bn >= pixels and (gx - 1) * bn < pixels
        assert gy * bm >= problem.F and (gy - 1) * bm < problem.F
        assert gz == problem.B and gy <= 65535
        assert gemm.args == ("w", "x_unroll", "y") and unroll.args == ("x", "x_unroll")


@pytest.mark.parametrize("problem", SHAPES, ids=str)
def test_scratch_is_the_unrolled_matrix(problem: ConvProblem) -> None:
    config = bound(problem).configs[0]
    plan = FAMILY.plan(problem, config)
    p = problem
    assert plan.scratch == (("x_unroll", (p.B, p.C * p.K * p.K, p.N * p.N)),)
    assert plan.scratch_bytes == 4 * p.B * p.C * p.K * p.K * p.N * p.N
    assert unrolled_shape(p) == plan.scratch[0][1]
    # Both kernels are timed; nothing runs outside the timed region.
    assert plan.entries == ("im2col_unroll", "im2col_gemm")
    assert plan.setup == () and plan.finish == ()


def test_replication_factor_of_the_lecture_example() -> None:
    # ECE408's small example: a 2 x 2 output of a 2 x 2 filter over 3 channels of 3 x 3 inputs
    # unrolls 27 input elements into 3 * (2 * 2) * (2 * 2) = 48, a replication factor of 1.78 ...
    small = ConvProblem(N=2, K=2, C=3, F=1)
    scratch = FAMILY.plan(small, bound(small).configs[0]).scratch_bytes
    assert scratch == 4 * 48 and round(scratch / (4 * 27), 2) == 1.78
    # ... and a large layer's unrolled matrix is about K*K / stride^2 times its input.
    big = ConvProblem(N=256, K=7, C=256, F=256)
    scratch = FAMILY.plan(big, bound(big).configs[0]).scratch_bytes
    assert 40 < scratch / (4 * big.C * big.input_size**2) < 49


def test_rows_past_the_grid_limit_are_strided() -> None:
    problem = ConvProblem(N=8, K=13, C=512, F=8)  # 86528 unrolled rows
    space = bound(problem)
    assert len(space) > 0
    unroll, _ = FAMILY.plan(problem, space.configs[0]).launches
    assert unroll.grid[1] == 65535


def test_plan_defines() -> None:
    problem = ConvProblem(N=128, K=3, C=64, F=64, B=2, stride=2)
    config = Config.of(dict(BM=64, BN=128, BK=8, TM=8, TN=8, VEC=4, UNROLL_BLOCK=256))
    plan = FAMILY.plan(problem, config)
    assert dict(plan.defines) == dict(
        B=2, C=64, N=128, K=3, F=64, STRIDE=2, BM=64, BN=128, BK=8, TM=8, TN=8, VEC=4,
        UNROLL_BLOCK=256,
    )  # fmt: skip
    unroll, gemm = plan.launches
    assert unroll.grid == (64, 576, 2)
    assert gemm.grid == (128, 1, 2) and gemm.block == (128, 1, 1)
    assert gemm.smem_bytes == 2 * 8 * (64 + 4 + 128) * 4


def test_space_refuses_misaligned_vectors() -> None:
    odd = bound(ConvProblem(N=29, K=5, C=7, F=9))  # 841 pixels, 175 rows: scalar loads only
    assert {int(c["VEC"]) for c in odd} == {1}
    even = bound(ConvProblem(N=32, K=3, C=64, F=64))
    assert {int(c["VEC"]) for c in even} == {1, 2, 4}


@pytest.mark.parametrize(
    "problem",
    [
        ConvProblem(N=256, K=11, C=512, F=4),  # 61952 x 65536 unrolled matrix
        ConvProblem(N=2048, K=3, C=512, F=4),
    ],
    ids=str,
)
def test_check_refuses(problem: ConvProblem) -> None:
    with pytest.raises(UnsupportedProblem) as err:
        FAMILY.check(problem)
    assert "\n" not in str(err.value) and "32-bit" in str(err.value)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("problem", "values"), COMPILE_SAMPLE, ids=[f"{p}:{v}" for p, v in COMPILE_SAMPLE]
)
def test_nvrtc_compiles_without_spills(compiler, problem: ConvProblem, values: dict) -> None:
    config = Config.of(values)
    assert bound(problem).is_valid(config)
    plan = FAMILY.plan(problem, config)
    compiled = compiler.compile(plan)
    for launch in plan.launches:
        res = compiled.resources[launch.kernel]
        assert res.spill_stores == 0 and res.spill_loads == 0 and res.stack_bytes == 0
        assert res.smem_bytes == 0  # the GEMM's tiles are dynamic, sized by the plan
        assert res.registers <= LIMITS.REGS_PER_THREAD
        assert -(-res.registers // 8) * 8 * launch.threads <= LIMITS.REGS_PER_BLOCK
    gemm = plan.launches[1]
    assert gemm.smem_bytes <= LIMITS.SMEM_PER_BLOCK_OPTIN
    if values["TM"] * values["TN"] == 64 and gemm.threads == 256 and values["BK"] == 8:
        # The SGEMM-class tile keeps two blocks per multiprocessor: 128 registers at most.
        assert compiled.resources["im2col_gemm"].registers <= 128
