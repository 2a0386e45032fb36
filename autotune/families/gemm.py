"""What every GEMM family shares: its buffers and its float64 references."""

from __future__ import annotations

import numpy as np

from autotune.families.files import REFERENCE_DIR
from autotune.families.plan import Buffers, KernelPlan, Launch, cdiv
from autotune.model.problem import GemmProblem

REFERENCE_SOURCE = REFERENCE_DIR / "reference_gemm.cu"
REFERENCE_TILE = 16  # as T in reference/reference_gemm.cu


def buffers(problem: GemmProblem) -> Buffers:
    """Row-major FP32 A (M x K) and B (K x N) in, C (M x N) out, named a, b and c."""
    return Buffers(
        inputs=(("a", problem.a_shape), ("b", problem.b_shape)),
        outputs=(("c", problem.c_shape),),
    )


def defines(problem: GemmProblem) -> tuple[tuple[str, int], ...]:
    return (("M", problem.M), ("N", problem.N), ("K", problem.K))


def reference_plan(problem: GemmProblem) -> KernelPlan:
    """Float64 tiled GEMM on the GPU, writing 'c_ref' (double)."""
    launch = Launch(
        "reference_gemm",
        grid=(cdiv(problem.N, REFERENCE_TILE), cdiv(problem.M, REFERENCE_TILE), 1),
        block=(REFERENCE_TILE, REFERENCE_TILE, 1),
        args=("a", "b", "c_ref"),
    )
    return KernelPlan(REFERENCE_SOURCE, defines(problem), (launch,))


def reference_numpy(problem: GemmProblem, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Float64 reference on the CPU, for small problems and for checking the GPU reference."""
    return a.astype(np.float64) @ b.astype(np.float64)
