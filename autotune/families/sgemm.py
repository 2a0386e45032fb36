"""sgemm: tiled shared-memory SGEMM with register blocking, for fully connected layers."""

from __future__ import annotations

from autotune.families import gemm
from autotune.families.base import Buffers, Family, KernelPlan, Launch, UnsupportedProblem, cdiv
from autotune.families.plan import split_k_plan, tiled_threads
from autotune.model.problem import GemmProblem
from autotune.model.space import Config

TUNABLES = (
    "BM",
    "BN",
    "BK",
    "TM",
    "TN",
    "VEC",
    "DOUBLE_BUFFER",
    "SPLIT_K",
    "WARP_TX",
    "MIN_BLOCKS",
)


class Sgemm(Family):
    name = "sgemm"
    description = (
        "C = A @ B (row-major FP32): a BM x BN block tile walking K in BK steps through shared "
        "memory (A transposed), TM x TN register blocking per thread with float4/float2 "
        "conflict-free fragment reads, VEC-wide global loads, DOUBLE_BUFFER register-staged "
        "prefetch, SPLIT_K slices of K summed by a second kernel (small M)"
    )
    paper = "001 (course report), tiled shared-memory matrix multiplication of the FC layers"
    problem_type = GemmProblem
    layout = "row-major A (M x K), B (K x N), C (M x N)"
    reference_sources = (gemm.REFERENCE_SOURCE,)
    default_shape_set = "alexnet_fc"

    def check_limits(self, problem: GemmProblem) -> None:  # type: ignore[override]
        if problem.M * problem.K >= 2**31 or problem.K * problem.N >= 2**31:
            raise UnsupportedProblem(f"{self.name} indexes rows with 32-bit integers")

    def buffers(self, problem: GemmProblem) -> Buffers:  # type: ignore[override]
        return gemm.buffers(problem)

    def reference_plan(self, problem: GemmProblem) -> KernelPlan:  # type: ignore[override]
        return gemm.reference_plan(problem)

    def plan(self, problem: GemmProblem, config: Config) -> KernelPlan:  # type: ignore[override]
        v = {name: int(config[name]) for name in TUNABLES}
        p = problem
        threads = tiled_threads(v)
        grid = (cdiv(p.N, v["BN"]), cdiv(p.M, v["BM"]), v["SPLIT_K"])
        defines = (*gemm.defines(p), *((name, v[name]) for name in TUNABLES))
        split = v["SPLIT_K"]
        # Each K slice writes its own M x N plane of `partial`; the reduction sums them into c.
        launch = Launch(
            "sgemm", grid, (threads, 1, 1), ("a", "b", "c" if split == 1 else "partial")
        )
        return split_k_plan(
            self.source_path, defines, launch, split, "sgemm_reduce", (p.M, p.N), "partial", "c"
        )
