"""sgemm without a GPU: the space binds at every kind of GEMM shape, launches fit, NVRTC builds."""

from __future__ import annotations

import random

import pytest

from autotune.families.sgemm import TUNABLES, Sgemm
from autotune.model.problem import GemmProblem
from autotune.model.shapes import named_shapes
from autotune.model.space import ARCH_LIMITS, Config

FAMILY = Sgemm()
LIMITS = ARCH_LIMITS["sm_90"]

ODD_SHAPES = [
    GemmProblem(M=37, N=61, K=29),
    GemmProblem(M=1, N=1000, K=4096),
    GemmProblem(M=3, N=1, K=5),
    GemmProblem(M=1, N=1, K=1),
    GemmProblem(M=129, N=257, K=65),
    GemmProblem(M=70000, N=8, K=8),  # more M tiles than grid.y holds with small BM
]
SHAPES = named_shapes("alexnet_fc") + ODD_SHAPES

BIG = dict(BM=128, BN=128, BK=8, TM=8, TN=8, VEC=4, DOUBLE_BUFFER=1, SPLIT_K=1, WARP_TX=16)
# (problem, config): the SGEMM-class 128 x 128 tile, the largest tiles and loads, split K, GEMV-like
# single-row tiles, scalar loads at odd sizes, no double buffering.
COMPILE_SAMPLE = [
    (GemmProblem(M=4096, N=4096, K=4096), {**BIG, "MIN_BLOCKS": 2}),
    (GemmProblem(M=4096, N=4096, K=4096), {**BIG, "BK": 16, "WARP_TX": 8, "MIN_BLOCKS": 2}),
    (GemmProblem(M=8192, N=8192, K=8192), {**BIG, "BN": 256, "WARP_TX": 32, "MIN_BLOCKS": 1}),
    (GemmProblem(M=8192, N=8192, K=8192), {**BIG, "BM": 256, "MIN_BLOCKS": 1}),
    (
        GemmProblem(M=128, N=4096, K=9216),
        dict(
            BM=64,
            BN=64,
            BK=32,
            TM=4,
            TN=4,
            VEC=4,
            DOUBLE_BUFFER=1,
            SPLIT_K=8,
            WARP_TX=8,
            MIN_BLOCKS=2,
        ),
    ),
    (
        GemmProblem(M=1, N=4096, K=9216),
        dict(
            BM=1,
            BN=256,
            BK=16,
            TM=1,
            TN=1,
            VEC=4,
            DOUBLE_BUFFER=1,
            SPLIT_K=16,
            WARP_TX=32,
            MIN_BLOCKS=2,
        ),
    ),
    (
        GemmProblem(M=1, N=1000, K=4096),
        dict(
            BM=8,
            BN=64,
            BK=16,
            TM=2,
            TN=4,
            VEC=2,
            DOUBLE_BUFFER=0,
            SPLIT_K=4,
            WARP_TX=16,
            MIN_BLOCKS=1,
        ),
    ),
    (
        GemmProblem(M=37, N=61, K=29),
        dict(
            BM=16,
            BN=32,
            BK=4,
            TM=2,
            TN=2,
            VEC=1,
            DOUBLE_BUFFER=1,
            SPLIT_K=1,
            WARP_TX=4,
            MIN_BLOCKS=1,
        ),
    ),
]


def shared_bytes(config: Config) -> int:
    """The kernel's static shared memory: BK rows of the padded transposed A and of B."""
    v = config.as_dict()
    return (1 + int(v["DOUBLE_BUFFER"])) * int(v["BK"]) * (int(v["BM"]) + 4 + int(v["BN"])) * 4


def bound(problem: GemmProblem):
    return FAMILY.load_space().bind(problem.fields(), LIMITS)


