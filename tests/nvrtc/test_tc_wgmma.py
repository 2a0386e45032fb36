"""tc_wgmma without a GPU: problems refused and accepted, the space matches the plan and the
kernel's layout, and sampled configurations compile for sm_90a with NVRTC without spills."""

from __future__ import annotations

import dataclasses
import random
import re

import pytest

from autotune.families import UnsupportedProblem, get_family
from autotune.families.plan import REDUCE_BLOCK, TensorMap, check_tensor_map
from autotune.families.tc_wgmma import (
    S2D_BLOCK,
    S2D_BUFFERS,
    STREAM_K_BLOCKS,
    WARPGROUP,
    computed,
    space_to_depth,
    threads,
    tile_count,
)
from autotune.families.tc_wgmma_memory import (
    ROW_BYTES,
    cluster,
    half_block,
    reduction_step,
    shared_bytes,
    step_bytes,
    tensor_maps,
    warpgroup_rows,
)
from autotune.gpu.compiler import CompileError, Compiler
from autotune.model.problem import ConvProblem
from autotune.model.shapes import named_shapes
from autotune.model.space import ARCH_LIMITS, Config
from autotune.tuning.studies import plan_studies

FAMILY = get_family("tc_wgmma")
LIMITS = ARCH_LIMITS["sm_90"]


def nhwc(problem: ConvProblem, dtype: str = "bf16") -> ConvProblem:
    return ConvProblem(
        N=problem.N, K=problem.K, C=problem.C, F=problem.F, B=problem.B, stride=problem.stride,
        dtype=dtype, layout="NHWC",
    )  # fmt: skip


# Odd shapes: channels not multiples of 8 (the element gather), F not a multiple of 8, N = 1,
# 7, 13, 37, batch 1 and 3, strides 2 and 4, 1x1 and 11x11 filters.
ODD = [
    ConvProblem(N=1, K=1, C=8, F=10),
    ConvProblem(N=7, K=3, C=16, F=100, B=3),
    ConvProblem(N=13, K=5, C=64, F=10, stride=2),
    ConvProblem(N=37, K=3, C=96, F=100, B=3),
    ConvProblem(N=7, K=11, C=8, F=64, stride=4),
    ConvProblem(N=13, K=11, C=3, F=10, B=3, stride=4),
    ConvProblem(N=7, K=5, C=5, F=100, stride=2),
]
SHAPES = [
    nhwc(p, dtype)
    for dtype in ("bf16", "tf32")
    for p in named_shapes("alexnet") + named_shapes("overfeat") + ODD
]


def bound(problem: ConvProblem):
    return FAMILY.load_space().bind(FAMILY.space_fields(problem), LIMITS)


def cfg(
    bm, bn, wg, stages, split=1, producer=0, c_outer=0, l1=0, tiles=1, tma=0, store=0, gemm_1x1=0,
    staging=1, pingpong=0, persistent=0, stream_k=0, multicast=0, split_cluster=0, group=2,
    step=128, filters_m=0,
) -> Config:  # fmt: skip
    return Config.of(
        dict(BM=bm, BN=bn, WG=wg, STAGES=stages, SPLIT_K=split, PRODUCER=producer)
        | dict(C_OUTER=c_outer, L1_CACHE=l1, TILES_PER_BLOCK=tiles, TMA=tma, STORE_TMA=store)
        | dict(GEMM_1X1=gemm_1x1, STAGING=staging, PINGPONG=pingpong, PERSISTENT=persistent)
        | dict(STREAM_K=stream_k, MULTICAST=multicast, MULTICAST_BLOCKS=group)
        | dict(SPLIT_CLUSTER=split_cluster, STEP_BYTES=step, FILTERS_M=filters_m)
    )


def tma(
    bm, bn, wg, stages, split=1, tiles=1, store=0, gemm_1x1=0, staging=1, pingpong=0,
    persistent=0, stream_k=0, multicast=0, split_cluster=0, group=2, step=128, filters_m=0,
) -> Config:  # fmt: skip
    """A configuration loading by TMA: from the producer warpgroup, in channel-block order;
    with `store`, storing its output by TMA too (through `staging` staging tiles); with
    `gemm_1x1`, a 1x1 input as a matrix; with `pingpong`, the two consumer warpgroups taking
    tiles in turn; with `persistent`, one block a multiprocessor; with `stream_k`, the last
    wave's reduction steps shared; with `multicast`, clusters of `group` blocks (two or four)
    sharing the input (1) or the filter tile (2); with `split_cluster`, a split tile's blocks as
    one cluster; with `step` = 64, 64-byte steps of the reduction; with `filters_m`, the filters
    as wgmma's M and the pixels as its N."""
    return cfg(
        bm, bn, wg, stages, split, producer=1, c_outer=1, tiles=tiles, tma=1, store=store,
        gemm_1x1=gemm_1x1, staging=staging, pingpong=pingpong, persistent=persistent,
        stream_k=stream_k, multicast=multicast, split_cluster=split_cluster, group=group,
        step=step, filters_m=filters_m,
    )  # fmt: skip


def filters_m(bm, wg, stages, **options) -> Config:
    """A configuration with the filters as wgmma's M: 64 a consumer warpgroup, BM pixels as N,
    stored by TMA."""
    return tma(bm, 64 * wg, wg, stages, store=1, filters_m=1, **options)


def test_only_tensor_core_nhwc_problems_are_computed() -> None:
    conv3 = ConvProblem(N=13, K=3, C=192, F=384, B=128)
    for dtype in ("tf32", "bf16", "fp16"):
        FAMILY.check(nhwc(conv3, dtype))
        FAMILY.check(nhwc(ConvProblem(N=55, K=11, C=3, F=64, B=128, stride=4), dtype))  # gathered
    for refused in (
        conv3,
        nhwc(conv3, "fp32"),  # FP32 products: the CUDA-core families
        ConvProblem(N=13, K=3, C=192, F=384, B=128, dtype="bf16"),  # NCHW
        ConvProblem(N=13, K=3, C=192, F=384, B=128, dtype="tf32"),
    ):
        with pytest.raises(UnsupportedProblem):
            FAMILY.check(refused)


def test_the_kernel_and_the_module_agree_on_its_constants() -> None:
    source = FAMILY.source_path.read_text()
    assert "#define STEP_BYTES 128" in source and ROW_BYTES == 128
    assert "#define BK (STEP_BYTES / ELEM_BYTES)" in source
    assert "#define ELEM_BYTES 4" in source and "#define ELEM_BYTES 2" in source
    conv3 = ConvProblem(N=13, K=3, C=192, F=384, B=128)
    assert {d: reduction_step(nhwc(conv3, d)) for d in ("tf32", "bf16", "fp16")} == {
        "tf32": 32,
        "bf16": 64,
        "fp16": 64,
    }
    assert f"#define REDUCE_BLOCK {REDUCE_BLOCK}\n" in source
    assert f"#define S2D_BLOCK {S2D_BLOCK}\n" in source
    assert "#define THREADS (128 * (WG + PRODUCER))" in source and WARPGROUP == 128
    assert "#define STAGE_BYTES ((BM + BN) * STEP_BYTES)" in source
    # One wgmma wrapper for every N the space offers: a tile's filters, or with FILTERS_M its
    # pixels.
    widths = {int(w) for w in re.findall(r"#(?:el)?if ACC_N == (\d+)", source)}
    params = {p.name: set(p.values) for p in FAMILY.load_space().parameters}
    assert widths == params["BN"] | params["BM"]


