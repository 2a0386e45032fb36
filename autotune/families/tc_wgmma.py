"""tc_wgmma: NHWC implicit-GEMM convolution on Hopper's warpgroup tensor cores (sm_90a)."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

from autotune.families import conv2d
from autotune.families.base import Family, KernelPlan, Launch, cdiv
from autotune.families.conv2d import epilogue_defines, problem_defines, storage_define
from autotune.families.plan import TensorMap, split_k_plan
from autotune.model.epilogue import EPILOGUES
from autotune.model.precision import TENSOR_CORE_DTYPES
from autotune.model.problem import ConvProblem
from autotune.model.space import Config

# The kernel indexes input, filters and output with 32-bit integers.
ROW_BYTES = 128  # an output panel's row, and a step's row of K unless STEP_BYTES says 64
SWIZZLE_ALIGN = 1024  # the 128-byte swizzle repeats every 8 rows; the slots start aligned to it
WARPGROUP = 128
TUNABLES = (
    "BM", "BN", "WG", "STAGES", "SPLIT_K", "PRODUCER", "C_OUTER", "L1_CACHE", "TILES_PER_BLOCK",
    "TMA", "STORE_TMA", "GEMM_1X1", "STAGING", "PINGPONG", "STREAM_K", "MULTICAST",
    "MULTICAST_BLOCKS", "SPLIT_CLUSTER", "STEP_BYTES", "FILTERS_M",
)  # fmt: skip
# Threads a block of the space-to-depth rewrite (S2D_BLOCK in the kernel): a 16-byte chunk each.
S2D_BLOCK = 256
S2D_BUFFERS = ("x_s2d", "w_s2d")  # the rewritten input and filters, scratch of the plan
# The most blocks sharing a stream-K grid's last tiles (STREAM_K_BLOCKS in the kernel): Hopper's
# largest parts have 132 multiprocessors; a grid of more leaves the others out of the sharing.
STREAM_K_BLOCKS = 132


def warpgroup_rows(config: Config) -> int:
    """Output rows (pixels) a consumer warpgroup computes of a tile: its share of BM, or all of
    them with PINGPONG (tiles in turn) or FILTERS_M (each its 64 filters of every pixel)."""
    bm = int(config["BM"])
    return bm if int(config["PINGPONG"]) or filters_m(config) else bm // int(config["WG"])


def filters_m(config: Config) -> bool:
    """Whether the filters are wgmma's M and the pixels its N (the kernel's FILTERS_M); a
    config stored before it: no."""
    return bool(int(config.as_dict().get("FILTERS_M", 0)))


def cluster(config: Config) -> int:
    """Blocks a cluster: MULTICAST_BLOCKS with MULTICAST (blocks on tiles that share the input,
    1, or the filter tile, 2), a tile's SPLIT_K with SPLIT_CLUSTER, else one."""
    if int(config["MULTICAST"]):
        return int(config["MULTICAST_BLOCKS"])
    return int(config["SPLIT_K"]) if int(config["SPLIT_CLUSTER"]) else 1


def tile_count(problem: ConvProblem, config: Config) -> int:
    """Output tiles the grid walks: filter tiles x pixel tiles, with MULTICAST the shared
    dimension's tiles rounded up to whole groups (as the kernel's TILES)."""
    tiles_f = cdiv(problem.F, int(config["BN"]))
    tiles_m = cdiv(problem.B * problem.N * problem.N, int(config["BM"]))
    multicast, group = int(config["MULTICAST"]), cluster(config)
    if multicast == 1:
        tiles_f = group * cdiv(tiles_f, group)
    elif multicast == 2:
        tiles_m = group * cdiv(tiles_m, group)
    return tiles_f * tiles_m


def step_bytes(config: Config | None) -> int:
    """Bytes of the reduction a step, each tile row's (the kernel's STEP_BYTES): 128, or with
    TMA 64 (the 64-byte swizzle)."""
    values = {} if config is None else config.as_dict()  # a config stored before it: 128
    return int(values.get("STEP_BYTES", ROW_BYTES))


def reduction_step(problem: ConvProblem, config: Config | None = None) -> int:
    """Reduction elements a step (BK): 64 16-bit or 32 FP32 values, half that with 64-byte
    steps."""
    return step_bytes(config) // problem.precision.bytes