@pytest.mark.slow
@pytest.mark.parametrize("problem", SHAPES, ids=str)
def test_space_binds_and_every_config_launches(problem: GemmProblem) -> None:
    FAMILY.check(problem)
    space = bound(problem)
    assert len(space) > 0
    configs = space.configs
    if len(configs) > 3000:  # the large shapes: a fixed sample keeps the test fast
        configs = random.Random(0).sample(configs, 3000)
    for config in configs:
        v = {name: int(config[name]) for name in TUNABLES}
        plan = FAMILY.plan(problem, config)
        main = plan.launches[0]
        assert main.kernel == "sgemm" and main.smem_bytes == 0
        assert main.threads == (v["BM"] // v["TM"]) * (v["BN"] // v["TN"])
        assert main.threads % LIMITS.WARP_SIZE == 0 and main.threads <= LIMITS.MAX_THREADS
        assert shared_bytes(config) <= LIMITS.SMEM_PER_BLOCK
        gx, gy, gz = main.grid
        assert gx * v["BN"] >= problem.N > (gx - 1) * v["BN"]
        assert gy * v["BM"] >= problem.M > (gy - 1) * v["BM"]
        assert gy <= 65535 and gz == v["SPLIT_K"]
        assert problem.K % v["VEC"] == 0 and problem.N % v["VEC"] == 0
        if v["SPLIT_K"] == 1:
            assert len(plan.launches) == 1 and plan.scratch == () and main.args == ("a", "b", "c")
        else:
            assert [launch.kernel for launch in plan.launches] == ["sgemm", "sgemm_reduce"]
            assert plan.scratch == (("partial", (v["SPLIT_K"], problem.M, problem.N)),)
            assert plan.scratch_bytes == 4 * v["SPLIT_K"] * problem.M * problem.N
            (rx, _, _), (rb, _, _) = plan.launches[1].grid, plan.launches[1].block
            assert rx * rb >= problem.M * problem.N


def test_gemv_like_shapes_keep_single_row_tiles() -> None:
    space = bound(GemmProblem(M=1, N=4096, K=9216))
    assert {int(c["BM"]) for c in space} == {1, 2, 4, 8}
    assert any(int(c["SPLIT_K"]) > 1 for c in space)


def test_odd_sizes_fall_back_to_scalar_loads() -> None:
    assert {int(c["VEC"]) for c in bound(GemmProblem(M=37, N=61, K=29))} == {1}
    assert {int(c["VEC"]) for c in bound(GemmProblem(M=37, N=62, K=30))} == {1, 2}
    assert {int(c["VEC"]) for c in bound(GemmProblem(M=4096, N=4096, K=4096))} == {1, 2, 4}


def test_plan_defines() -> None:
    problem = GemmProblem(M=128, N=1000, K=4096)
    config = Config.of({**BIG, "SPLIT_K": 4, "MIN_BLOCKS": 2})
    plan = FAMILY.plan(problem, config)
    assert dict(plan.defines) == {"M": 128, "N": 1000, "K": 4096, **config.as_dict()}
    assert plan.entries == ("sgemm", "sgemm_reduce")
    assert plan.launches[0].grid == (8, 1, 4) and plan.launches[0].block == (256, 1, 1)
    assert FAMILY.buffers(problem).outputs == (("c", (128, 1000)),)
    assert FAMILY.reference_plan(problem).entries == ("reference_gemm",)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("problem", "values"), COMPILE_SAMPLE, ids=[f"{p}:{v}" for p, v in COMPILE_SAMPLE]
)
def test_nvrtc_compiles_without_spills(compiler, problem: GemmProblem, values: dict) -> None:
    config = Config.of(values)
    assert bound(problem).is_valid(config)
    plan = FAMILY.plan(problem, config)
    compiled = compiler.compile(plan)
    res = compiled.resources["sgemm"]
    threads = plan.launches[0].threads
    cap = min(LIMITS.REGS_PER_THREAD, LIMITS.REGS_PER_BLOCK // (threads * values["MIN_BLOCKS"]))
    assert res.spill_stores == 0 and res.spill_loads == 0, res
    assert res.smem_bytes == shared_bytes(config) <= LIMITS.SMEM_PER_BLOCK
    assert res.registers <= cap
    assert -(-res.registers // 8) * 8 * threads <= LIMITS.REGS_PER_BLOCK
    if values["SPLIT_K"] > 1:
        assert compiled.resources["sgemm_reduce"].spill_stores == 0


def test_reference_compiles(compiler) -> None:
    compiled = compiler.compile(FAMILY.reference_plan(GemmProblem(M=37, N=61, K=29)))
    assert compiled.resources["reference_gemm"].spill_stores == 0
