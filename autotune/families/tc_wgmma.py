"""tc_wgmma: NHWC implicit-GEMM convolution on Hopper's warpgroup tensor cores (sm_90a)."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

from autotune.families import conv2d
from autotune.families.base import Family, KernelPlan, Launch, cdiv
from autotune.families.conv2d import epilogue_defines, problem_defines, storage_define
from autotune.families.plan import split_k_plan
from autotune.families.tc_wgmma_memory import (
    ROW_BYTES,
    cluster,
    half_block,
    shared_bytes,
    tensor_maps,
)
from autotune.model.epilogue import EPILOGUES
from autotune.model.precision import TENSOR_CORE_DTYPES
from autotune.model.problem import ConvProblem
from autotune.model.space import Config

# The kernel indexes input, filters and output with 32-bit integers.
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


def threads(config: Config) -> int:
    return WARPGROUP * (int(config["WG"]) + int(config["PRODUCER"]))


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