@pytest.mark.parametrize("problem", SHAPES, ids=str)
def test_every_config_plans_what_the_kernel_assumes(problem: ConvProblem) -> None:
    FAMILY.check(problem)
    space = bound(problem)
    assert len(space) > 0
    pixels = problem.B * problem.N * problem.N
    # A strided first layer is computed as its space-to-depth rewrite, after the rewrite's
    # launch: the configurations tile that layer, and its buffers are the main kernel's inputs.
    layer = computed(problem)
    rewritten = layer is not problem
    inputs = S2D_BUFFERS if rewritten else ("x", "w")
    for config in space:
        bm, bn, wg = int(config["BM"]), int(config["BN"]), int(config["WG"])
        split, producer = int(config["SPLIT_K"]), int(config["PRODUCER"])
        if config["FILTERS_M"]:  # each warpgroup 64 filters of every pixel, stored by TMA
            assert bn == 64 * wg and bm % 16 == 0 and bm // 2 <= 128
            assert config["STORE_TMA"] and problem.fused is None
            assert warpgroup_rows(config) == bm and not half_block(problem, config)
        else:
            sharing = 1 if config["PINGPONG"] else wg  # warpgroups that share a tile's rows
            mi = bm // (64 * sharing)
            assert mi in (1, 2) and mi * 64 * sharing == bm
            assert mi * bn // 2 <= 128  # accumulators a thread
        loaders = WARPGROUP * (1 if producer else wg)
        assert bm % (loaders // 8) == 0 and bn % (loaders // 8) == 0  # whole rows a thread
        if layer.C % (16 // problem.precision.bytes):  # C not whole 16-byte chunks
            assert config["C_OUTER"] == 0 and config["TMA"] == 0
        if config["TMA"]:
            assert (producer, config["C_OUTER"], config["L1_CACHE"]) == (1, 1, 0)
        else:
            assert step_bytes(config) == ROW_BYTES  # the gathers copy 128-byte rows
        in_cluster = bool(config["SPLIT_CLUSTER"])  # the splits add up in their cluster
        if in_cluster:
            assert split > 1 and config["TMA"] and not config["MULTICAST"]
            assert int(config["STAGES"]) * (bm + bn) * step_bytes(config) >= 4 * bm * bn
        if config["STORE_TMA"]:  # rows 16-byte aligned, no partial sums
            assert config["TMA"] and (split == 1 or in_cluster)
            assert problem.F * problem.precision.bytes % 16 == 0
        plan = FAMILY.plan(problem, config)
        assert plan.arch_specific
        launches = plan.launches[1:] if rewritten else plan.launches
        launch = launches[0]
        assert launch.block == (threads(config), 1, 1) and launch.threads <= LIMITS.MAX_THREADS
        smem = shared_bytes(config, problem.precision.bytes)
        assert launch.smem_bytes == smem <= LIMITS.SMEM_PER_BLOCK_OPTIN
        # Every output tile once: the block count covers them at TILES_PER_BLOCK a block (or,
        # stream-K, a block a multiprocessor); with MULTICAST, whole clusters on whole groups.
        tiles = -(-problem.F // bn) * -(-pixels // bm)
        per_block = int(config["TILES_PER_BLOCK"])
        gx, gy, gz = launch.grid
        if config["STREAM_K"]:
            assert (gx, launch.blocks_per_sm) == (STREAM_K_BLOCKS, 1)
        elif in_cluster:  # a cluster a tile, its splits along x
            assert (launch.cluster, gx, per_block) == (split, split * tiles, 1)
        else:
            blocks = cluster(config)
            pairs, clusters = tile_count(problem, config) // blocks, gx // blocks
            assert launch.cluster == blocks and gx % blocks == 0 and pairs * blocks >= tiles
            assert (clusters - 1) * per_block < pairs <= clusters * per_block
        assert gy == 1 and gz == (1 if in_cluster else split)
        defines = dict(plan.defines)
        assert defines["STORAGE"] == {"tf32": 0, "fp16": 1, "bf16": 2}[problem.dtype]
        output = "y" if split == 1 or in_cluster else "y_split"
        maps = tensor_maps(layer, config, inputs) if config["TMA"] else ()
        shared = ("sk_partials", "sk_counters") if config["STREAM_K"] else ()
        assert launch.args == (*inputs, output, *shared, *maps)
        rewrite_scratch = plan.scratch[:2] if rewritten else ()
        assert tuple(name for name, _ in rewrite_scratch) == (S2D_BUFFERS if rewritten else ())
        if split == 1 or in_cluster:
            assert len(launches) == 1
        else:
            assert split * 4 * reduction_step(problem, config) <= layer.C * layer.K**2
            assert plan.scratch == (*rewrite_scratch, ("y_split", (split, pixels, problem.F)))
            (reduce,) = launches[1:]
            assert reduce.args == ("y_split", "y")
            assert (reduce.grid[0] - 1) * REDUCE_BLOCK < pixels * problem.F
            assert reduce.grid[0] * REDUCE_BLOCK >= pixels * problem.F


def test_the_space_holds_the_fast_tiles_and_refuses_what_cannot_launch() -> None:
    space = bound(nhwc(ConvProblem(N=13, K=3, C=192, F=384, B=128)))
    assert space.is_valid(cfg(256, 128, 2, 4))
    assert space.is_valid(cfg(128, 256, 2, 4, producer=1, c_outer=1, l1=1))
    assert not space.is_valid(cfg(256, 256, 2, 3))  # 256 accumulators a thread
    assert not space.is_valid(cfg(128, 256, 2, 6))  # 289 KB of shared memory
    assert not space.is_valid(cfg(64, 128, 2, 4))  # half a warpgroup's m64 tile
    assert not space.is_valid(cfg(256, 128, 2, 4, split=2))  # 255 blocks need no split
    small = bound(nhwc(ConvProblem(N=7, K=3, C=256, F=64, B=1)))
    assert {int(c["SPLIT_K"]) for c in small} == {1, 2, 4, 8}
    # A stride-1 first layer's C = 3 fills no 16-byte chunk: the gather only, in reduction order.
    first = bound(nhwc(ConvProblem(N=224, K=3, C=3, F=64, B=32)))
    assert {int(c["C_OUTER"]) for c in first} == {int(c["TMA"]) for c in first} == {0}


# A strided first layer (C = 3) is computed as its space-to-depth rewrite: a stride-1 layer of
# stride^2 * C channels padded to a 16-byte chunk, ceil(K / stride) taps, over the input's
# stride x stride blocks, which a launch of its own writes into scratch before the main kernel.
def test_a_strided_first_layer_is_rewritten_as_space_to_depth(compiler) -> None:
    resnet = nhwc(ConvProblem(N=112, K=7, C=3, F=64, B=32, stride=2))
    assert space_to_depth(resnet) == nhwc(ConvProblem(N=112, K=4, C=16, F=64, B=32))
    assert space_to_depth(nhwc(resnet, "tf32")).C == 12  # 4 x 3 FP32 values: whole chunks
    alexnet = nhwc(ConvProblem(N=55, K=11, C=3, F=64, B=128, stride=4))
    assert (space_to_depth(alexnet).K, space_to_depth(alexnet).C) == (3, 48)
    # Not where C fills whole chunks, nor at stride 1 (nothing to fold).
    assert space_to_depth(nhwc(ConvProblem(N=56, K=3, C=64, F=64, stride=2))) is None
    assert space_to_depth(nhwc(ConvProblem(N=224, K=3, C=3, F=64))) is None
    # The configurations are the rewritten layer's: whole chunks, so channel blocks and TMA.
    space = bound(resnet)
    assert {int(c["TMA"]) for c in space} == {0, 1}
    (study,), _ = plan_studies([(FAMILY, resnet)], LIMITS)  # as every caller binds a space
    assert study.problem == resnet and len(study.space) == len(space)
    # PyTorch's conv1 (padding 3, a tail row): the rewrite reads both; the layer it writes is
    # pre-padded, its side N - 1 + K'.
    padded = dataclasses.replace(
        nhwc(ConvProblem(N=7, K=7, C=3, F=24, B=3, stride=2), "fp16"), padding=3, tail=1
    )
    assert padded.input_size == 14
    rewritten = space_to_depth(padded)
    assert (rewritten.padding, rewritten.tail, rewritten.input_size) == (0, 0, 10)
    for config in (tma(128, 64, 2, 4, store=1), cfg(64, 64, 1, 3, producer=1)):
        plan = FAMILY.plan(padded, config)
        rewrite, main = plan.launches
        assert (rewrite.kernel, rewrite.args) == ("tc_wgmma_s2d", ("x", "w", *S2D_BUFFERS))
        chunks = (3 * 10 * 10 * 16 + 24 * 4 * 4 * 16) // 8
        assert (rewrite.grid, rewrite.block) == ((-(-chunks // S2D_BLOCK), 1, 1), (S2D_BLOCK, 1, 1))
        assert main.kernel == "tc_wgmma" and main.args[:3] == (*S2D_BUFFERS, "y")
        # The scratch counts 4-byte words: the rewritten input and filters in 16 bits.
        assert plan.scratch == (("x_s2d", (3 * 10 * 10 * 8,)), ("w_s2d", (24 * 4 * 4 * 8,)))
        defines = dict(plan.defines)
        assert (defines["C"], defines["K"], defines["STRIDE"]) == (16, 4, 1)
        assert "PAD" not in defines and "TAIL" not in defines
        s2d = {k: defines[k] for k in ("S2D_STRIDE", "S2D_C", "S2D_K", "S2D_SIDE", "S2D_PAD")}
        assert s2d == dict(S2D_STRIDE=2, S2D_C=3, S2D_K=7, S2D_SIDE=14, S2D_PAD=3)
        if int(config["TMA"]):
            x_map = next(a for a in main.args if getattr(a, "buffer", "") == "x_s2d")
            assert x_map.dims == (16, 10, 10, 3) and x_map.corners == ((0, 0), (-3, -3))
        compiled = compiler.compile(plan)
        assert compiled.spills == 0, compiled.log
        assert set(compiled.resources) >= {"tc_wgmma", "tc_wgmma_s2d"}


def test_deep_pipelines_fit_where_no_staging_tile_takes_the_shared_memory() -> None:
    # cuDNN's TF32 kernels take tiles in turn with 7 slots of 32 KB and no staging tile
    # (results/h200/20261201c, call 1); PINGPONG without a staging tile at 7 or 8 stages was the
    # fastest on 14 of TF32's 38 layers with C > 3 there (calls 4-5).
    space = bound(nhwc(ConvProblem(N=28, K=3, C=512, F=512, B=32), "tf32"))
    assert space.is_valid(tma(128, 128, 2, 7, pingpong=1, persistent=1))  # 225 KB
    assert space.is_valid(tma(64, 128, 2, 8, pingpong=1, persistent=1))  # 193 KB
    assert not space.is_valid(tma(128, 128, 2, 8, pingpong=1, persistent=1))  # 257 KB
    # Two staging tiles of 128 x 128 FP32 outputs (PINGPONG's, one a warpgroup) leave 3 slots.
    assert not space.is_valid(tma(128, 128, 2, 4, store=1, pingpong=1, persistent=1))
    assert space.is_valid(tma(128, 128, 2, 3, store=1, pingpong=1, persistent=1))
    assert {int(c["STAGES"]) for c in space} >= {7, 8}


def test_three_consumer_warpgroups_make_192_pixel_tiles_that_fill_whole_waves() -> None:
    # ResNet-50's 14x14 layers: 6,272 pixels are 33 tiles of 192; with 4 filter tiles of 128
    # (F = 512) or 4 of 64 (F = 256) the grid is 132 tiles, one wave of the H100 and the H200,
    # where tiles of 128 pixels make 196 (1.48 waves).
    for f, bn, stages in ((512, 128, 4), (256, 64, 6)):
        problem = nhwc(ConvProblem(N=14, K=1, C=1024, F=f, B=32))
        config = tma(192, bn, 3, stages, store=1, gemm_1x1=1)
        assert bound(problem).is_valid(config)
        assert tile_count(problem, config) == 132
        assert threads(config) == 512 and warpgroup_rows(config) == 64
        (launch,) = FAMILY.plan(problem, config).launches
        assert launch.grid == (132, 1, 1) and launch.block == (512, 1, 1)
    space = bound(nhwc(ConvProblem(N=14, K=1, C=1024, F=512, B=32)))
    three = [c for c in space if int(c["WG"]) == 3 and not int(c["FILTERS_M"])]
    assert {int(c["BM"]) for c in three} == {192} and {int(c["TMA"]) for c in three} == {1}
    # With the filters as wgmma's M, three warpgroups are 192 filters of up to 128 pixels.
    swapped = [c for c in space if int(c["WG"]) == 3 and int(c["FILTERS_M"])]
    assert {int(c["BM"]) for c in swapped} == {64, 96, 112, 128}
    assert {int(c["BN"]) for c in swapped} == {192}
    assert {int(c["BN"]) for c in three} == {64, 96, 112, 128, 192}
    # 96 accumulators a thread spilled in the TMA stores' epilogue: 192 x 192 stores from registers.
    assert {int(c["STORE_TMA"]) for c in three if int(c["BN"]) == 192} == {0}
    assert not space.is_valid(cfg(192, 128, 3, 4, producer=1))  # the gathers' producer
    assert not space.is_valid(tma(192, 128, 2, 4))  # 1.5 m64 tiles a warpgroup
    assert not space.is_valid(tma(192, 128, 3, 4, pingpong=1, persistent=1))


def test_tma_maps_describe_the_tiles_the_kernel_multiplies() -> None:
    """The input map walks BM output pixels (origins STRIDE apart, the window's far corner K - 1
    short of the edge) a tap's BK channels at a time; the filter map reads BK channels of one
    tap of BN filters; both rows are the 128-byte swizzle rows the descriptors read."""
    conv = nhwc(ConvProblem(N=13, K=5, C=64, F=100, B=3, stride=2), "bf16")
    x_map, w_map = tensor_maps(conv, tma(128, 96, 1, 4))
    side = 12 * 2 + 5
    assert x_map == TensorMap(
        "x", "bfloat16", dims=(64, side, side, 3), strides=(128, side * 128, side * side * 128),
        box=(64, 128), element_strides=(1, 2, 2, 1), corners=((0, 0), (-4, -4)),
    )  # fmt: skip
    assert x_map.im2col and not w_map.im2col
    assert w_map == TensorMap(
        "w", "bfloat16", dims=(64, 25, 100), strides=(128, 25 * 128), box=(64, 1, 96),
        element_strides=(1, 1, 1),
    )  # fmt: skip
    # TF32 keeps FP32 storage: 32 channels make the same 128-byte row.
    x32, w32 = tensor_maps(nhwc(conv, "tf32"), tma(128, 96, 1, 4))
    assert x32.dtype == w32.dtype == "float32" and x32.box == (32, 128) and w32.box == (32, 1, 96)
    assert x32.strides[0] == 64 * 4


def test_the_output_map_stores_a_warpgroups_rows_in_128_byte_panels() -> None:
    conv = nhwc(ConvProblem(N=13, K=5, C=64, F=200, B=3, stride=2), "bf16")
    *_, y_map = tensor_maps(conv, tma(256, 128, 2, 4, store=1))
    assert y_map == TensorMap(
        "y", "bfloat16", dims=(200, 3 * 13 * 13), strides=(400,), box=(64, 128),
        element_strides=(1, 1),
    )  # fmt: skip
    *_, y32 = tensor_maps(nhwc(conv, "tf32"), tma(128, 96, 1, 4, store=1))
    assert y32.box == (32, 128) and y32.strides == (800,)
    assert len(tensor_maps(conv, tma(256, 128, 2, 4))) == 2  # loads only
    # The staging tile is BM x BN outputs more shared memory, and a residual's mbarrier a
    # consumer warpgroup.
    plain, stored = tma(128, 128, 1, 4), tma(128, 128, 1, 4, store=1)
    assert shared_bytes(stored, 2) - shared_bytes(plain, 2) == 128 * 128 * 2 + 8
    plain2, stored2 = tma(256, 128, 2, 3), tma(256, 128, 2, 3, store=1)
    assert shared_bytes(stored2, 2) - shared_bytes(plain2, 2) == 256 * 128 * 2 + 16


def test_a_row_of_outputs_not_whole_panels_ends_in_an_unswizzled_panel_of_its_own() -> None:
    # 112 16-bit outputs are 224 bytes: a 128-byte swizzled panel, then 96 bytes through a map
    # without swizzle (the swizzled maps take whole 128-byte rows); in FP32 448 bytes, three
    # panels and 64 bytes. 224 FP32 outputs are whole panels, and so one map.
    conv = nhwc(ConvProblem(N=7, K=1, C=2048, F=520, B=3), "fp16")
    *_, y_map, y_tail = tensor_maps(conv, tma(64, 112, 1, 6, store=1, gemm_1x1=1))
    assert y_map == TensorMap(
        "y", "float16", dims=(520, 3 * 7 * 7), strides=(1040,), box=(64, 64),
        element_strides=(1, 1),
    )  # fmt: skip
    assert y_tail == dataclasses.replace(y_map, box=(48, 64), swizzle_bytes=0)
    *_, y32, y32_tail = tensor_maps(nhwc(conv, "tf32"), tma(64, 112, 1, 6, store=1))
    assert (y32.box, y32_tail.box, y32_tail.swizzle_bytes) == ((32, 64), (16, 64), 0)
    assert [m.box for m in tensor_maps(conv, tma(128, 224, 2, 3, store=1))[2:]] == [
        (64, 64),
        (32, 64),
    ]
    assert len(tensor_maps(nhwc(conv, "tf32"), tma(128, 224, 2, 3, store=1))) == 3
    # A fused residual comes the same way: its whole panels' map, then its tail's.
    fused = dataclasses.replace(conv, epilogue="bias_add_relu")
    maps = tensor_maps(fused, tma(192, 96, 3, 4, store=1))
    assert [(m.buffer, m.box, m.swizzle_bytes) for m in maps[2:]] == [
        ("y", (64, 64), 128),
        ("y", (32, 64), 0),
        ("residual", (64, 64), 128),
        ("residual", (32, 64), 0),
    ]
    for m in maps:
        check_tensor_map(m)
    # The staging tile is BM x BN outputs whatever the panels.
    assert shared_bytes(tma(64, 112, 1, 6, store=1), 2) - shared_bytes(tma(64, 112, 1, 6), 2) == (
        64 * 112 * 2 + 8
    )


def test_a_fused_residual_is_read_through_a_map_shaped_as_the_outputs() -> None:
    conv = nhwc(ConvProblem(N=13, K=5, C=64, F=200, B=3, stride=2), "bf16")
    fused = dataclasses.replace(conv, epilogue="bias_add_relu")
    *_, y_map, r_map = tensor_maps(fused, tma(256, 128, 2, 4, store=1))
    assert r_map == dataclasses.replace(y_map, buffer="residual")
    # Without a residual, or without TMA stores, there is no map of it.
    bias_only = dataclasses.replace(conv, epilogue="bias_relu")
    assert [m.buffer for m in tensor_maps(bias_only, tma(256, 128, 2, 4, store=1))] == [
        "x",
        "w",
        "y",
    ]
    assert [m.buffer for m in tensor_maps(fused, tma(256, 128, 2, 4))] == ["x", "w"]


def test_a_1x1_input_at_stride_1_is_read_as_a_matrix_through_a_tiled_map() -> None:
    conv = nhwc(ConvProblem(N=37, K=1, C=40, F=100, B=3), "bf16")
    x_map, w_map = tensor_maps(conv, tma(128, 96, 1, 4, gemm_1x1=1))
    assert x_map == TensorMap(
        "x", "bfloat16", dims=(40, 3 * 37 * 37), strides=(80,), box=(64, 128),
        element_strides=(1, 1),
    )  # fmt: skip
    assert not x_map.im2col and w_map == tensor_maps(conv, tma(128, 96, 1, 4))[1]
    # In tf32 C = 40 is 32 + 8 channels: the last block comes through a map of half the box.
    x32, _, x32_half, _ = tensor_maps(nhwc(conv, "tf32"), tma(128, 96, 1, 4, gemm_1x1=1))
    assert x32.box == (32, 128) and x32.strides == (160,) and x32_half.box == (16, 128)
    # Offered with TMA only, and only where the input is that matrix: a 1x1 filter at stride 1
    # (a 1x1 filter has no padding, and at stride 1 no tail).
    space = bound(conv)
    assert space.is_valid(tma(128, 96, 1, 4, gemm_1x1=1))
    assert not space.is_valid(cfg(128, 96, 1, 4, producer=1, gemm_1x1=1))
    for other in (
        ConvProblem(N=37, K=1, C=40, F=100, B=3, stride=2),
        ConvProblem(N=37, K=3, C=40, F=100, B=3),
    ):
        assert {int(c["GEMM_1X1"]) for c in bound(nhwc(other))} == {0}


def test_two_staging_tiles_for_several_tiles_a_block_with_tma_stores() -> None:
    conv3 = nhwc(ConvProblem(N=56, K=1, C=64, F=256, B=32), "bf16")
    space = bound(conv3)
    # The 56x56 conv3's best configuration (results/h200/20261130b) with a second staging tile
    # fits at two stages (224 KB of slots and staging), not at three.
    assert space.is_valid(tma(128, 256, 2, 2, tiles=2, store=1, staging=2))
    assert not space.is_valid(tma(128, 256, 2, 3, tiles=2, store=1, staging=2))
    assert not space.is_valid(tma(128, 128, 2, 2, tiles=1, store=1, staging=2))  # one tile a block
    assert not space.is_valid(tma(128, 128, 2, 2, tiles=2, staging=2))  # no staging tile at all
    one, two = (
        tma(128, 256, 2, 2, tiles=2, store=1),
        tma(128, 256, 2, 2, tiles=2, store=1, staging=2),
    )
    # A second BM x BN tile, and a residual's mbarrier a consumer warpgroup for it.
    assert shared_bytes(two, 2) - shared_bytes(one, 2) == 128 * 256 * 2 + 16
    assert dict(FAMILY.plan(conv3, two).defines)["STAGING"] == 2


def test_a_persistent_grid_is_offered_past_a_wave_of_tiles_and_compiles_the_same_code() -> None:
    # 37x37 pixels x batch 3 in 64-pixel tiles, two tiles of F: 130 tiles, fewer than the 132
    # multiprocessors; at batch 13, 558 (F = 104: rows of whole 16 bytes, for TMA stores).
    short = bound(nhwc(ConvProblem(N=37, K=3, C=40, F=100, B=3)))
    assert {int(c["PERSISTENT"]) for c in short} == {0}
    conv = nhwc(ConvProblem(N=37, K=3, C=40, F=104, B=13))
    space = bound(conv)
    persistent = tma(64, 64, 1, 4, store=0, persistent=1)
    assert space.is_valid(persistent)
    assert not space.is_valid(tma(64, 64, 1, 4, tiles=2, persistent=1))  # the grid is the SMs'
    assert not space.is_valid(tma(64, 64, 1, 4, split=2, persistent=1))
    # With it, the tiles a block vary, so the staging and taking-turns paths are offered too.
    assert space.is_valid(tma(128, 64, 2, 4, store=1, staging=2, pingpong=1, persistent=1))
    plan, plain = FAMILY.plan(conv, persistent), FAMILY.plan(conv, tma(64, 64, 1, 4))
    (launch,), (plain_launch,) = plan.launches, plain.launches
    # Every tile in the grid's x extent, one block a multiprocessor at most when launched.
    assert launch.grid == plain_launch.grid == (558, 1, 1) and launch.blocks_per_sm == 1
    assert launch.grid_on(LIMITS.SM_COUNT) == (LIMITS.SM_COUNT, 1, 1)
    assert plain_launch.blocks_per_sm == 0 and plain_launch.grid_on(132) == (558, 1, 1)
    # The same code: the launch is all that changes.
    assert plan.defines == plain.defines and "PERSISTENT" not in dict(plan.defines)


def test_stream_k_is_offered_where_a_wave_is_part_full_and_declares_its_partial_sums() -> None:
    # ResNet-50's 14x14 C = 1024 F = 256 layer: 98 tiles of 128 x 128 for 132 multiprocessors.
    conv = nhwc(ConvProblem(N=14, K=1, C=1024, F=256, B=32))
    space = bound(conv)
    shared = tma(128, 128, 2, 4, store=1, stream_k=1)
    assert space.is_valid(shared)
    assert space.is_valid(tma(128, 128, 2, 4, store=1, staging=2, stream_k=1))
    assert not space.is_valid(tma(128, 128, 2, 4, persistent=1, stream_k=1))  # one grid or other
    assert not space.is_valid(tma(128, 128, 2, 4, pingpong=1, tiles=2, stream_k=1))
    assert not space.is_valid(tma(128, 128, 2, 4, split=2, stream_k=1))
    assert not space.is_valid(cfg(128, 128, 2, 4, producer=1, c_outer=1, stream_k=1))  # cp.async
    plan = FAMILY.plan(conv, shared)
    (launch,) = plan.launches
    assert launch.grid_on(LIMITS.SM_COUNT) == (LIMITS.SM_COUNT, 1, 1)
    assert ("STREAM_K", 1) in plan.defines and ("STREAM_K_BLOCKS", STREAM_K_BLOCKS) in plan.defines
    # Two slots of a tile's FP32 partial sums a block; a counter a tile and consumer warpgroup.
    assert plan.scratch == (("sk_partials", (2 * STREAM_K_BLOCKS, 128 * 128)),)
    assert plan.counters == (("sk_counters", 98 * 2),)
    # Whole waves of tiles (264 of 64 x 128 for 132), or a one-step reduction: nothing to share.
    assert not bound(nhwc(ConvProblem(N=33, K=1, C=64, F=128, B=8))).is_valid(
        tma(64, 128, 1, 4, stream_k=1)
    )
    one_step = bound(nhwc(ConvProblem(N=14, K=1, C=64, F=256, B=32)))
    assert {int(c["STREAM_K"]) for c in one_step if step_bytes(c) == 128} == {0}
    # 64-byte steps make it two.
    assert {int(c["STREAM_K"]) for c in one_step if step_bytes(c) == 64} == {0, 1}
    assert {
        int(c["STREAM_K"]) for c in bound(nhwc(ConvProblem(N=14, K=1, C=64, F=256, B=32), "tf32"))
    } == {0, 1}


def test_tma_stores_are_offered_for_every_tile_width_and_only_aligned_rows() -> None:
    conv3 = bound(nhwc(ConvProblem(N=13, K=3, C=192, F=384, B=128)))
    assert conv3.is_valid(tma(128, 128, 1, 4, store=1))
    assert conv3.is_valid(tma(128, 96, 1, 4, store=1))  # 192 bytes: a panel and a tail panel
    assert conv3.is_valid(tma(64, 112, 1, 4, store=1))
    assert not conv3.is_valid(cfg(128, 128, 1, 4, store=1))  # loads by cp.async
    assert not conv3.is_valid(tma(128, 256, 2, 5, store=1))  # 64 KB more than fits
    tf32 = bound(nhwc(ConvProblem(N=13, K=3, C=192, F=384, B=128), "tf32"))
    assert tf32.is_valid(tma(128, 96, 1, 4, store=1))  # 384 bytes: three FP32 panels
    odd = bound(nhwc(ConvProblem(N=13, K=3, C=64, F=100, B=8)))
    assert {int(c["STORE_TMA"]) for c in odd} == {0}  # 200-byte rows: not 16-byte aligned
    small = bound(nhwc(ConvProblem(N=7, K=3, C=256, F=64, B=1)))
    assert all(c["SPLIT_K"] == 1 or c["SPLIT_CLUSTER"] for c in small if c["STORE_TMA"])
    assert any(c["SPLIT_K"] > 1 for c in small if c["STORE_TMA"])


def test_tma_is_offered_only_where_its_maps_can_be_made() -> None:
    conv3 = bound(nhwc(ConvProblem(N=13, K=3, C=192, F=384, B=128)))
    assert conv3.is_valid(tma(128, 256, 2, 4)) and conv3.is_valid(tma(128, 128, 1, 6, split=1))
    assert not conv3.is_valid(cfg(128, 256, 2, 4, tma=1))  # no producer warpgroup
    assert not conv3.is_valid(cfg(128, 256, 2, 4, producer=1, tma=1))  # reduction order
    assert not conv3.is_valid(cfg(128, 256, 2, 4, producer=1, c_outer=1, l1=1, tma=1))
    # C = 3 (and C = 12 in 16 bits) rows are not whole 16-byte chunks: no stride TMA can take
    # (a strided first layer's rewrite has whole chunks, and TMA).
    first = bound(nhwc(ConvProblem(N=224, K=3, C=3, F=64, B=32)))
    assert {int(c["TMA"]) for c in first} == {0}
    c12 = ConvProblem(N=7, K=1, C=12, F=64, B=3)
    assert {int(c["TMA"]) for c in bound(nhwc(c12, "bf16"))} == {0}
    assert {int(c["TMA"]) for c in bound(nhwc(c12, "tf32"))} == {0, 1}


def test_tf32_steps_are_32_deep() -> None:
    """FP32 storage holds 32 elements a 128-byte row: C % 4 == 0 suffices for whole chunks (and
    the channel-block order), and a split needs 4 x 32 elements of the reduction, not 4 x 64."""
    c12 = ConvProblem(N=7, K=1, C=12, F=64, B=3)
    assert {int(c["C_OUTER"]) for c in bound(nhwc(c12, "tf32"))} == {0, 1}
    assert {int(c["C_OUTER"]) for c in bound(nhwc(c12, "bf16"))} == {0}
    # C*K*K = 256: 8 splits of 32 FP32 elements are 8 steps of one each; 2 of 128 are 4 each.
    small = ConvProblem(N=7, K=1, C=256, F=64, B=1)

    def splits(dtype: str, step: int) -> set[int]:
        return {int(c["SPLIT_K"]) for c in bound(nhwc(small, dtype)) if step_bytes(c) == step}

    assert splits("tf32", 128) == {1, 2} and splits("bf16", 128) == {1}
    # 64-byte steps (16 FP32 or 32 16-bit elements) make twice the steps to share.
    assert splits("tf32", 64) == {1, 2, 4} and splits("bf16", 64) == {1, 2}
    # The shared slots do not depend on the element size: a 128-byte row either way.
    big = cfg(128, 256, 2, 4, producer=1)
    conv3 = ConvProblem(N=13, K=3, C=192, F=384, B=128)
    assert bound(nhwc(conv3, "tf32")).is_valid(big) and bound(nhwc(conv3, "bf16")).is_valid(big)


# Compiled with the local NVRTC for sm_90a: every tile width, both operand types, one and two
# consumer warpgroups, the producer warpgroup (setmaxnreg), split-K, the element gather (C = 3,
# 5), the channel-block order through L1, the deepest pipelines that fit.
COMPILE_SAMPLE = [
    (ConvProblem(N=13, K=3, C=192, F=384, B=128), "bf16", cfg(256, 128, 2, 4)),
    (ConvProblem(N=13, K=3, C=192, F=384, B=128), "fp16", cfg(128, 256, 2, 4, producer=1)),
    (ConvProblem(N=12, K=3, C=256, F=512, B=128), "bf16", cfg(256, 128, 2, 4, 1, 1, 1, 1)),
    (ConvProblem(N=12, K=3, C=256, F=512, B=128), "bf16", cfg(128, 192, 2, 5, producer=1)),
    (ConvProblem(N=27, K=5, C=64, F=192, B=128), "fp16", cfg(128, 96, 1, 6, c_outer=1)),
    (ConvProblem(N=13, K=11, C=5, F=10, B=3, stride=4), "bf16", cfg(64, 64, 1, 2, split=2)),
    (ConvProblem(N=13, K=5, C=5, F=100, B=3, stride=2), "fp16", cfg(256, 128, 2, 3, producer=1)),
    (ConvProblem(N=7, K=3, C=256, F=64), "bf16", cfg(64, 64, 1, 6, split=8)),
    # TF32 (FP32 storage): the same cases, the gather at 4 elements a chunk, C % 4 == 0 chunked.
    (ConvProblem(N=13, K=3, C=192, F=384, B=128), "tf32", cfg(256, 128, 2, 4)),
    (ConvProblem(N=13, K=3, C=192, F=384, B=128), "tf32", cfg(128, 256, 2, 4, producer=1)),
    (ConvProblem(N=12, K=3, C=256, F=512, B=128), "tf32", cfg(256, 128, 2, 4, 1, 1, 1, 1)),
    (ConvProblem(N=12, K=3, C=256, F=512, B=128), "tf32", cfg(128, 192, 2, 5, producer=1)),
    (ConvProblem(N=27, K=5, C=12, F=96, B=128), "tf32", cfg(128, 96, 1, 6, c_outer=1)),
    (ConvProblem(N=13, K=11, C=5, F=10, B=3, stride=4), "tf32", cfg(64, 64, 1, 2, split=2)),
    (ConvProblem(N=13, K=5, C=5, F=100, B=3, stride=2), "tf32", cfg(256, 128, 2, 3, producer=1)),
    (ConvProblem(N=13, K=11, C=3, F=100, B=3, stride=4), "tf32", cfg(128, 64, 1, 4, 2, producer=1)),
    (ConvProblem(N=7, K=3, C=256, F=64), "tf32", cfg(64, 64, 1, 6, split=8)),
    # TMA: both operand types, one and two consumer warpgroups (setmaxnreg), split-K, several
    # tiles a block, the widest tiles.
    (ConvProblem(N=13, K=3, C=192, F=384, B=128), "bf16", tma(128, 256, 2, 4)),
    (ConvProblem(N=13, K=3, C=192, F=384, B=128), "tf32", tma(256, 128, 2, 4, tiles=2)),
    (ConvProblem(N=27, K=5, C=64, F=192, B=128), "fp16", tma(128, 96, 1, 6)),
    (ConvProblem(N=7, K=3, C=256, F=64), "tf32", tma(64, 64, 1, 6, split=4)),
    # TMA stores: both storage types, one and two consumer warpgroups, several tiles a block,
    # fused epilogues (below, with a residual).
    (ConvProblem(N=13, K=3, C=192, F=384, B=128), "bf16", tma(128, 128, 1, 4, store=1)),
    (ConvProblem(N=13, K=3, C=192, F=384, B=128), "bf16", tma(256, 128, 2, 3, tiles=2, store=1)),
    (ConvProblem(N=27, K=5, C=64, F=192, B=128), "fp16", tma(128, 64, 2, 4, store=1)),
    (ConvProblem(N=13, K=3, C=192, F=384, B=128), "tf32", tma(128, 96, 1, 4, store=1)),
    (ConvProblem(N=7, K=1, C=512, F=2048, B=32), "tf32", tma(256, 64, 2, 4, tiles=2, store=1)),
    # A last channel block half full (OverFeat's C = 96 in 16-bit steps of 64): its own short
    # path of wgmmas, with the tiles taken in turn too.
    (ConvProblem(N=20, K=5, C=96, F=256, B=128), "bf16", tma(128, 256, 2, 3, tiles=4, store=1)),
    (
        ConvProblem(N=20, K=5, C=96, F=256, B=128),
        "fp16",
        tma(128, 128, 2, 4, tiles=2, store=1, pingpong=1),
    ),
    # A 1x1 input at stride 1 as a matrix (GEMM_1X1), loads only and with TMA stores.
    (ConvProblem(N=37, K=1, C=40, F=100, B=3), "tf32", tma(128, 96, 1, 4, gemm_1x1=1)),
    (
        ConvProblem(N=56, K=1, C=64, F=256, B=32),
        "bf16",
        tma(256, 128, 2, 3, tiles=2, store=1, gemm_1x1=1),
    ),
    # Two staging tiles: the widest that fits (two stages), and an FP32 output's.
    (
        ConvProblem(N=56, K=1, C=64, F=256, B=32),
        "bf16",
        tma(128, 256, 2, 2, tiles=2, store=1, gemm_1x1=1, staging=2),
    ),
    (
        ConvProblem(N=7, K=1, C=512, F=2048, B=32),
        "tf32",
        tma(128, 128, 1, 2, tiles=2, store=1, staging=2),
    ),
    # The warpgroups taking tiles in turn: a whole 128 x 128 or 64 x 256 tile each, stored
    # directly, or by TMA through a staging tile each (two each where they fit).
    (ConvProblem(N=112, K=3, C=128, F=128, B=32), "bf16", tma(128, 128, 2, 4, tiles=4, pingpong=1)),
    (
        ConvProblem(N=28, K=3, C=256, F=512, B=32),
        "bf16",
        tma(64, 256, 2, 4, tiles=2, store=1, pingpong=1),
    ),
    (
        ConvProblem(N=56, K=1, C=64, F=256, B=32),
        "fp16",
        tma(128, 128, 2, 2, tiles=4, store=1, gemm_1x1=1, staging=2, pingpong=1),
    ),
    (ConvProblem(N=13, K=3, C=192, F=384, B=128), "tf32", tma(128, 128, 2, 3, tiles=2, pingpong=1)),
    # Stream-K: both operand types, one and two consumer warpgroups, stored directly or by TMA
    # (two staging tiles), a fused residual, the short step of a half-full channel block.
    (ConvProblem(N=14, K=1, C=1024, F=256, B=32), "bf16", tma(128, 128, 2, 6, store=1, stream_k=1)),
    (ConvProblem(N=14, K=1, C=1024, F=256, B=32), "tf32", tma(128, 128, 2, 4, stream_k=1)),
    (ConvProblem(N=7, K=3, C=512, F=512, B=32), "fp16", tma(128, 64, 1, 6, stream_k=1)),
    (
        ConvProblem(N=20, K=5, C=96, F=256, B=128),
        "bf16",
        tma(128, 256, 2, 3, store=1, staging=1, stream_k=1),
    ),
    (
        ConvProblem(N=14, K=1, C=1024, F=512, B=32),
        "bf16",
        tma(128, 256, 2, 2, store=1, gemm_1x1=1, staging=2, stream_k=1),
    ),
    # Clusters sharing a tile by multicast copies: the input (a 1x1 one as a matrix, gathered
    # by im2col) and the filters, every operand type, persistent, tiles in turn, split-K.
    (
        ConvProblem(N=14, K=1, C=1024, F=512, B=32),
        "bf16",
        tma(128, 128, 2, 4, store=1, gemm_1x1=1, persistent=1, multicast=1),
    ),
    (
        ConvProblem(N=13, K=3, C=192, F=384, B=128),
        "tf32",
        tma(128, 128, 2, 4, store=1, multicast=1),
    ),
    (ConvProblem(N=27, K=5, C=64, F=192, B=128), "fp16", tma(128, 64, 1, 6, multicast=2)),
    (
        ConvProblem(N=28, K=3, C=256, F=512, B=32),
        "bf16",
        tma(64, 256, 2, 4, tiles=2, store=1, pingpong=1, multicast=2),
    ),
    (ConvProblem(N=7, K=3, C=256, F=64, B=8), "tf32", tma(64, 64, 1, 6, split=4, multicast=2)),
    # Clusters of four: quarters of the shared input (a matrix; a half-width last channel block
    # through im2col) or of the filters, stored by TMA and from registers, 192-pixel tiles.
    (
        ConvProblem(N=7, K=1, C=2048, F=512, B=32),
        "bf16",
        tma(128, 64, 2, 6, store=1, gemm_1x1=1, multicast=1, group=4),
    ),
    (
        ConvProblem(N=20, K=5, C=96, F=256, B=128),
        "fp16",
        tma(128, 64, 2, 6, store=1, multicast=1, group=4),
    ),
    (ConvProblem(N=7, K=1, C=512, F=2048, B=32), "tf32", tma(128, 128, 2, 5, multicast=2, group=4)),
    (
        ConvProblem(N=14, K=1, C=1024, F=256, B=32),
        "bf16",
        tma(192, 64, 3, 6, store=1, gemm_1x1=1, multicast=1, group=4),
    ),
    # Three consumer warpgroups (192-pixel tiles): TMA stores with a fused residual, two
    # staging tiles, a persistent grid, stream-K, clusters, every operand type.
    (
        ConvProblem(N=28, K=1, C=256, F=512, B=32, epilogue="bias_add_relu"),
        "bf16",
        tma(192, 128, 3, 3, store=1, gemm_1x1=1, staging=2, persistent=1),
    ),
    (ConvProblem(N=14, K=3, C=256, F=256, B=32), "tf32", tma(192, 64, 3, 5, store=1)),
    (ConvProblem(N=28, K=1, C=256, F=512, B=32), "fp16", tma(192, 96, 3, 5, stream_k=1)),
    (
        ConvProblem(N=28, K=3, C=256, F=512, B=32),
        "tf32",
        tma(192, 128, 3, 3, store=1, persistent=1, multicast=1),
    ),
    # 192 x 192 tiles (96 accumulators a consumer thread), stored from registers: AlexNet's
    # F = 192 with a fused GELU, and FP32's 4 slots of 48 KB.
    (
        ConvProblem(N=27, K=5, C=64, F=192, B=128, epilogue="scale_bias_add_gelu"),
        "bf16",
        tma(192, 192, 3, 4, persistent=1),
    ),
    (ConvProblem(N=13, K=3, C=192, F=384, B=128), "tf32", tma(192, 192, 3, 4, multicast=1)),
    # A split tile's blocks as one cluster, the first adding the others' accumulators: stored
    # directly or by TMA, a fused residual, two and four splits, three consumer warpgroups.
    (
        ConvProblem(N=7, K=1, C=2048, F=512, B=32),
        "bf16",
        tma(128, 128, 2, 6, split=2, store=1, gemm_1x1=1, split_cluster=1),
    ),
    (
        ConvProblem(N=7, K=1, C=2048, F=512, B=32),
        "tf32",
        tma(128, 128, 2, 6, split=2, split_cluster=1),
    ),
    (
        ConvProblem(N=7, K=1, C=2048, F=512, B=32, epilogue="bias_add_relu"),
        "fp16",
        tma(128, 256, 2, 3, split=4, store=1, gemm_1x1=1, split_cluster=1),
    ),
    (
        ConvProblem(N=7, K=3, C=512, F=512, B=32),
        "tf32",
        tma(192, 64, 3, 5, split=2, split_cluster=1),
    ),
    # 112 and 224 filters a tile (cuDNN's tile sizes on ResNet-50's 7x7 1x1 layers): one
    # consumer warpgroup sharing the filters in pairs, the input shared, stored from registers
    # in 16 bits, and TF32's 224 by TMA (whole 128-byte panels).
    (
        ConvProblem(N=7, K=1, C=2048, F=512, B=32),
        "fp16",
        tma(64, 112, 1, 8, gemm_1x1=1, multicast=2),
    ),
    (
        ConvProblem(N=7, K=1, C=512, F=2048, B=32),
        "bf16",
        tma(128, 224, 2, 4, gemm_1x1=1, multicast=1),
    ),
    (ConvProblem(N=7, K=1, C=2048, F=512, B=32), "tf32", tma(128, 224, 2, 2, store=1)),
    # Rows that are not whole 128-byte panels stored by TMA, a tail panel after the whole ones
    # (16-bit 112, 224 and 96, FP32 112): a fused residual loaded the same way, two staging
    # tiles, three consumer warpgroups.
    (
        ConvProblem(N=7, K=1, C=2048, F=512, B=32, epilogue="bias_add_relu"),
        "fp16",
        tma(64, 112, 1, 8, store=1, gemm_1x1=1, multicast=2),
    ),
    (
        ConvProblem(N=7, K=1, C=512, F=2048, B=32),
        "bf16",
        tma(128, 224, 2, 3, store=1, gemm_1x1=1, multicast=1),
    ),
    (
        ConvProblem(N=14, K=1, C=1024, F=256, B=32),
        "tf32",
        tma(128, 112, 2, 4, store=1, persistent=1),
    ),
    (
        ConvProblem(N=28, K=1, C=512, F=256, B=32, epilogue="bias_add_relu"),
        "fp16",
        tma(192, 96, 3, 4, store=1, staging=2, persistent=1),
    ),
    # 16-bit outputs without an epilogue staged by stmatrix: two m64 rows a warpgroup, a
    # tail panel after the whole one, clusters of four sharing the input.
    (
        ConvProblem(N=7, K=1, C=512, F=2048, B=32),
        "fp16",
        tma(256, 96, 2, 3, store=1, gemm_1x1=1, multicast=1, group=4),
    ),
    # Deep pipelines taking tiles in turn, the output stored from registers (7 and 8 stages).
    (
        ConvProblem(N=28, K=3, C=512, F=512, B=32),
        "tf32",
        tma(128, 128, 2, 7, pingpong=1, persistent=1, multicast=1),
    ),
    (
        ConvProblem(N=14, K=3, C=512, F=512, B=32),
        "bf16",
        tma(64, 128, 2, 8, pingpong=1, persistent=1),
    ),
]


@pytest.fixture(scope="module")
def compiler():
    return Compiler(arch="sm_90")


@pytest.mark.parametrize(("problem", "dtype", "config"), COMPILE_SAMPLE, ids=str)
def test_sampled_configs_compile_for_sm90a_without_spills(compiler, problem, dtype, config):
    problem = dataclasses.replace(nhwc(problem, dtype), epilogue=problem.epilogue)
    assert bound(problem).is_valid(config), config
    compiled = compiler.compile(FAMILY.plan(problem, config))
    assert compiled.cubin.startswith(b"\x7fELF")
    assert compiled.spills == 0, compiled.log
    gemm = compiled.resources["tc_wgmma"]
    assert gemm.stack_bytes == 0 and gemm.registers <= LIMITS.REGS_PER_BLOCK // threads(config)
    assert "sm_90a" in compiled.log
    # ptxas fences a group of wgmmas that a branch interrupts (the short step of a partial
    # channel block is a path of its own for this)
    assert "warpgroup.arrive is injected" not in compiled.log, compiled.log


@pytest.mark.slow
def test_random_configs_compile_without_spills(compiler):
    rng = random.Random(20)
    half = len(SHAPES) // 2  # the bf16 shapes, then the same in tf32
    for problem in (SHAPES[2], SHAPES[6], SHAPES[half - 2], SHAPES[half + 2], SHAPES[-2]):
        configs = list(bound(problem))
        for config in rng.sample(configs, 4):
            compiled = compiler.compile(FAMILY.plan(problem, config))
            assert compiled.spills == 0, f"{problem} {config}"


def test_the_plain_sm90_target_is_refused_with_the_reason(compiler):
    # wgmma exists only on the architecture-specific target: without it the kernel says so
    # instead of leaving the user a page of ptxas errors.
    problem, dtype, config = COMPILE_SAMPLE[0]
    plan = dataclasses.replace(FAMILY.plan(nhwc(problem, dtype), config), arch_specific=False)
    with pytest.raises(CompileError, match="needs the sm_90a target"):
        compiler.compile(plan)


# Padded inputs (ConvProblem.padding): only the TMA path reads them, its im2col box starting
# `padding` before the image; the plan passes PAD and the kernel compiles without spills.
@pytest.mark.parametrize("dtype", ["tf32", "bf16", "fp16"])
def test_a_padded_problem_is_read_through_the_im2col_box_only(compiler, dtype):
    problem = dataclasses.replace(
        nhwc(ConvProblem(N=14, K=7, C=8, F=64, B=3, stride=2), dtype), padding=3
    )
    assert problem.input_size == 27 and problem.input_shape == (3, 27, 27, 8)
    FAMILY.check(problem)
    space = FAMILY.load_space().bind(problem.fields(), LIMITS)
    assert space.configs and all(int(c["TMA"]) == 1 for c in space.configs)
    assert not space.is_valid(cfg(64, 64, 1, 3, producer=1, c_outer=1))  # cp.async: pre-padded
    config = tma(128, 64, 1, 4)
    plan = FAMILY.plan(problem, config)
    assert ("PAD", 3) in plan.defines
    x_map = next(a for a in plan.launches[0].args if getattr(a, "buffer", "") == "x")
    assert x_map.dims == (8, 27, 27, 3) and x_map.corners == ((-3, -3), (-3, -3))
    compiled = compiler.compile(plan)
    assert compiled.spills == 0, compiled.log
    # Padded loads beside tensor-memory stores: the output's map is the unpadded N x N.
    stored = FAMILY.plan(problem, tma(128, 64, 1, 4, store=1))
    y_map = next(a for a in stored.launches[0].args if getattr(a, "buffer", "") == "y")
    assert ("PAD", 3) in stored.defines and y_map.dims == (64, 3 * 14 * 14)
    assert compiler.compile(stored).spills == 0
    # Without padding the plan is the one it always was: no PAD, corners from the image's edge.
    plain = FAMILY.plan(dataclasses.replace(problem, padding=0), config)
    assert not any(name == "PAD" for name, _ in plain.defines)
    plain_map = next(a for a in plain.launches[0].args if getattr(a, "buffer", "") == "x")
    assert plain_map.corners == ((0, 0), (-6, -6))


# An input whose padded rows run past its last window (ConvProblem.tail: ResNet-50's stride-2
# layers over even sides) is read in place: the im2col map's extents are the input's, its box
# ends `tail` short of them, and the cp.async gather steps rows by the input's side (TAIL).
@pytest.mark.parametrize("dtype", ["tf32", "bf16"])
def test_an_input_with_a_tail_is_read_in_place(compiler, dtype):
    base = nhwc(ConvProblem(N=28, K=3, C=64, F=64, B=3, stride=2), dtype)
    problem = dataclasses.replace(base, padding=1, tail=1)
    assert problem.input_shape == (3, 56, 56, 64)
    FAMILY.check(problem)
    plan = FAMILY.plan(problem, tma(128, 64, 1, 4))
    assert ("PAD", 1) in plan.defines and ("TAIL", 1) in plan.defines
    x_map = next(a for a in plan.launches[0].args if getattr(a, "buffer", "") == "x")
    assert x_map.dims == (64, 56, 56, 3) and x_map.corners == ((-1, -1), (-2, -2))
    assert compiler.compile(plan).spills == 0
    # Without padding the gather reads it too (a 1x1 downsampling layer's input).
    down = nhwc(ConvProblem(N=7, K=1, C=64, F=96, B=3, stride=2), dtype)
    down = dataclasses.replace(down, tail=1)
    gather = cfg(64, 96, 1, 3, producer=1, c_outer=1)
    assert bound(down).is_valid(gather)
    assert compiler.compile(FAMILY.plan(down, gather)).spills == 0
    # Other families read inputs that end with their last window.
    with pytest.raises(UnsupportedProblem, match="tail=1"):
        get_family("implicit_gemm").check(dataclasses.replace(down, dtype="fp32", layout="NCHW"))


def test_clusters_pair_tiles_that_share_a_copy_and_halve_its_box() -> None:
    # ResNet-50's 14x14 C = 1024 F = 512 layer: 4 filter tiles of 128 x 49 pixel tiles.
    conv = nhwc(ConvProblem(N=14, K=1, C=1024, F=512, B=32))
    space = bound(conv)
    for multicast in (1, 2):
        assert space.is_valid(tma(128, 128, 2, 4, store=1, multicast=multicast))
        assert space.is_valid(tma(128, 128, 2, 4, store=1, persistent=1, multicast=multicast))
        assert not space.is_valid(tma(128, 128, 2, 4, store=1, stream_k=1, multicast=multicast))
        assert not space.is_valid(cfg(128, 128, 2, 4, producer=1, c_outer=1, multicast=multicast))
    plain = tensor_maps(conv, tma(128, 128, 2, 4, gemm_1x1=1))
    # Each block of a pair copies half of the shared tile (into both blocks' slots).
    shared_input = tensor_maps(conv, tma(128, 128, 2, 4, gemm_1x1=1, multicast=1))
    assert shared_input[0].box == (64, 64) and shared_input[1] == plain[1]
    shared_filters = tensor_maps(conv, tma(128, 128, 2, 4, gemm_1x1=1, multicast=2))
    assert shared_filters[0] == plain[0] and shared_filters[1].box == (64, 1, 64)
    # Pairs of tiles in whole clusters: 4 x 49 tiles, padded to 50 pixel tiles for pairs of them.
    assert tile_count(conv, tma(128, 128, 2, 4, multicast=1)) == 4 * 49
    assert tile_count(conv, tma(128, 128, 2, 4, multicast=2)) == 4 * 50
    (launch,) = FAMILY.plan(conv, tma(128, 128, 2, 4, tiles=4, multicast=2)).launches
    assert launch.cluster == 2 and launch.grid == (2 * 25, 1, 1)
    # A persistent grid's cap is whole clusters: 131 multiprocessors hold 65 pairs.
    (persistent,) = FAMILY.plan(conv, tma(128, 128, 2, 4, persistent=1, multicast=1)).launches
    assert persistent.grid_on(132) == (132, 1, 1) and persistent.grid_on(131) == (130, 1, 1)
    assert dict(FAMILY.plan(conv, tma(128, 128, 2, 4, multicast=1)).defines)["MULTICAST"] == 1
    # Only where the shared operand has two neighbours: one filter tile has no pair (F = 64).
    narrow = bound(nhwc(ConvProblem(N=14, K=1, C=1024, F=64, B=32)))
    assert {int(c["MULTICAST"]) for c in narrow} == {0, 2}
    one_tile = bound(nhwc(ConvProblem(N=7, K=5, C=96, F=72, B=1)))
    assert {int(c["MULTICAST"]) for c in one_tile} == {0, 1}


def test_clusters_of_four_share_a_copy_in_quarters() -> None:
    # ResNet-50's 7x7 C = 2048 F = 512 layer: 8 filter tiles of 64 x 13 pixel tiles of 128.
    conv = nhwc(ConvProblem(N=7, K=1, C=2048, F=512, B=32))
    space = bound(conv)
    for multicast in (1, 2):
        assert space.is_valid(tma(128, 64, 2, 6, store=1, multicast=multicast, group=4))
        # Not persistent (a grid of clusters of four that might not all be resident), and
        # four blocks only where there is a shared tile to split.
        assert not space.is_valid(
            tma(128, 64, 2, 6, store=1, persistent=1, multicast=multicast, group=4)
        )
    assert not space.is_valid(tma(128, 64, 2, 6, store=1, group=4))
    plain = tensor_maps(conv, tma(128, 64, 2, 6, gemm_1x1=1))
    quarters = tensor_maps(conv, tma(128, 64, 2, 6, gemm_1x1=1, multicast=1, group=4))
    assert quarters[0].box == (64, 32) and quarters[1] == plain[1]
    quarters = tensor_maps(conv, tma(128, 64, 2, 6, gemm_1x1=1, multicast=2, group=4))
    assert quarters[0] == plain[0] and quarters[1].box == (64, 1, 16)
    # Whole groups of tiles: 8 filter tiles are two groups; 13 pixel tiles are padded to 16.
    assert tile_count(conv, tma(128, 64, 2, 6, multicast=1, group=4)) == 8 * 13
    assert tile_count(conv, tma(128, 64, 2, 6, multicast=2, group=4)) == 8 * 16
    (launch,) = FAMILY.plan(conv, tma(128, 64, 2, 6, multicast=2, group=4)).launches
    assert launch.cluster == 4 and launch.grid == (8 * 16, 1, 1)
    defines = dict(FAMILY.plan(conv, tma(128, 64, 2, 6, multicast=1, group=4)).defines)
    assert (defines["MULTICAST"], defines["MULTICAST_BLOCKS"]) == (1, 4)
    # Four filter tiles of the shared input at least: F = 192 has three of 64.
    three = bound(nhwc(ConvProblem(N=7, K=1, C=2048, F=192, B=32)))
    assert {int(c["MULTICAST_BLOCKS"]) for c in three if int(c["MULTICAST"]) == 1} == {2}


def test_tiles_of_112_and_224_filters_are_offered_where_they_can_be_built() -> None:
    # ResNet-50's 7x7 C = 2048 F = 512: 25 pixel tiles of 64 x 5 filter tiles of 112, one wave.
    conv = nhwc(ConvProblem(N=7, K=1, C=2048, F=512, B=32), "fp16")
    space = bound(conv)
    assert space.is_valid(tma(64, 112, 1, 8, gemm_1x1=1))
    assert tile_count(conv, tma(64, 112, 1, 8)) == 25 * 5
    # A quarter of 112 filter rows is no whole 8-row swizzle group; a half is, and a quarter
    # of 96.
    assert space.is_valid(tma(64, 112, 1, 8, multicast=2))
    assert not space.is_valid(tma(64, 112, 1, 8, multicast=2, group=4))
    assert space.is_valid(tma(64, 96, 1, 8, multicast=2, group=4))
    # TMA stores, in whole 128-byte panels and a tail panel in 16 bits (224 x 2 bytes), whole
    # panels in FP32 (224 x 4).
    assert space.is_valid(tma(128, 224, 2, 2, store=1))
    assert bound(nhwc(ConvProblem(N=7, K=1, C=2048, F=512, B=32), "tf32")).is_valid(
        tma(128, 224, 2, 2, store=1)
    )
    assert {int(c["BN"]) for c in space} == {64, 96, 112, 128, 192, 224, 256}
    # With TMA loads only: they are for the 1x1 layers, which TMA loads.
    assert {int(c["BN"]) for c in space if not int(c["TMA"])} == {64, 96, 128, 192, 256}


def test_a_split_tiles_blocks_add_up_in_their_cluster() -> None:
    # ResNet-50's 7x7 C = 2048 F = 512 layer: 13 pixel tiles of 128 x 4 filter tiles, 32 steps.
    conv = nhwc(ConvProblem(N=7, K=1, C=2048, F=512, B=32))
    space = bound(conv)
    split = tma(128, 128, 2, 4, split=2, store=1, gemm_1x1=1, split_cluster=1)
    assert space.is_valid(split)
    (launch,) = FAMILY.plan(conv, split).launches  # no second kernel, no partial sums
    assert launch.cluster == 2 and launch.grid == (2 * 13 * 4, 1, 1)
    assert launch.args[:3] == ("x", "w", "y") and not FAMILY.plan(conv, split).scratch
    assert dict(FAMILY.plan(conv, split).defines)["SPLIT_CLUSTER"] == 1
    four = tma(128, 256, 2, 3, split=4, store=1, split_cluster=1)
    assert space.is_valid(four) and FAMILY.plan(conv, four).launches[0].grid == (4 * 26, 1, 1)
    for refused in (
        tma(128, 128, 2, 4, split=1, split_cluster=1),  # nothing to split
        tma(128, 128, 2, 4, split=2, multicast=1, split_cluster=1),  # clusters of pairs
        tma(128, 128, 2, 4, split=2, tiles=2, split_cluster=1),  # one tile a block
        tma(128, 256, 2, 2, split=4, split_cluster=1),  # 128 KB of accumulators, 96 of slots
        cfg(128, 128, 2, 4, split=2, producer=1, c_outer=1, split_cluster=1),  # cp.async loads
    ):
        assert not space.is_valid(refused), refused
    # Split through global memory, as before: partial sums and the reduction's launch.
    assert len(FAMILY.plan(conv, tma(128, 128, 2, 4, split=2)).launches) == 2


# A last channel block at most half full: OverFeat's C = 96 in 16 bits takes 64 + 32 channels a
# tap, tf32's C = 40 takes 32 + 8. With TMA the plan copies it through a second pair of maps of
# half the box in the 64-byte swizzle (the kernel's HALF_BLOCK); elsewhere it builds as before.
def test_a_half_full_last_channel_block_is_copied_at_half_width(compiler) -> None:
    overfeat = nhwc(ConvProblem(N=20, K=5, C=96, F=256, B=128))
    config = tma(128, 128, 2, 5, store=1)
    assert half_block(overfeat, config)
    maps = tensor_maps(overfeat, config)
    x_map, w_map, x_half, w_half, y_map = maps
    assert (x_map.box, x_map.swizzle_bytes, w_map.box) == ((64, 128), 128, (64, 1, 128))
    assert (x_half.buffer, x_half.box, x_half.swizzle_bytes) == ("x", (32, 128), 64)
    assert (w_half.buffer, w_half.box, w_half.swizzle_bytes) == ("w", (32, 1, 128), 64)
    assert (x_half.corners, x_half.dims) == (x_map.corners, x_map.dims) and y_map.buffer == "y"
    plan = FAMILY.plan(overfeat, config)
    assert dict(plan.defines)["HALF_BLOCK"] == 1 and plan.launches[0].args[2:] == ("y", *maps)
    # A pair sharing the input copies half of both boxes' pixels.
    paired = tensor_maps(overfeat, tma(128, 128, 2, 5, multicast=1))
    assert paired[0].box == (64, 64) and paired[2].box == (32, 64)
    for other in (config, tma(128, 128, 2, 5, multicast=2), tma(192, 128, 3, 4, stream_k=1)):
        assert compiler.compile(FAMILY.plan(overfeat, other)).spills == 0
    assert half_block(nhwc(ConvProblem(N=13, K=3, C=40, F=100, B=3), "tf32"), tma(64, 64, 1, 3))
    # Not where the last block is more than half full (bf16 C = 40) or full (C = 512), nor for
    # the cp.async gather: those plans define no HALF_BLOCK and take two maps.
    for shape, dtype, other in (
        (ConvProblem(N=13, K=3, C=40, F=100, B=3), "bf16", tma(64, 64, 1, 3)),
        (ConvProblem(N=28, K=3, C=512, F=512, B=32), "tf32", tma(128, 128, 2, 4)),
        (ConvProblem(N=20, K=5, C=96, F=256, B=128), "bf16", cfg(128, 128, 2, 4, producer=1)),
    ):
        problem = nhwc(shape, dtype)
        assert not half_block(problem, other)
        assert "HALF_BLOCK" not in dict(FAMILY.plan(problem, other).defines)


def test_64_byte_steps_are_offered_with_tma_and_copy_half_rows() -> None:
    """STEP_BYTES = 64: a step of 32 16-bit or 16 FP32 elements, both tiles' rows 64 bytes in
    the 64-byte swizzle; OverFeat's C = 96 in three whole steps a tap, so no half block."""
    overfeat = nhwc(ConvProblem(N=20, K=5, C=96, F=256, B=128))
    space = bound(overfeat)
    assert {int(c["STEP_BYTES"]) for c in space if c["TMA"]} == {64, 128}
    assert {int(c["STEP_BYTES"]) for c in space if not c["TMA"]} == {128}
    narrow = tma(128, 128, 2, 8, store=1, multicast=1, step=64)
    assert space.is_valid(narrow) and not half_block(overfeat, narrow)
    assert not space.is_valid(cfg(128, 128, 2, 4, producer=1, step=64))  # the gather: 128 only
    assert reduction_step(overfeat, narrow) == 32
    assert reduction_step(nhwc(overfeat, "tf32"), narrow) == 16
    x_map, w_map, y_map = tensor_maps(overfeat, narrow)
    assert (x_map.box, x_map.swizzle_bytes) == ((32, 64), 64)  # a pair shares the pixels
    assert (w_map.box, w_map.swizzle_bytes) == ((32, 1, 128), 64)
    assert (y_map.box, y_map.swizzle_bytes) == ((64, 64), 128)  # the output's panels as before
    plan = FAMILY.plan(overfeat, narrow)
    defines = dict(plan.defines)
    assert defines["STEP_BYTES"] == 64 and "HALF_BLOCK" not in defines
    # Half the slot: eight stages of 128 x 128 take what four of 128-byte steps take.
    wide = tma(128, 128, 2, 4, store=1, multicast=1)
    assert shared_bytes(narrow, 2) == shared_bytes(wide, 2) + 16 * 4  # four more slots' mbarriers
    # A stored config (no STEP_BYTES) reads as 128-byte steps and builds the same defines.
    stored = Config.of({k: v for k, v in wide.as_dict().items() if k != "STEP_BYTES"})
    assert FAMILY.plan(overfeat, stored).defines == FAMILY.plan(overfeat, wide).defines


# 64-byte steps compiled: the multiply's descriptors in the 64-byte swizzle, two wgmmas a step
# along K (one in a short step), in both operand types, alone and in clusters, persistent and
# stream-K, a 1x1 input as a matrix, a fused epilogue, and a last channel block part full
# (C = 40 in 16 bits: 32 + 8, the short step's one wgmma).
NARROW_SAMPLE = [
    (
        ConvProblem(N=20, K=5, C=96, F=256, B=128),
        "bf16",
        tma(128, 128, 2, 8, store=1, multicast=1, persistent=1, step=64),
    ),
    (ConvProblem(N=20, K=5, C=96, F=256, B=128), "fp16", tma(192, 128, 3, 6, store=1, step=64)),
    (
        ConvProblem(N=224, K=3, C=64, F=64, B=32),
        "bf16",
        tma(256, 64, 2, 8, store=1, persistent=1, staging=2, step=64),
    ),
    (
        ConvProblem(N=28, K=3, C=512, F=512, B=32),
        "tf32",
        tma(128, 128, 2, 8, store=1, stream_k=1, step=64),
    ),
    (
        ConvProblem(N=7, K=1, C=512, F=2048, B=32),
        "fp16",
        tma(128, 112, 2, 8, store=1, gemm_1x1=1, multicast=2, step=64),
    ),
    (
        ConvProblem(N=13, K=3, C=40, F=100, B=3),
        "bf16",
        tma(64, 64, 1, 6, split=2, split_cluster=1, step=64),
    ),
    (
        ConvProblem(N=28, K=1, C=512, F=256, B=32, epilogue="bias_add_relu"),
        "bf16",
        tma(128, 128, 2, 8, store=1, gemm_1x1=1, staging=2, persistent=1, step=64),
    ),
]


@pytest.mark.parametrize(("problem", "dtype", "config"), NARROW_SAMPLE, ids=str)
def test_64_byte_steps_compile_for_sm90a_without_spills(compiler, problem, dtype, config):
    test_sampled_configs_compile_for_sm90a_without_spills(compiler, problem, dtype, config)


def test_the_filters_as_wgmmas_m_make_pixel_tiles_of_any_wgmma_width() -> None:
    """FILTERS_M: the filters on wgmma's M, 64 a consumer warpgroup, and BM pixels on its N, so
    that a pixel tile need not be whole m64 tiles: 128 filters x 96 pixels are one wave of 132
    tiles on ResNet-50's 14x14 C = 1024 F = 256, as cuDNN's kernel tiles that layer."""
    layer = nhwc(ConvProblem(N=14, K=1, C=1024, F=256, B=32))
    space = bound(layer)
    swapped = [c for c in space if c["FILTERS_M"]]
    assert {int(c["BM"]) for c in swapped} == {64, 96, 112, 128, 192, 224, 256}
    assert {int(c["BM"]) for c in space if not c["FILTERS_M"]} == {64, 128, 192, 256}
    for c in swapped:
        assert int(c["BN"]) == 64 * int(c["WG"]) and c["STORE_TMA"] and not c["PINGPONG"]
        assert not c["STREAM_K"] and int(c["SPLIT_K"]) == 1 and int(c["STEP_BYTES"]) == 128
    wave = filters_m(96, 2, 6, gemm_1x1=1, multicast=1)
    assert space.is_valid(wave) and tile_count(layer, wave) == 132
    # Each warpgroup stores its 64 filters of all 96 pixels: one 128-byte panel of 96 rows in
    # 16 bits, two of 32 FP32 filters.
    *_, y_map = tensor_maps(layer, wave)
    assert y_map.box == (64, 96) and warpgroup_rows(wave) == 96
    *_, y32 = tensor_maps(nhwc(layer, "tf32"), wave)
    assert y32.box == (32, 96)
    assert shared_bytes(wave, 2) == 6 * (96 + 128) * 128 + 96 * 128 * 2 + 1024 + 16 * 6 + 8 * 2
    assert dict(FAMILY.plan(layer, wave).defines)["FILTERS_M"] == 1
    # Not with a fused epilogue, tiles in turn, stores from registers or 64-byte steps; and
    # 96 pixels only with it.
    assert not bound(dataclasses.replace(layer, epilogue="bias_relu")).is_valid(wave)
    assert not space.is_valid(tma(96, 128, 2, 6, store=1, gemm_1x1=1))
    many = bound(nhwc(ConvProblem(N=28, K=1, C=512, F=256, B=32)))
    assert many.is_valid(filters_m(96, 2, 6, persistent=1))
    assert not many.is_valid(filters_m(96, 2, 6, pingpong=1, persistent=1))
    assert not space.is_valid(tma(96, 128, 2, 6, gemm_1x1=1, filters_m=1))
    assert not space.is_valid(filters_m(96, 2, 6, step=64))
    # A config stored before FILTERS_M reads as pixels on M, with the same defines.
    plain = tma(192, 64, 3, 6, store=1, gemm_1x1=1)
    stored = Config.of({k: v for k, v in plain.as_dict().items() if k != "FILTERS_M"})
    assert FAMILY.plan(layer, stored).defines == FAMILY.plan(layer, plain).defines


# FILTERS_M compiled: every dtype, 1x1 layers as matrices alone, in pairs sharing the pixel
# tile and persistent, the im2col path at an odd shape with a part-full channel block, and
# three consumer warpgroups.
FILTERS_M_SAMPLE = [
    (
        ConvProblem(N=14, K=1, C=1024, F=256, B=32),
        "bf16",
        filters_m(96, 2, 7, gemm_1x1=1, multicast=1),
    ),
    (ConvProblem(N=28, K=1, C=512, F=256, B=32), "fp16", filters_m(192, 2, 4, persistent=1)),
    (
        ConvProblem(N=7, K=1, C=512, F=2048, B=32),
        "tf32",
        filters_m(112, 2, 5, gemm_1x1=1, multicast=1),
    ),
    (ConvProblem(N=13, K=3, C=40, F=104, B=3, stride=2), "bf16", filters_m(224, 1, 4)),
    (ConvProblem(N=37, K=3, C=64, F=200, B=1), "tf32", filters_m(64, 3, 4)),
    (ConvProblem(N=37, K=3, C=64, F=200, B=1), "fp16", filters_m(128, 3, 4)),
]


@pytest.mark.parametrize(("problem", "dtype", "config"), FILTERS_M_SAMPLE, ids=str)
def test_filters_on_m_compile_for_sm90a_without_spills(compiler, problem, dtype, config):
    test_sampled_configs_compile_for_sm90a_without_spills(compiler, problem, dtype, config)
