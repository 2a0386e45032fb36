"""tc_implicit_gemm: convolution as one implicit GEMM on the tensor cores (mma.sync), NHWC."""

from __future__ import annotations

from autotune.families.base import Family, KernelPlan, Launch, cdiv
from autotune.families.conv2d import problem_defines, storage_define
from autotune.families.plan import split_k_plan
from autotune.model.precision import TENSOR_CORE_DTYPES
from autotune.model.problem import ConvProblem
from autotune.model.space import Config

TUNABLES = (
    "BM", "BN", "BK", "WM", "WN", "STAGES", "SWIZZLE", "SPLIT_K", "GATHER", "MIN_BLOCKS",
    "FRAG_DB", "RASTER", "TF32_ROUND",
)  # fmt: skip
WARP = 32


def threads(config: Config) -> int:
    warps = (int(config["BM"]) // int(config["WM"])) * (int(config["BN"]) // int(config["WN"]))
    return warps * WARP


def shared_bytes(config: Config, element_bytes: int) -> int:
    """Dynamic shared memory: STAGES x (BM + BN) tile rows of BK elements, padded by one 16-byte
    chunk without the swizzle."""
    row = int(config["BK"]) * element_bytes + (0 if int(config["SWIZZLE"]) else 16)
    return int(config["STAGES"]) * (int(config["BM"]) + int(config["BN"])) * row


class TcImplicitGemm(Family):
    name = "tc_implicit_gemm"
    description = (
        "implicit GEMM on the tensor cores: M = B*N*N output pixels x F filters x K*K*C, both "
        "operands contiguous along the reduction in NHWC / FKKC; warp-level mma.sync (m16n8k8 "
        "TF32 after cvt.rna, m16n8k16 BF16 and FP16) with FP32 accumulation and the output "
        "rounded to the storage type; BM x BN x BK block tile, WM x WN warp tile, ldmatrix "
        "fragments (optionally double-buffered), a STAGES-deep cp.async pipeline into XOR-"
        "swizzled or padded shared tiles, 16-byte copies or an element-wise gather for channels "
        "that are not whole 16-byte chunks, SPLIT_K partial sums reduced by a second kernel, "
        "pixel-major or filter-major block order"
    )
    paper = "implicit GEMM (Chetlur et al., cuDNN 2014) on Ampere-style mma.sync tensor cores"
    layout = "NHWC input (B, S, S, C), FKKC filters (F, K, K, C), NHWC output (B, N, N, F)"
    precision = "tf32, bf16, fp16 (FP32 accumulation)"
    dtypes = TENSOR_CORE_DTYPES
    layouts = ("NHWC",)
    default_shape_set = "alexnet"
    int32_offsets = True

    def plan(self, problem: ConvProblem, config: Config) -> KernelPlan:
        p = problem
        values = {name: int(config[name]) for name in TUNABLES}
        defines = (*problem_defines(p), storage_define(p), *values.items())
        pixels = p.B * p.N * p.N
        tiles_m, tiles_n = cdiv(pixels, values["BM"]), cdiv(p.F, values["BN"])
        split = values["SPLIT_K"]
        if values["RASTER"]:
            grid = (tiles_m * tiles_n, 1, split)
        else:
            grid = (tiles_m, tiles_n, split)
        gemm = Launch(
            "tc_implicit_gemm",
            grid=grid,
            block=(threads(config), 1, 1),
            args=("x", "w", "y" if split == 1 else "y_split"),
            smem_bytes=shared_bytes(config, p.precision.bytes),
        )
        # Split-K: FP32 partial sums, added up and rounded into y by tc_reduce (both timed).
        return split_k_plan(self.source_path, defines, gemm, split, "tc_reduce", (pixels, p.F))
