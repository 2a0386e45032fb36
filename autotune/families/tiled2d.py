"""tiled2d: Kernel Tuner's 2D convolution example space, one .cu tunable by both tuners."""

from __future__ import annotations

from autotune.families.base import Family, KernelPlan, Launch, UnsupportedProblem, cdiv
from autotune.families.conv2d import problem_defines
from autotune.model.problem import ConvProblem
from autotune.model.space import Config

CONST_BANK_BYTES = 64 * 1024
# The tunables, spelled as in the .cu and the .toml; Kernel Tuner gets the same names.
TUNABLES = (
    "BLOCK_SIZE_X",
    "BLOCK_SIZE_Y",
    "TILE_SIZE_X",
    "TILE_SIZE_Y",
    "USE_PADDING",
    "READ_ONLY",
)
ENTRY = "tiled2d"
FILTER_SYMBOL = "c_filter"


def shared_bytes(problem: ConvProblem, config: Config) -> int:
    """Static shared memory of one block: the input tile with its halo, rows padded (if asked)
    up to the next stride congruent to BLOCK_SIZE_X modulo 32."""
    bx, tx = int(config["BLOCK_SIZE_X"]), int(config["TILE_SIZE_X"])
    by, ty = int(config["BLOCK_SIZE_Y"]), int(config["TILE_SIZE_Y"])
    width = bx * tx + problem.K - 1
    if int(config["USE_PADDING"]):
        width += (bx - width) % 32
    return (by * ty + problem.K - 1) * width * 4


class Tiled2d(Family):
    name = "tiled2d"
    description = (
        "Kernel Tuner's example (benchmarked at C = F = B = 1): a BLOCK_SIZE_X x BLOCK_SIZE_Y "
        "block computes TILE_SIZE_X x TILE_SIZE_Y "
        "outputs per thread from an input tile in shared memory (optional bank padding, optional "
        "read-only loads), filters in constant memory; images x filters over the grid's z, "
        "channels summed tile by tile"
    )
    paper = "Kernel Tuner's convolution example (issue 6 throughput benchmark)"
    default_shape_set = "tiled2d"

    def check_limits(self, problem: ConvProblem) -> None:
        if problem.stride != 1:
            raise UnsupportedProblem(f"{self.name} computes stride 1, not {problem.stride}")
        words = problem.F * problem.C * problem.K * problem.K
        if words * 4 > CONST_BANK_BYTES:
            raise UnsupportedProblem(
                f"{self.name} keeps all F*C*K*K filter words in the 64 KB constant bank; "
                f"F={problem.F}, C={problem.C}, K={problem.K} need {words * 4} bytes"
            )
        if problem.B * problem.F > 65535:
            raise UnsupportedProblem(f"{self.name} launches B*F={problem.B * problem.F} > 65535 z")

    def plan(self, problem: ConvProblem, config: Config) -> KernelPlan:
        p = problem
        bx, by = int(config["BLOCK_SIZE_X"]), int(config["BLOCK_SIZE_Y"])
        tx, ty = int(config["TILE_SIZE_X"]), int(config["TILE_SIZE_Y"])
        defines = (
            *problem_defines(p),
            *((name, int(config[name])) for name in TUNABLES),
        )
        launch = Launch(
            ENTRY,
            grid=(cdiv(p.N, bx * tx), cdiv(p.N, by * ty), p.B * p.F),
            block=(bx, by, 1),
            args=("x", "y"),
        )
        return KernelPlan(self.source_path, defines, (launch,), constants=((FILTER_SYMBOL, "w"),))
