"""tc_implicit_gemm without a GPU: the space binds for every dtype, plans match its constraints,
and NVRTC compiles a sample of every dtype's space for sm_90 without spills."""

from __future__ import annotations

import random

import pytest

from autotune.families import UnsupportedProblem, get_family
from autotune.families.plan import REDUCE_BLOCK
from autotune.families.tc_implicit_gemm import (
    shared_bytes,
    threads,
)
from autotune.model.problem import ConvProblem
from autotune.model.shapes import named_shapes
from autotune.model.space import ARCH_LIMITS, Config

FAMILY = get_family("tc_implicit_gemm")
LIMITS = ARCH_LIMITS["sm_90"]
DTYPES = ("tf32", "bf16", "fp16")


def nhwc(problem: ConvProblem, dtype: str) -> ConvProblem:
    p = problem
    return ConvProblem(p.N, p.K, p.C, p.F, p.B, p.stride, dtype=dtype, layout="NHWC")


ODD = [
    ConvProblem(N=7, K=3, C=5, F=10, B=3),
    ConvProblem(N=13, K=11, C=3, F=100, stride=4),
    ConvProblem(N=37, K=5, C=12, F=10, B=3, stride=2),
    ConvProblem(N=1, K=1, C=96, F=7),
    ConvProblem(N=13, K=3, C=64, F=100, B=1, stride=1),
]
LAYERS = named_shapes("alexnet") + named_shapes("overfeat")
SHAPES = [nhwc(p, d) for p in LAYERS + ODD for d in DTYPES]
BASE = dict(
    BM=128, BN=128, BK=32, WM=64, WN=64, STAGES=3, SWIZZLE=1, SPLIT_K=1, GATHER=0, MIN_BLOCKS=1,
    FRAG_DB=0, RASTER=1, TF32_ROUND=0,
)  # fmt: skip


def bound(problem: ConvProblem):
    return FAMILY.load_space().bind(problem.fields(), LIMITS)


def rows(config: Config, element_bytes: int) -> int:
    return int(config["BK"]) * element_bytes + (0 if int(config["SWIZZLE"]) else 16)


