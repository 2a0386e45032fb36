"""tc_wgmma: NHWC implicit-GEMM convolution on Hopper's warpgroup tensor cores (sm_90a)."""

from __future__ import annotations

from autotune.families.base import Family, KernelPlan, Launch, cdiv
from autotune.families.conv2d import problem_defines, storage_define
from autotune.families.plan import split_k_plan
from autotune.model.problem import ConvProblem
from autotune.model.space import Config

# The kernel indexes input, filters and output with 32-bit integers.
ROW_BYTES = 128  # a step of the reduction: one 128-byte swizzle row of K
SWIZZLE_ALIGN = 1024  # the 128-byte swizzle repeats every 8 rows; the slots start aligned to it
WARPGROUP = 128
TUNABLES = (
    "BM", "BN", "WG", "STAGES", "SPLIT_K", "PRODUCER", "C_OUTER", "L1_CACHE", "TILES_PER_BLOCK",
)  # fmt: skip


def reduction_step(problem: ConvProblem) -> int:
    """Reduction elements a step (BK): 64 16-bit or 32 FP32 values."""
    return ROW_BYTES // problem.precision.bytes


def threads(config: Config) -> int:
    return WARPGROUP * (int(config["WG"]) + int(config["PRODUCER"]))


def shared_bytes(config: Config) -> int:
    """Dynamic shared memory: the slots, the alignment slack, the producer's mbarriers."""
    stages = int(config["STAGES"])
    slots = stages * (int(config["BM"]) + int(config["BN"])) * ROW_BYTES
    return slots + SWIZZLE_ALIGN + 16 * stages * int(config["PRODUCER"])


class TcWgmma(Family):
    name = "tc_wgmma"
    description = (
        "implicit GEMM, (B*N*N pixels) x F = gathered NHWC input rows x FKKC filters, on wgmma "
        "(m64nBNk16 BF16/FP16, m64nBNk8 TF32 on the FP32 bits) with both operands in "
        "128-byte-swizzled shared memory (matrix descriptors) and FP32 accumulators; a "
        "multi-stage cp.async pipeline (16-byte chunks where C fills whole ones, an element "
        "gather otherwise), one or two consumer warpgroups, an optional producer warpgroup on "
        "mbarriers, optional split-K; output in the storage type (BF16/FP16 rounded, FP32)"
    )
    paper = "issue 20 (tensor cores), Hopper's wgmma path"
    layout = "NHWC input, FKKC filters, NHWF output"
    precision = "fp32 storage with TF32 products, or bf16/fp16 storage; FP32 accumulation"
    dtypes = ("tf32", "bf16", "fp16")
    layouts = ("NHWC",)
    default_shape_set = "alexnet"

    def check(self, problem: ConvProblem) -> None:
        super().check(problem)
        self.check_int32_offsets(problem)

    def plan(self, problem: ConvProblem, config: Config) -> KernelPlan:
        p = problem
        values = {name: int(config[name]) for name in TUNABLES}
        defines = (*problem_defines(p), storage_define(p), *values.items())
        pixels = p.B * p.N * p.N
        split = values["SPLIT_K"]
        tiles = cdiv(p.F, values["BN"]) * cdiv(pixels, values["BM"])
        gemm = Launch(
            "tc_wgmma",
            grid=(cdiv(tiles, values["TILES_PER_BLOCK"]), 1, split),
            block=(threads(config), 1, 1),
            args=("x", "w", "y" if split == 1 else "y_split"),
            smem_bytes=shared_bytes(config),
        )
        # Split-K: FP32 partial sums, added up and stored into y by tc_wgmma_reduce.
        return split_k_plan(
            self.source_path,
            defines,
            gemm,
            split,
            "tc_wgmma_reduce",
            (pixels, p.F),
            arch_specific=True,
        )
