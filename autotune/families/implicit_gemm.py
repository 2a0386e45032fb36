"""implicit_gemm: convolution as one register-tiled SGEMM gathering the unrolled input."""

from __future__ import annotations

from types import MappingProxyType

from autotune.families.base import Family, KernelPlan, Launch, cdiv
from autotune.families.conv2d import problem_defines
from autotune.families.plan import split_k_plan, tiled_threads
from autotune.model.problem import ConvProblem
from autotune.model.space import Config

# The filter tile in shared memory is padded by this many floats per row (see the kernel).
A_PAD = 4
WARP = 32  # threads a warp: the kernel's gathered-tile padding assumes 32 banks
TUNABLES = (
    "BM", "BN", "BK", "TM", "TN", "VEC", "DOUBLE_BUFFER", "SPLIT_K", "OFFSET_TABLE", "GATHER_ROWS",
)  # fmt: skip


def gather_pad(gather_rows: int) -> int:
    """Floats the gathered tile's rows are padded by (B_PAD in the kernel): a warp storing G rows
    x 32 / G columns hits 32 different banks at a pitch of BN + 32 / G; one row needs none."""
    return WARP // gather_rows if gather_rows > 1 else 0


def shared_bytes(config: Config) -> int:
    """Dynamic shared memory: transposed filter tile and gathered input tile, per stage."""
    bm, bn, bk = int(config["BM"]), int(config["BN"]), int(config["BK"])
    stages = 2 if int(config["DOUBLE_BUFFER"]) else 1
    pad = gather_pad(int(config["GATHER_ROWS"]))
    return stages * bk * (bm + A_PAD + bn + pad) * 4


class ImplicitGemm(Family):
    name = "implicit_gemm"
    description = (
        "one GEMM, F x (B*N*N) = filters x conceptual unrolled input, gathered from NCHW while "
        "loading BK-deep shared tiles; BM x BN block tile, TM x TN register tile per thread, "
        "float4 fragments, optional double buffering, optional split-K with a reduction kernel, "
        "gather row offsets computed or read from a compile-time __constant__ table; for strided "
        "convolutions a warp may gather GATHER_ROWS neighbouring filter taps x 32 / GATHER_ROWS "
        "pixels (one contiguous span at GATHER_ROWS = stride) into a padded shared tile"
    )
    paper = "003 (ECE408 lecture), GEMM with built-in unrolling, joint register-shared tiling"
    default_shape_set = "general"
    # Configs stored before the table existed computed their row offsets in the kernel; those
    # stored before the row-interleaved gather gathered one row a warp.
    later_tunables = MappingProxyType({"OFFSET_TABLE": 0, "GATHER_ROWS": 1})
    int32_offsets = True

    def plan(self, problem: ConvProblem, config: Config) -> KernelPlan:
        p = problem
        config = self.complete(config)
        values = {name: int(config[name]) for name in TUNABLES}
        defines = (
            *problem_defines(p),
            *values.items(),
        )
        columns = p.B * p.N * p.N
        split = values["SPLIT_K"]
        gemm = Launch(
            "implicit_gemm",
            grid=(cdiv(columns, values["BN"]), cdiv(p.F, values["BM"]), split),
            block=(tiled_threads(config), 1, 1),
            args=("x", "w", "y" if split == 1 else "y_split"),
            smem_bytes=shared_bytes(config),
        )
        # Split-K: partial sums in a scratch buffer, added up into y by a second timed kernel.
        return split_k_plan(
            self.source_path, defines, gemm, split, "implicit_gemm_reduce", (p.F, columns)
        )
