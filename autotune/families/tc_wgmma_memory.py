"""tc_wgmma's tensor maps and shared memory: TMA's maps and their boxes (a copy's pixels and
filters, a step's bytes of the reduction, the half-width last channel block, the output panels),
the dynamic shared memory of the slots, staging tiles and barriers, and the reads of a
configuration they depend on (a warpgroup's rows, FILTERS_M, the cluster). Apart from the family
(tc_wgmma.py), which plans its launches with them: the byte arithmetic the kernel's copies and
buffers must match."""

from __future__ import annotations

from autotune.families.plan import TensorMap
from autotune.model.problem import ConvProblem
from autotune.model.space import Config

ROW_BYTES = 128  # an output panel's row, and a step's row of K unless STEP_BYTES says 64
SWIZZLE_ALIGN = 1024  # the 128-byte swizzle repeats every 8 rows; the slots start aligned to it


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


def step_bytes(config: Config | None) -> int:
    """Bytes of the reduction a step, each tile row's (the kernel's STEP_BYTES): 128, or with
    TMA 64 (the 64-byte swizzle)."""
    values = {} if config is None else config.as_dict()  # a config stored before it: 128
    return int(values.get("STEP_BYTES", ROW_BYTES))


def reduction_step(problem: ConvProblem, config: Config | None = None) -> int:
    """Reduction elements a step (BK): 64 16-bit or 32 FP32 values, half that with 64-byte
    steps."""
    return step_bytes(config) // problem.precision.bytes


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