@pytest.mark.parametrize("problem", SHAPES, ids=lambda p: p.key)
def test_space_binds_and_plans_match_the_constraints(problem: ConvProblem) -> None:
    FAMILY.check(problem)
    space = bound(problem)
    assert len(space) > 0
    es = problem.precision.bytes
    pixels = problem.B * problem.N * problem.N
    configs = list(space)
    for config in random.Random(problem.key).sample(configs, min(100, len(configs))):
        v = {k: int(x) for k, x in config.as_dict().items()}
        plan = FAMILY.plan(problem, config)
        gemm = plan.launches[0]
        assert dict(plan.defines)["STORAGE"] == {"tf32": 0, "fp16": 1, "bf16": 2}[problem.dtype]
        assert gemm.block == (threads(config), 1, 1)
        assert gemm.threads % LIMITS.WARP_SIZE == 0 and gemm.threads <= LIMITS.MAX_THREADS
        # The loader keeps one chunk column a thread: the chunks of a row divide the threads.
        assert gemm.threads % (v["BK"] * es // 16) == 0 and v["BK"] * es >= 32
        assert (
            gemm.smem_bytes
            == shared_bytes(config, es)
            == v["STAGES"] * (v["BM"] + v["BN"]) * rows(config, es)
        )
        # MIN_BLOCKS blocks fit one multiprocessor's shared memory and register file.
        assert v["MIN_BLOCKS"] * (gemm.smem_bytes + 1024) <= LIMITS.SMEM_PER_BLOCK_OPTIN + 1024
        assert v["MIN_BLOCKS"] * gemm.threads * 32 <= LIMITS.REGS_PER_BLOCK
        if v["GATHER"] == 0:
            assert problem.C % (16 // es) == 0
        # The grid covers M = B*N*N pixels and F filters exactly, the splits in z.
        tiles_m, tiles_n = -(-pixels // v["BM"]), -(-problem.F // v["BN"])
        if v["RASTER"]:
            assert gemm.grid == (tiles_m * tiles_n, 1, v["SPLIT_K"])
        else:
            assert gemm.grid == (tiles_m, tiles_n, v["SPLIT_K"]) and tiles_n <= 65535
        assert gemm.grid[0] <= 2**31 - 1
        if v["SPLIT_K"] == 1:
            assert len(plan.launches) == 1 and plan.scratch == ()
            assert gemm.args == ("x", "w", "y")
        else:
            # No split is left without reduction tiles; a second kernel adds the partial sums.
            ktiles = -(-(problem.K**2) * problem.C // v["BK"])
            assert (v["SPLIT_K"] - 1) * -(-ktiles // v["SPLIT_K"]) < ktiles
            assert gemm.args == ("x", "w", "y_split")
            assert plan.scratch == (("y_split", (v["SPLIT_K"], pixels, problem.F)),)
            (reduce,) = plan.launches[1:]
            assert reduce.args == ("y_split", "y") and reduce.block == (REDUCE_BLOCK, 1, 1)
            assert (reduce.grid[0] - 1) * REDUCE_BLOCK < pixels * problem.F
            assert reduce.grid[0] * REDUCE_BLOCK >= pixels * problem.F


def test_the_kernel_reduces_in_blocks_of_the_modules_reduce_block() -> None:
    assert f"#define REDUCE_BLOCK {REDUCE_BLOCK}\n" in FAMILY.source_path.read_text()


@pytest.mark.parametrize(
    "problem",
    [
        ConvProblem(N=13, K=3, C=192, F=384, B=128),  # fp32, NCHW
        ConvProblem(N=13, K=3, C=192, F=384, B=128, dtype="bf16"),  # NCHW
        ConvProblem(N=13, K=3, C=192, F=384, B=128, layout="NHWC"),  # fp32
        ConvProblem(N=2048, K=3, C=512, F=4, dtype="bf16", layout="NHWC"),  # 2^31 + elements
    ],
    ids=str,
)
def test_check_refuses_what_it_does_not_compute(problem: ConvProblem) -> None:
    with pytest.raises(UnsupportedProblem):
        FAMILY.check(problem)


def test_gather_only_for_channels_that_are_not_whole_chunks() -> None:
    def gathers(c: int, dtype: str) -> set[int]:
        return {int(x["GATHER"]) for x in bound(nhwc(ConvProblem(N=13, K=3, C=c, F=64), dtype))}

    assert gathers(3, "bf16") == gathers(3, "tf32") == {1}  # AlexNet conv1
    assert gathers(64, "bf16") == gathers(64, "tf32") == {0}
    assert gathers(12, "fp16") == {1} and gathers(12, "tf32") == {0}  # 8 halves, 4 floats


def test_space_holds_the_large_tiles_and_refuses_what_cannot_launch() -> None:
    space = bound(nhwc(ConvProblem(N=12, K=3, C=1024, F=1024, B=128), "bf16"))
    base = Config.of({**BASE, "BK": 64})
    assert space.is_valid(base)
    assert space.is_valid(Config.of({**base.as_dict(), "BM": 256, "STAGES": 4}))
    # 64 x 64 warp tiles in 8 warps need all 255 registers: two such blocks cannot be resident.
    assert not space.is_valid(Config.of({**base.as_dict(), "BM": 256, "MIN_BLOCKS": 2}))
    # Five stages of 256 + 256 rows of 128 bytes are 320 KB of shared memory.
    assert not space.is_valid(Config.of({**base.as_dict(), "BM": 256, "BN": 256, "STAGES": 5}))
    assert not space.is_valid(Config.of({**base.as_dict(), "WN": 8 * 3}))  # not in the space
    # Split-K is for grids that do not fill the GPU: this one has 1152 tiles.
    assert not space.is_valid(Config.of({**base.as_dict(), "SPLIT_K": 2}))
    small = bound(nhwc(ConvProblem(N=7, K=3, C=64, F=64, B=1), "bf16"))
    assert {int(c["SPLIT_K"]) for c in small} == {1, 2, 4, 8}
    # A tf32 row of BK = 8 floats is one 32-byte k-step; 16-bit rows need BK >= 16.
    assert {int(c["BK"]) for c in bound(nhwc(ConvProblem(N=13, K=3, C=64, F=64), "tf32"))} == {
        8, 16, 32, 64,
    }  # fmt: skip
    assert {int(c["BK"]) for c in space} == {16, 32, 64}


def test_plan_defines_and_launch() -> None:
    problem = nhwc(ConvProblem(N=13, K=3, C=192, F=384, B=128), "bf16")
    config = Config.of({**BASE, "RASTER": 0, "SPLIT_K": 1})
    plan = FAMILY.plan(problem, config)
    assert dict(plan.defines) == dict(
        B=128, C=192, N=13, K=3, F=384, STRIDE=1, STORAGE=2, **BASE
    ) | {"RASTER": 0}
    (launch,) = plan.launches
    assert launch.kernel == "tc_implicit_gemm" and launch.args == ("x", "w", "y")
    assert launch.grid == (-(-128 * 169 // 128), 3, 1) and launch.block == (128, 1, 1)
    assert launch.smem_bytes == 3 * 256 * 64
    tf32 = FAMILY.plan(nhwc(problem, "tf32"), config)
    assert dict(tf32.defines)["STORAGE"] == 0 and tf32.launches[0].smem_bytes == 3 * 256 * 128
    padded = FAMILY.plan(problem, Config.of({**BASE, "SWIZZLE": 0}))
    assert padded.launches[0].smem_bytes == 3 * 256 * (64 + 16)


def _compile_sample() -> list[tuple[ConvProblem, Config]]:
    """Per dtype: configurations drawn from the spaces of a large, a C = 3 and an odd problem,
    the largest tiles (most registers) and the most threads over-represented."""
    rng = random.Random(20)
    picks = []
    for dtype in DTYPES:
        for layer in (LAYERS[2], LAYERS[0], ODD[2]):
            problem = nhwc(layer, dtype)
            configs = list(bound(problem))
            heavy = [c for c in configs if int(c["WM"]) * int(c["WN"]) >= 2048]
            many = [c for c in configs if threads(c) * int(c["MIN_BLOCKS"]) >= 1024]
            for pool in (configs, heavy, many):
                picks += [(problem, c) for c in rng.sample(pool, min(3, len(pool)))]
    return picks


@pytest.mark.slow
@pytest.mark.parametrize(("problem", "config"), _compile_sample(), ids=str)
def test_nvrtc_compiles_without_spills(compiler, problem: ConvProblem, config: Config) -> None:
    plan = FAMILY.plan(problem, config)
    compiled = compiler.compile(plan)
    for launch in plan.launches:
        res = compiled.resources[launch.kernel]
        assert res.spill_stores == 0 and res.spill_loads == 0 and res.stack_bytes == 0
        blocks = int(config["MIN_BLOCKS"]) if launch.kernel == "tc_implicit_gemm" else 1
        assert -(-res.registers // 8) * 8 * launch.threads * blocks <= LIMITS.REGS_PER_BLOCK
        assert res.registers <= LIMITS.REGS_PER_THREAD
