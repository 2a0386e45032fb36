"""What every 2D-convolution family shares: its buffers and its float64 references."""

from __future__ import annotations

import numpy as np

from autotune import package_path
from autotune.families.plan import Buffers, KernelPlan, Launch, cdiv
from autotune.model.problem import ConvProblem

REFERENCE_SOURCE = package_path("autotune.families", "reference", "reference_conv2d.cu")
REFERENCE_BLOCK = 256


def buffers(problem: ConvProblem) -> Buffers:
    return Buffers(
        inputs=(("x", problem.input_shape), ("w", problem.filter_shape)),
        outputs=(("y", problem.output_shape),),
    )


def problem_defines(problem: ConvProblem) -> tuple[tuple[str, int], ...]:
    """The problem as the conv2d kernels read it: -D defines B, C, N, K, F, STRIDE."""
    p = problem
    return (("B", p.B), ("C", p.C), ("N", p.N), ("K", p.K), ("F", p.F), ("STRIDE", p.stride))


def reference_plan(problem: ConvProblem) -> KernelPlan:
    """Float64 direct convolution on the GPU, writing 'y_ref' (double); one thread per output."""
    outputs = problem.B * problem.F * problem.N * problem.N
    launch = Launch(
        "reference_conv2d",
        grid=(cdiv(outputs, REFERENCE_BLOCK), 1, 1),
        block=(REFERENCE_BLOCK, 1, 1),
        args=("x", "w", "y_ref"),
    )
    return KernelPlan(REFERENCE_SOURCE, problem_defines(problem), (launch,))


def reference_numpy(problem: ConvProblem, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Float64 reference on the CPU, for small problems and for checking the GPU reference."""
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    windows = np.lib.stride_tricks.sliding_window_view(x64, (problem.K, problem.K), axis=(2, 3))
    s = problem.stride
    windows = windows[:, :, ::s, ::s][:, :, : problem.N, : problem.N]  # B, C, N, N, K, K
    return np.einsum("bcyxij,fcij->bfyx", windows, w64, optimize=True)
