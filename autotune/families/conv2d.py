"""What every 2D-convolution family shares: its buffers and its float64 references."""

from __future__ import annotations

import numpy as np

from autotune.families.files import REFERENCE_DIR
from autotune.families.plan import Buffers, KernelPlan, Launch, cdiv
from autotune.model.problem import ConvProblem

REFERENCE_SOURCE = REFERENCE_DIR / "reference_conv2d.cu"
REFERENCE_BLOCK = 256


# How the reference reads the stored inputs (STORAGE define of reference_conv2d.cu).
STORAGE_CODES = {"float32": 0, "float16": 1, "bfloat16": 2}


def storage_define(problem: ConvProblem) -> tuple[str, int]:
    """-D STORAGE: how a kernel (and the reference) reads the stored tensors."""
    return ("STORAGE", STORAGE_CODES[problem.precision.storage])


def buffers(problem: ConvProblem) -> Buffers:
    """Input, filters and output in the problem's layout and storage type."""
    return Buffers(
        inputs=(("x", problem.input_shape), ("w", problem.filter_shape)),
        outputs=(("y", problem.output_shape),),
        dtype=problem.dtype,
    )


def problem_defines(problem: ConvProblem) -> tuple[tuple[str, int], ...]:
    """The problem as the conv2d kernels read it: -D defines B, C, N, K, F, STRIDE."""
    p = problem
    return (("B", p.B), ("C", p.C), ("N", p.N), ("K", p.K), ("F", p.F), ("STRIDE", p.stride))


def reference_plan(problem: ConvProblem) -> KernelPlan:
    """Float64 direct convolution on the GPU over the stored inputs (any storage type and
    layout), writing 'y_ref' (double, in the output's layout); one thread per output."""
    outputs = problem.B * problem.F * problem.N * problem.N
    launch = Launch(
        "reference_conv2d",
        grid=(cdiv(outputs, REFERENCE_BLOCK), 1, 1),
        block=(REFERENCE_BLOCK, 1, 1),
        args=("x", "w", "y_ref"),
    )
    storage = (storage_define(problem), ("NHWC", int(problem.nhwc)))
    return KernelPlan(REFERENCE_SOURCE, (*problem_defines(problem), *storage), (launch,))


def reference_numpy(problem: ConvProblem, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Float64 reference on the CPU, for small problems and for checking the GPU reference;
    x and w as stored (float values, in the problem's layout), the output in that layout too."""
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    if problem.nhwc:  # compute in NCHW, hand back NHWF
        nchw = ConvProblem(problem.N, problem.K, problem.C, problem.F, problem.B, problem.stride)
        y = reference_numpy(nchw, x64.transpose(0, 3, 1, 2), w64.transpose(0, 3, 1, 2))
        return y.transpose(0, 2, 3, 1)
    windows = np.lib.stride_tricks.sliding_window_view(x64, (problem.K, problem.K), axis=(2, 3))
    s = problem.stride
    windows = windows[:, :, ::s, ::s][:, :, : problem.N, : problem.N]  # B, C, N, N, K, K
    return np.einsum("bcyxij,fcij->bfyx", windows, w64, optimize=True)
