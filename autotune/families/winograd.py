"""winograd: F(m x m, 3 x 3) minimal filtering, m = 2, 4, 5, 6: transforms around a batched GEMM."""

from __future__ import annotations

from dataclasses import dataclass

from autotune.families.base import Family, KernelPlan, Launch, UnsupportedProblem, cdiv
from autotune.families.conv2d import problem_defines
from autotune.families.plan import tiled_threads
from autotune.model.problem import ConvProblem
from autotune.model.space import Config

TUNABLES = (
    "OUT_TILE",
    "BM",
    "BN",
    "BK",
    "TM",
    "TN",
    "DOUBLE_BUFFER",
    "VEC",
    "MIN_BLOCKS",
    "IN_BLOCK",
    "OUT_BLOCK",
    "OUT_STAGE",
)
FILTER_BLOCK = 256  # the filter transform is a few percent of the run: not tuned
MAX_GRID_Y = 65535
INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class Layout:
    """The padded extents of the transformed tensors for output tile m and the GEMM's tiles."""

    m: int
    tiles: int  # P: tiles of the whole batch (the GEMM's N)
    channels: int  # CP: channels padded to whole BK steps
    filters: int  # FP: filters padded to whole BM tiles
    columns: int  # PP: tiles padded to whole BN tiles

    @property
    def alpha(self) -> int:
        return self.m + 2

    @classmethod
    def of(cls, problem: ConvProblem, m: int, bm: int, bn: int, bk: int) -> Layout:
        side = cdiv(problem.N, m)
        tiles = problem.B * side * side
        return cls(m, tiles, cdiv(problem.C, bk) * bk, cdiv(problem.F, bm) * bm,
                   cdiv(tiles, bn) * bn)  # fmt: skip


def transform_flops(problem: ConvProblem, m: int) -> int:
    """The multiply-adds the algorithm does in its GEMM (2 FLOPs each), without padding: alpha^2
    products per tile, channel and filter; the direct count does 9 m^2 per tile instead."""
    tiles = problem.B * cdiv(problem.N, m) ** 2
    return 2 * (m + 2) ** 2 * tiles * problem.C * problem.F


class Winograd(Family):
    name = "winograd"
    description = (
        "Winograd F(m x m, 3 x 3), m = OUT_TILE in {2, 4, 5, 6} (Lavin and Gray 2016): filter, "
        "input and output transform kernels around one launch of alpha^2 batched SGEMMs (BM x BN "
        "block tile, TM x TN register block, BK channels per step, maxdnn's loop); all four "
        "kernels timed, the filter transform included (cuDNN's time includes its own)"
    )
    paper = "Lavin and Gray, Fast Algorithms for Convolutional Neural Networks (CVPR 2016)"
    default_shape_set = "vgg16"

    def check_limits(self, problem: ConvProblem) -> None:
        p = problem
        if p.K != 3 or p.stride != 1:
            raise UnsupportedProblem(
                f"{self.name} computes 3 x 3 filters at stride 1, not K={p.K}, stride={p.stride}"
            )
        if p.F > MAX_GRID_Y:
            raise UnsupportedProblem(f"{self.name} launches one block row per filter; F={p.F}")
        if p.B * p.C * p.input_size**2 > INT32_MAX * 8:
            raise UnsupportedProblem(f"{self.name}: the input has over 2^34 elements")

    def arithmetic_flops(self, problem: ConvProblem, config: Config) -> int:
        return transform_flops(problem, int(config["OUT_TILE"]))

    def plan(self, problem: ConvProblem, config: Config) -> KernelPlan:
        v = {name: int(config[name]) for name in TUNABLES}
        p = problem
        lay = Layout.of(p, v["OUT_TILE"], v["BM"], v["BN"], v["BK"])
        a2 = lay.alpha**2
        defines = (*problem_defines(p), *v.items())
        threads = tiled_threads(v)
        launches = (
            Launch(
                "wino_filter",
                grid=(cdiv(lay.channels * lay.filters, FILTER_BLOCK), 1, 1),
                block=(FILTER_BLOCK, 1, 1),
                args=("w", "u"),
            ),
            Launch(
                "wino_input",
                grid=(cdiv(lay.columns, v["IN_BLOCK"]), lay.channels, 1),
                block=(v["IN_BLOCK"], 1, 1),
                args=("x", "v"),
            ),
            Launch(
                "wino_gemm",
                grid=(lay.columns // v["BN"], lay.filters // v["BM"], a2),
                block=(threads, 1, 1),
                args=("u", "v", "m"),
                smem_bytes=shared_bytes(config),
            ),
            Launch(
                "wino_output",
                grid=(cdiv(lay.tiles, v["OUT_BLOCK"]), p.F, 1),
                block=(v["OUT_BLOCK"], 1, 1),
                args=("m", "y"),
            ),
        )
        scratch = (
            ("u", (lay.channels, a2, lay.filters)),
            ("v", (lay.channels, a2, lay.columns)),
            ("m", (lay.filters, a2, lay.columns)),
        )
        return KernelPlan(self.source_path, defines, launches, scratch=scratch)


def shared_bytes(config: Config) -> int:
    """Dynamic shared memory of the GEMM: one or two stages of BK filter and tile rows."""
    stages = 2 if int(config["DOUBLE_BUFFER"]) else 1
    return stages * int(config["BK"]) * (int(config["BM"]) + int(config["BN"])) * 4
