"""im2col_gemm: unroll the input into a C*K*K x N*N matrix per image, then a tiled SGEMM."""

from __future__ import annotations

from autotune.families.base import Family, KernelPlan, Launch, UnsupportedProblem, cdiv
from autotune.families.conv2d import problem_defines
from autotune.families.plan import tiled_threads
from autotune.model.problem import ConvProblem
from autotune.model.space import Config

# Within one image the kernels index with 32-bit integers; images are 64-bit offsets apart.
MAX_ELEMENTS = 2**31 - 1
MAX_GRID_Y = 65535
# The filter tile in shared memory is padded by this many floats per row (see the kernel).
A_PAD = 4
TUNABLES = ("BM", "BN", "BK", "TM", "TN", "VEC", "UNROLL_BLOCK")


def unrolled_shape(problem: ConvProblem) -> tuple[int, int, int]:
    """The scratch matrix: per image, one row per (c, ky, kx), one column per output pixel."""
    p = problem
    return (p.B, p.C * p.K * p.K, p.N * p.N)


def shared_bytes(config: Config) -> int:
    """Dynamic shared memory of the GEMM: two stages of both tiles."""
    bm, bn, bk = int(config["BM"]), int(config["BN"]), int(config["BK"])
    return 2 * bk * (bm + A_PAD + bn) * 4


class Im2colGemm(Family):
    name = "im2col_gemm"
    description = (
        "unroll kernel building the C*K*K x N*N matrix of every image (scratch, the replication "
        "factor's memory), then a BM x BN block-tiled, TM x TN register-tiled, double-buffered "
        "SGEMM of the filters times it; both kernels timed"
    )
    paper = "003 (ECE408 lecture), input unrolling + tiled matrix multiplication"
    default_shape_set = "general"

    def check_limits(self, problem: ConvProblem) -> None:
        p = problem
        rows, cols = p.C * p.K * p.K, p.N * p.N
        per_image = {
            "input image": p.C * p.input_size**2,
            "unrolled matrix of an image": rows * cols,
            "output of an image": p.F * cols,
            "filters": p.F * rows,
        }
        for what, count in per_image.items():
            if count > MAX_ELEMENTS:
                raise UnsupportedProblem(
                    f"{self.name} indexes within an image with 32-bit integers; the {what} has "
                    f"{count} elements"
                )

    def plan(self, problem: ConvProblem, config: Config) -> KernelPlan:
        p = problem
        values = {name: int(config[name]) for name in TUNABLES}
        defines = (
            *problem_defines(p),
            *values.items(),
        )
        _, rows, cols = unrolled_shape(p)
        unroll_block = values["UNROLL_BLOCK"]
        unroll = Launch(
            "im2col_unroll",
            grid=(cdiv(cols, unroll_block), min(rows, MAX_GRID_Y), p.B),
            block=(unroll_block, 1, 1),
            args=("x", "x_unroll"),
        )
        gemm = Launch(
            "im2col_gemm",
            grid=(cdiv(cols, values["BN"]), cdiv(p.F, values["BM"]), p.B),
            block=(tiled_threads(config), 1, 1),
            args=("w", "x_unroll", "y"),
            smem_bytes=shared_bytes(config),
        )
        return KernelPlan(
            self.source_path,
            defines,
            (unroll, gemm),
            scratch=(("x_unroll", unrolled_shape(p)),),
        )
