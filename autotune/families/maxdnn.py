"""maxdnn: Lavin's maxDNN, an implicit GEMM per output coordinate in the CHWN layout."""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from autotune.families.base import Family, KernelPlan, Launch, UnsupportedProblem, cdiv
from autotune.families.conv2d import problem_defines
from autotune.model.problem import ConvProblem
from autotune.model.space import Config

CONST_BANK_BYTES = 64 * 1024
INT32_MAX = 2**31 - 1
GRID_YZ_MAX = 65535
# The smallest image tile in the space: a problem whose CHWN copy overflows int32 offsets even
# at this padding has no valid configuration.
MIN_BN = 32
TRANSPOSE_TILE = 32
TRANSPOSE_BLOCK = (32, 8, 1)
OFFSETS_BLOCK = 256
# ptxas's register-usage level when none is asked for; REG_USAGE_LEVEL at this value passes no
# option, so those cubins are the ones built before the tunable existed.
PTXAS_DEFAULT_REG_USAGE = 5


@dataclass(frozen=True, slots=True)
class Layout:
    """The padded extents of the GEMM operands for one problem and tile (mirrors the .cu)."""

    images: int  # BP: B rounded up to whole BN tiles (zero images)
    filters: int  # FP: F rounded up to whole BM tiles (zero filters)
    rows: int  # RP: the patch length C*K*K rounded up to whole BK iterations (zero weights)

    @classmethod
    def of(cls, problem: ConvProblem, bm: int, bn: int, bk: int) -> Layout:
        patch = problem.C * problem.K * problem.K
        return cls(
            images=cdiv(problem.B, bn) * bn,
            filters=cdiv(problem.F, bm) * bm,
            rows=cdiv(patch, bk) * bk,
        )


def patch_offsets(problem: ConvProblem, layout: Layout) -> np.ndarray:
    """What build_offsets writes: the CHWN element offset of every patch row (c, i, j) from the
    patch origin, then zeros for the padding rows."""
    s, k = problem.input_size, problem.K
    c, i, j = np.meshgrid(np.arange(problem.C), np.arange(k), np.arange(k), indexing="ij")
    offsets = np.zeros(layout.rows, dtype=np.int64)
    offsets[: problem.C * k * k] = (((c * s + i) * s + j) * layout.images).ravel()
    return offsets