def space_to_depth(problem: ConvProblem) -> ConvProblem | None:
    """The stride-1 layer the main kernel computes where the plan first rewrites a strided
    layer's input and filters as space-to-depth (the kernel's tc_wgmma_s2d), or None: where C
    fills no 16-byte chunk (a first layer's C = 3), each stride x stride block of input pixels
    becomes one pixel of stride^2 * C channels, padded to a whole chunk, and the filter
    ceil(K / stride) taps of them. Its 16-byte copies replace the element gather, which spends a
    load on every element: with the rewrite's own launch timed, ResNet-50's 7x7/2, AlexNet's
    and OverFeat's 11x11/4 first layers ran 1.32-1.46x as fast in 16 bits and 1.04-1.49x in tf32
    (results/h200/20261201i, call 2). At stride 1 there is nothing to fold (VGG-16's first layer
    with C padded to 8 was slower, call 1). The rewritten input is pre-padded: the rewrite reads
    the layer's padding and tail."""
    p = problem
    chunk = 16 // p.precision.bytes
    if p.stride == 1 or p.C % chunk == 0:
        return None
    s = p.stride
    channels = cdiv(s * s * p.C, chunk) * chunk
    return dataclasses.replace(p, K=cdiv(p.K, s), C=channels, stride=1, padding=0, tail=0)


def computed(problem: ConvProblem) -> ConvProblem:
    """The layer the main kernel computes: the space-to-depth one where there is one."""
    return space_to_depth(problem) or problem


def half_block(problem: ConvProblem, config: Config) -> bool:
    """Whether the TMA path copies C's last channel block at half width (the kernel's
    HALF_BLOCK): where that block is at most half full, as OverFeat's C = 96 in 16 bits (64 +
    32). Not a tunable: on that layer it was faster in each of 48 comparisons (12
    configurations in each 16-bit dtype, with and without it, on two machines), by 14-23%
    (results/h200/20261201h, calls 5 and 6); through the full box the zeros cost as much to
    copy as data. Left out of stream-K at 256 filters a tile (128
    accumulators a thread), where its second path spilled 8-24 bytes in 16 bits, of 64-byte
    steps (whose half would be 32-byte rows) and of FILTERS_M (not built with it)."""
    rest = problem.C % reduction_step(problem)
    spills = int(config["STREAM_K"]) and int(config["BN"]) == 256
    narrow = step_bytes(config) != ROW_BYTES
    return (
        bool(int(config["TMA"]))
        and not spills
        and not narrow
        and not filters_m(config)
        and 0 < rest <= reduction_step(problem) // 2
    )