def emulate(problem: ConvProblem, layout: Layout, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The kernel's arithmetic in NumPy (float64): convert layouts as setup does, gather each output
    pixel's patch through the offsets table, multiply, convert back as finish does."""
    p, lay = problem, layout
    patch = p.C * p.K * p.K
    x_chwn = np.zeros((p.C, p.input_size, p.input_size, lay.images))
    x_chwn[..., : p.B] = x.transpose(1, 2, 3, 0)
    w_t = np.zeros((lay.rows, lay.filters))
    w_t[:patch, : p.F] = w.reshape(p.F, patch).T
    flat = x_chwn.ravel()
    offsets = patch_offsets(p, lay)
    y_fhwn = np.empty((lay.filters, p.N, p.N, lay.images))
    images = np.arange(lay.images)
    for oy in range(p.N):
        for ox in range(p.N):
            origin = (oy * p.stride * p.input_size + ox * p.stride) * lay.images
            patch_rows = flat[origin + offsets[:, None] + images[None, :]]  # (RP, BP)
            y_fhwn[:, oy, ox, :] = w_t.T @ patch_rows
    return y_fhwn[: p.F, :, :, : p.B].transpose(3, 0, 1, 2)


class MaxDnn(Family):
    name = "maxdnn"
    description = (
        "implicit GEMM per output pixel in CHWN: a BM (filters) x BN (images) block tile in "
        "shared memory, TM x TN register blocking, BK patch rows per iteration, double-buffered "
        "global and shared loads (DOUBLE_BUFFER: 0 off, 1 staged through registers as in the "
        "paper, 2 through cp.async), VEC-wide loads, patch offsets in constant memory, images, "
        "filters and patch rows zero-padded to whole tiles. Paper: 64x64 block = BM=BN=64, 8x8 "
        "register block = TM=TN=8, 8 columns per iteration = BK=8, 128-bit texture loads = "
        "VEC=4, double buffering = DOUBLE_BUFFER=1; MIN_BLOCKS is __launch_bounds__' occupancy "
        "target; SPLIT_K splits the reduction across blocks (atomic adds into a cleared output) "
        "to fill the last wave; FMA_ORDER 1 orders the FFMAs serpentine for operand reuse; "
        "BYTE_OFFSETS 1 keeps the patch offsets in bytes (cheaper addresses); REG_USAGE_LEVEL "
        "is ptxas's --register-usage-level (5, its default, passes nothing; above it ptxas may "
        "keep more registers live, which lets it read the next patch row's fragments a whole "
        "row of FFMAs ahead on 128 x 128 / BK=32 tiles instead of just before their use)"
    )
    paper = "002 (Lavin, maxDNN 2015), section 3.2"
    layout = (
        "CHWN input (images zero-padded to BN), (CKK)F filters (zero-padded to BM filters and BK "
        "rows), FHWN output; converted outside the timed region"
    )
    default_shape_set = "alexnet"
    # Configs stored before split-K, the serpentine FFMA order, byte offsets and the register-usage
    # level ran without them.
    later_tunables = MappingProxyType(
        {
            "SPLIT_K": 1,
            "FMA_ORDER": 0,
            "BYTE_OFFSETS": 0,
            "REG_USAGE_LEVEL": PTXAS_DEFAULT_REG_USAGE,
        }
    )

    def check_limits(self, problem: ConvProblem) -> None:
        table = problem.C * problem.K * problem.K * 4
        if table > CONST_BANK_BYTES:
            raise UnsupportedProblem(
                f"{self.name} keeps the C*K*K patch offsets in the 64 KB constant bank; "
                f"C={problem.C}, K={problem.K} need {table} bytes"
            )
        chwn = problem.C * problem.input_size**2 * cdiv(problem.B, MIN_BN) * MIN_BN
        if chwn > INT32_MAX:
            raise UnsupportedProblem(
                f"{self.name} indexes the CHWN input with 32-bit offsets; "
                f"{chwn} elements do not fit"
            )

    def plan(self, problem: ConvProblem, config: Config) -> KernelPlan:
        config = self.complete(config)
        bm, bn, bk = int(config["BM"]), int(config["BN"]), int(config["BK"])
        tm, tn = int(config["TM"]), int(config["TN"])
        double_buffer, vec = int(config["DOUBLE_BUFFER"]), int(config["VEC"])
        min_blocks = int(config["MIN_BLOCKS"])
        split_k, fma_order = int(config["SPLIT_K"]), int(config["FMA_ORDER"])
        byte_offsets = int(config["BYTE_OFFSETS"])
        reg_usage = int(config["REG_USAGE_LEVEL"])
        p = problem
        lay = Layout.of(p, bm, bn, bk)
        s, pixels, patch = p.input_size, p.N * p.N, p.C * p.K * p.K
        defines = (
            *problem_defines(p),
            ("BM", bm),
            ("BN", bn),
            ("BK", bk),
            ("TM", tm),
            ("TN", tn),
            ("DOUBLE_BUFFER", double_buffer),
            ("VEC", vec),
            ("MIN_BLOCKS", min_blocks),
            ("SPLIT_K", split_k),
            ("FMA_ORDER", fma_order),
            ("BYTE_OFFSETS", byte_offsets),
        )
        scratch = (
            ("x_chwn", (p.C, s, s, lay.images)),
            ("w_t", (lay.rows, lay.filters)),
            ("y_fhwn", (lay.filters, p.N, p.N, lay.images)),
            ("offsets", (lay.rows,)),  # int32 words in a float32 buffer
        )
        setup = (
            # x (B, C, S*S) -> x_chwn (C, S*S, BP): per channel, images become innermost.
            _transpose(
                "x", "x_chwn", groups=p.C, rows=p.B, cols=s * s, rows_pad=lay.images,
                cols_pad=s * s, src_g=s * s, src_r=p.C * s * s, dst_g=s * s * lay.images,
                dst_c=lay.images,
            ),
            # w (F, C*K*K) -> w_t (RP, FP): filters become innermost.
            _transpose(
                "w", "w_t", groups=1, rows=p.F, cols=patch, rows_pad=lay.filters,
                cols_pad=lay.rows, src_g=0, src_r=patch, dst_g=0, dst_c=lay.filters,
            ),
            Launch(
                "build_offsets",
                grid=(cdiv(lay.rows, OFFSETS_BLOCK), 1, 1),
                block=(OFFSETS_BLOCK, 1, 1),
                args=("offsets",),
            ),
        )  # fmt: skip
        main = Launch(
            "maxdnn",
            grid=(pixels, lay.filters // bm, lay.images // bn * split_k),
            block=((bm // tm) * (bn // tn), 1, 1),
            args=("x_chwn", "w_t", "y_fhwn"),
            smem_bytes=shared_bytes(config),
        )
        # y_fhwn (F, N*N, BP) -> y (B, F, N*N): per filter, the padding images are dropped.
        finish = (
            _transpose(
                "y_fhwn", "y", groups=p.F, rows=pixels, cols=p.B, rows_pad=pixels, cols_pad=p.B,
                src_g=pixels * lay.images, src_r=lay.images, dst_g=pixels, dst_c=p.F * pixels,
            ),
        )  # fmt: skip
        # Split-K blocks add into y_fhwn, so the timed run clears it first.
        words = lay.filters * pixels * lay.images // 4
        zero = Launch(
            "zero_fill",
            grid=(cdiv(words, OFFSETS_BLOCK), 1, 1),
            block=(OFFSETS_BLOCK, 1, 1),
            args=("y_fhwn", words),
        )
        return KernelPlan(
            self.source_path,
            defines,
            (zero, main) if split_k > 1 else (main,),
            constants=(("c_offsets", "offsets"),),
            scratch=scratch,
            setup=setup,
            finish=finish,
            ptxas_options=ptxas_options(reg_usage),
        )


def ptxas_options(reg_usage_level: int) -> tuple[str, ...]:
    """The PTX assembler's options for REG_USAGE_LEVEL: none at ptxas's own default."""
    if reg_usage_level == PTXAS_DEFAULT_REG_USAGE:
        return ()
    return (f"--register-usage-level={reg_usage_level}",)


def shared_bytes(config: Config) -> int:
    """Dynamic shared memory of the main kernel: one or two stages of BK filter and patch rows."""
    stages = 2 if int(config["DOUBLE_BUFFER"]) else 1
    return stages * int(config["BK"]) * (int(config["BM"]) + int(config["BN"])) * 4


def _transpose(
    src: str,
    dst: str,
    *,
    groups: int,
    rows: int,
    cols: int,
    rows_pad: int,
    cols_pad: int,
    src_g: int,
    src_r: int,
    dst_g: int,
    dst_c: int,
) -> Launch:
    """transpose_pad: dst[g][col][r] = src[g*src_g + r*src_r + col], zero past rows and cols."""
    tiles = cdiv(rows_pad, TRANSPOSE_TILE) * cdiv(cols_pad, TRANSPOSE_TILE)
    return Launch(
        "transpose_pad",
        grid=(tiles, 1, groups),
        block=TRANSPOSE_BLOCK,
        args=(src, dst, rows, cols, rows_pad, cols_pad, src_g, src_r, dst_g, dst_c),
    )