def tensor_maps(
    problem: ConvProblem, config: Config, inputs: tuple[str, str] = ("x", "w")
) -> tuple[TensorMap, ...]:
    """TMA's maps (TMA = 1): the NHWC input in im2col mode, BM filter-window origins of BK
    channels a copy (from `padding` before the image to the window's far corner K - 1 - padding
    short of its edge, less the tail, origins STRIDE apart; with GEMM_1X1, a 1x1 filter at
    stride 1, the input as a tiled (C, B*N*N) matrix, BK channels of BM pixels a copy; a part
    of the pixels, BM / MULTICAST_BLOCKS, with MULTICAST = 1: each block of a group copies its
    part of the shared input tile into all of them), and the FKKC filters as a (C, K*K, F)
    tensor, BK channels x 1 tap x BN filters a copy (BN / MULTICAST_BLOCKS with MULTICAST = 2);
    with STORE_TMA, the NHWF output as (F, B*N*N), a 128-byte panel of a consumer warpgroup's
    rows a store (warpgroup_rows pixels), and where BN's row is not whole panels (16-bit 96, 112
    and 224, FP32 112) a second map of the rest, its columns in unswizzled rows; a fused
    residual the same way (the kernel's RESIDUAL_TMA loads it into the staging tile). With
    HALF_BLOCK, the input's and the filters' maps again after them at half the channels, in
    the 64-byte swizzle: the last channel block's copies. `inputs` names the input's and the
    filters' buffers (the space-to-depth rewrite's where the plan makes one)."""
    p = problem
    storage = p.precision.storage
    elem = p.precision.bytes
    side = p.input_size  # as stored: (N - 1) * stride + K - 2 * padding + tail
    # The box of window origins runs from `padding` before the image to the last origin whose
    # window ends `padding` past it (the tail's rows after it); the copies fill zeros for what
    # lies outside the image.
    lower, upper = -p.padding, p.padding + 1 - p.K - p.tail
    # A copy's pixels and filters: the tile's, or a block's part of the tile a group shares.
    step, pixels, filters = reduction_step(p, config), int(config["BM"]), int(config["BN"])
    multicast = int(config["MULTICAST"])
    if multicast == 1:
        pixels //= cluster(config)
    elif multicast == 2:
        filters //= cluster(config)

    def input_maps(channels: int, swizzle: int) -> tuple[TensorMap, TensorMap]:
        if int(config["GEMM_1X1"]):
            x_map = TensorMap(
                inputs[0],
                storage,
                dims=(p.C, p.B * side * side),
                strides=(p.C * elem,),
                box=(channels, pixels),
                element_strides=(1, 1),
                swizzle_bytes=swizzle,
            )
        else:
            x_map = TensorMap(
                inputs[0],
                storage,
                dims=(p.C, side, side, p.B),
                strides=(p.C * elem, side * p.C * elem, side * side * p.C * elem),
                box=(channels, pixels),
                element_strides=(1, p.stride, p.stride, 1),
                swizzle_bytes=swizzle,
                corners=((lower, lower), (upper, upper)),
            )
        w_map = TensorMap(
            inputs[1],
            storage,
            dims=(p.C, p.K * p.K, p.F),
            strides=(p.C * elem, p.K * p.K * p.C * elem),
            box=(channels, 1, filters),
            element_strides=(1, 1, 1),
            swizzle_bytes=swizzle,
        )
        return x_map, w_map

    maps = input_maps(step, step_bytes(config))
    if half_block(p, config):  # the last channel block's: half the box, 64-byte rows
        maps += input_maps(step // 2, ROW_BYTES // 2)
    if not int(config["STORE_TMA"]):
        return maps
    panel = ROW_BYTES // elem  # columns a swizzled panel; a row's rest (tail) goes unswizzled
    tail = int(config["BN"]) % panel
    output_maps = tuple(
        TensorMap(
            buffer,
            storage,
            dims=(p.F, p.B * p.N * p.N),
            strides=(p.F * elem,),
            box=(cols, warpgroup_rows(config)),
            element_strides=(1, 1),
            swizzle_bytes=ROW_BYTES if cols == panel else 0,
        )
        for buffer in (("y", "residual") if p.fused is not None and p.fused.residual else ("y",))
        for cols in ((panel, tail) if tail else (panel,))
    )
    return *maps, *output_maps


def threads(config: Config) -> int:
    return WARPGROUP * (int(config["WG"]) + int(config["PRODUCER"]))


def shared_bytes(config: Config, elem_bytes: int) -> int:
    """Dynamic shared memory: the slots, STORE_TMA's STAGING staging tiles (BM x BN outputs of
    `elem_bytes` each, one a consumer warpgroup with PINGPONG), the alignment slack, the
    producer's mbarriers (a full and an empty one a slot, and with STORE_TMA one a consumer
    warpgroup and staging tile for a residual loaded into it)."""
    stages, bm, bn = int(config["STAGES"]), int(config["BM"]), int(config["BN"])
    slots = stages * (bm + bn) * step_bytes(config)
    staged = int(config["STORE_TMA"]) * int(config["STAGING"])
    barriers = 16 * stages * int(config["PRODUCER"]) + 8 * int(config["WG"]) * staged
    staging_tile = bm * bn * elem_bytes * (1 + int(config["PINGPONG"]))
    return slots + staged * staging_tile + SWIZZLE_ALIGN + barriers


class TcWgmma(Family):
    name = "tc_wgmma"
    description = (
        "implicit GEMM, (B*N*N pixels) x F = gathered NHWC input rows x FKKC filters, on wgmma "
        "(m64nBNk16 BF16/FP16, m64nBNk8 TF32 on the FP32 bits) with both operands in "
        "128-byte-swizzled shared memory (matrix descriptors; with TMA, optionally 64-byte steps "
        "of the reduction in the 64-byte swizzle) and FP32 accumulators; a multi-stage "
        "cp.async pipeline (16-byte chunks where C fills whole ones, an element gather otherwise; "
        "a strided layer whose C does not, as a first layer's C = 3, is rewritten as "
        "space-to-depth first and computed at stride 1), one or two consumer warpgroups (or, with "
        "TMA, three on 192-pixel tiles), an optional producer warpgroup on mbarriers, optional "
        "split-K (the partial sums added by a second kernel or, TMA, in a cluster of the tile's "
        "splits over distributed shared memory) or (TMA) stream-K sharing of the last wave's "
        "reduction steps, or (TMA) tensor-memory copies of both tiles through an im2col-mode (or, "
        "for a 1x1 filter at stride 1, a plain tiled) and a tiled tensor map, optionally in "
        "clusters of two or four blocks sharing one operand's tile by multicast copies, and "
        "(TMA, unfused) optionally the filters as wgmma's M and the pixels as its N, for pixel "
        "tiles of any width wgmma takes (96, 112, 224); output in the storage type (BF16/FP16 "
        "rounded, FP32 rounded to TF32), after the problem's fused "
        "epilogue if it has one (scale, bias, residual, activation)"
    )
    paper = "issue 20 (tensor cores), Hopper's wgmma path"
    layout = "NHWC input, FKKC filters, NHWF output"
    precision = "fp32 storage with TF32 products, or bf16/fp16 storage; FP32 accumulation"
    dtypes = TENSOR_CORE_DTYPES
    layouts = ("NHWC",)
    # Every fused epilogue, applied where the consumers store their accumulators (or in the
    # split-K reduction); compiled in only for a problem with one.
    epilogues = tuple(EPILOGUES)
    reference_sources = (
        conv2d.REFERENCE_SOURCE,
        conv2d.EPILOGUE_REFERENCE_SOURCE,
        conv2d.PADDED_REFERENCE_SOURCE,
    )
    default_shape_set = "alexnet"
    # Configs stored before the TMA path loaded by cp.async.
    later_tunables = MappingProxyType(
        dict(TMA=0, STORE_TMA=0, GEMM_1X1=0, STAGING=1, PINGPONG=0, PERSISTENT=0, STREAM_K=0)
        | dict(MULTICAST=0, MULTICAST_BLOCKS=2, SPLIT_CLUSTER=0, STEP_BYTES=ROW_BYTES, FILTERS_M=0)
    )
    # Asked first by a cold search (made valid for the shape: GEMM_1X1 only where the input is a
    # matrix, PERSISTENT only past a wave of tiles). Four are the greedy choice over 114
    # exhaustive searches of the TMA core (results/h200/20261201: every layer of AlexNet,
    # OverFeat, VGG-16 and ResNet-50 with C > 3 in tf32, bf16 and fp16 on the H200): chosen on 51
    # of them, the best of the four was 1.0% slower than each search's best on the other 63
    # (geometric mean; 12% at worst), where on those 51 the three seeds before them were 8%
    # slower (1.8x at worst). The fifth, two staging tiles, lets a fused residual load under the
    # next tile's main loop (results/h200/20261130b).
    starting_configs = tuple(
        dict(BM=bm, BN=bn, WG=2, STAGES=stages, SPLIT_K=1, PRODUCER=1, C_OUTER=1, L1_CACHE=0)
        | dict(TILES_PER_BLOCK=1, TMA=1, STORE_TMA=1, GEMM_1X1=gemm, STAGING=staging, PINGPONG=0)
        | dict(PERSISTENT=persistent, STREAM_K=0, MULTICAST=0, MULTICAST_BLOCKS=2, SPLIT_CLUSTER=0)
        | dict(STEP_BYTES=ROW_BYTES, FILTERS_M=0)
        for bm, bn, stages, gemm, persistent, staging in (
            (128, 128, 4, 1, 1, 1),
            (128, 64, 6, 1, 1, 1),
            (128, 128, 6, 0, 1, 1),
            (128, 128, 4, 0, 0, 1),
            (128, 128, 5, 0, 1, 2),
        )
    )  # fmt: skip
    launch_tunables = ("PERSISTENT",)
    int32_offsets = True
    # A padded input through the im2col map only (the space keeps TMA = 1 for one).
    reads_padding = True

    def space_fields(self, problem: ConvProblem) -> dict[str, int]:
        """The fields of the layer the main kernel computes: a configuration tiles that one."""
        return computed(problem).fields()

    def check_limits(self, problem: ConvProblem) -> None:
        rewritten = space_to_depth(problem)
        if rewritten is not None:
            self.check_int32_offsets(rewritten)

    def plan(self, problem: ConvProblem, config: Config) -> KernelPlan:
        """The main kernel's launch (and split-K's reduction); where the layer is rewritten as
        space-to-depth, the rewrite's launch first, into two scratch buffers the main kernel
        reads as its input and filters."""
        config = self.complete(config)
        rewritten = space_to_depth(problem)
        if rewritten is None:
            return self._main_plan(problem, config, ("x", "w"), ())
        p, q = problem, rewritten
        defines = (
            ("S2D_STRIDE", p.stride),
            ("S2D_C", p.C),
            ("S2D_K", p.K),
            ("S2D_SIDE", p.input_size),
            ("S2D_PAD", p.padding),
        )
        main = self._main_plan(q, config, S2D_BUFFERS, defines)
        elems = (q.B * q.input_size**2 * q.C, q.F * q.K**2 * q.C)
        chunk = 16 // q.precision.bytes  # elements a thread of the rewrite
        rewrite = Launch(
            "tc_wgmma_s2d",
            grid=(cdiv(sum(elems) // chunk, S2D_BLOCK), 1, 1),
            block=(S2D_BLOCK, 1, 1),
            args=("x", "w", *S2D_BUFFERS),
        )
        # Scratch is counted in 4-byte words.
        scratch = tuple(
            (name, (cdiv(n * q.precision.bytes, 4),))
            for name, n in zip(S2D_BUFFERS, elems, strict=True)
        )
        return dataclasses.replace(
            main, launches=(rewrite, *main.launches), scratch=(*scratch, *main.scratch)
        )

    def _main_plan(
        self,
        p: ConvProblem,
        config: Config,
        inputs: tuple[str, str],
        rewrite_defines: tuple[tuple[str, int], ...],
    ) -> KernelPlan:
        """The main kernel's plan for the layer `p` it computes, reading `inputs` as its input
        and filters."""
        values = {name: int(config[name]) for name in TUNABLES}
        # The epilogue's defines last, and only with one: a plain problem builds as it did;
        # HALF_BLOCK and the rewrite's likewise only where they apply.
        half = (("HALF_BLOCK", 1),) if half_block(p, config) else ()
        defines = (
            *problem_defines(p),
            storage_define(p),
            *values.items(),
            *half,
            *rewrite_defines,
            *epilogue_defines(p),
        )
        fused = p.fused.inputs if p.fused else ()
        pixels = p.B * p.N * p.N
        split = values["SPLIT_K"]
        tiles = tile_count(p, config)
        stream_k = values["STREAM_K"]
        # With MULTICAST, whole clusters: a group's blocks take the group's tiles in turn.
        # With SPLIT_CLUSTER a tile's cluster holds its splits, along x, and its first block
        # stores the tile: no partial sums leave the cluster.
        blocks = cluster(config)
        in_cluster = bool(values["SPLIT_CLUSTER"])
        # One block a multiprocessor (PERSISTENT), each walking the tiles by gridDim.x, as the
        # kernel always does; with STREAM_K every multiprocessor, whatever the tiles.
        if stream_k:
            grid = (STREAM_K_BLOCKS, 1, 1)
        elif in_cluster:
            grid = (split * tiles, 1, 1)  # one tile a block (the kernel's TILE_BLOCKS a tile)
        else:
            grid = (blocks * cdiv(tiles // blocks, values["TILES_PER_BLOCK"]), 1, split)
        gemm = Launch(
            "tc_wgmma",
            grid=grid,
            blocks_per_sm=1 if stream_k else int(config["PERSISTENT"]),
            cluster=blocks,
            block=(threads(config), 1, 1),
            args=(
                *inputs,
                *(("y", *fused) if split == 1 or in_cluster else ("y_split",)),
                *(("sk_partials", "sk_counters") if stream_k else ()),
                *(tensor_maps(p, config, inputs) if values["TMA"] else ()),
            ),
            smem_bytes=shared_bytes(config, p.precision.bytes),
        )
        if stream_k:
            # Two slots of a tile's FP32 partial sums a sharing block; a counter a tile and
            # consumer warpgroup, which the kernel leaves at zero.
            slots = 2 * STREAM_K_BLOCKS
            return KernelPlan(
                self.source_path,
                (*defines, ("STREAM_K_BLOCKS", STREAM_K_BLOCKS)),
                (gemm,),
                scratch=(("sk_partials", (slots, values["BM"] * values["BN"])),),
                counters=(("sk_counters", tiles * values["WG"]),),
                arch_specific=True,
            )
        # Split-K: FP32 partial sums, added up and stored into y by tc_wgmma_reduce (in a
        # cluster, by its first block: one launch).
        return split_k_plan(
            self.source_path,
            defines,
            gemm,
            1 if in_cluster else split,
            "tc_wgmma_reduce",
            (pixels, p.F),
            arch_specific=True,
            reduce_inputs=fused,
        )
