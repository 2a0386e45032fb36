"""What every 2D-convolution family shares: its buffers and its float64 references."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from autotune.families.files import REFERENCE_DIR
from autotune.families.plan import Buffers, KernelPlan, Launch, cdiv
from autotune.model.problem import ConvProblem

REFERENCE_SOURCE = REFERENCE_DIR / "reference_conv2d.cu"
# The reference of a problem with a fused epilogue: the convolution above, then the epilogue (a
# file of its own, so that the plain reference's text, part of every family's digest, stays).
EPILOGUE_REFERENCE_SOURCE = REFERENCE_DIR / "reference_conv2d_epilogue.cu"
# A padded input's reference (padding > 0), with or without an epilogue.
PADDED_REFERENCE_SOURCE = REFERENCE_DIR / "reference_conv2d_padded.cu"
REFERENCE_BLOCK = 256


# How the reference reads the stored inputs (STORAGE define of reference_conv2d.cu).
STORAGE_CODES = {"float32": 0, "float16": 1, "bfloat16": 2}


def storage_define(problem: ConvProblem) -> tuple[str, int]:
    """-D STORAGE: how a kernel (and the reference) reads the stored tensors."""
    return ("STORAGE", STORAGE_CODES[problem.precision.storage])


def buffers(problem: ConvProblem) -> Buffers:
    """Input, filters and output in the problem's layout and storage type, and the inputs of its
    epilogue if it has one (scale and bias of F values, a residual of the output's shape)."""
    return Buffers(
        inputs=(
            ("x", problem.input_shape),
            ("w", problem.filter_shape),
            *epilogue_buffers(problem),
        ),
        outputs=(("y", problem.output_shape),),
        dtype=problem.dtype,
    )


def epilogue_buffers(problem: ConvProblem) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """The extra inputs of the problem's epilogue, in the order the kernels take them."""
    fused = problem.fused
    shapes = {"scale": (problem.F,), "bias": (problem.F,), "residual": problem.output_shape}
    return tuple((name, shapes[name]) for name in fused.inputs) if fused else ()


def epilogue_defines(problem: ConvProblem) -> tuple[tuple[str, int], ...]:
    """-D defines compiling the problem's epilogue in (none without one: the plain kernel)."""
    fused = problem.fused
    return fused.defines() if fused else ()


def problem_defines(problem: ConvProblem) -> tuple[tuple[str, int], ...]:
    """The problem as the conv2d kernels read it: -D defines B, C, N, K, F, STRIDE, PAD where
    the input has padding and TAIL where its padded rows run past the last window (so that a
    pre-padded problem's plan is what it always was)."""
    p = problem
    sizes = (("B", p.B), ("C", p.C), ("N", p.N), ("K", p.K), ("F", p.F), ("STRIDE", p.stride))
    extents = (("PAD", p.padding), ("TAIL", p.tail))
    return (*sizes, *((name, value) for name, value in extents if value))


def reference_plan(problem: ConvProblem) -> KernelPlan:
    """Float64 direct convolution on the GPU over the stored inputs (any storage type and
    layout), writing 'y_ref' (double, in the output's layout), then its epilogue if it has one;
    one thread per output."""
    outputs = problem.B * problem.F * problem.N * problem.N
    launch = Launch(
        "reference_conv2d" if problem.pre_padded else "reference_conv2d_padded",
        grid=(cdiv(outputs, REFERENCE_BLOCK), 1, 1),
        block=(REFERENCE_BLOCK, 1, 1),
        args=("x", "w", "y_ref"),
    )
    storage = (storage_define(problem), ("NHWC", int(problem.nhwc)))
    fused = problem.fused
    if fused is None:
        source = REFERENCE_SOURCE if problem.pre_padded else PADDED_REFERENCE_SOURCE
        return KernelPlan(source, (*problem_defines(problem), *storage), (launch,))
    epilogue = Launch(
        "reference_epilogue",
        grid=launch.grid,
        block=launch.block,
        args=("y_ref", *fused.inputs),
    )
    defines = (*problem_defines(problem), *storage, *fused.defines())
    if not problem.pre_padded:
        defines = (*defines, ("EPILOGUE_REF", 1))
        return KernelPlan(PADDED_REFERENCE_SOURCE, defines, (launch, epilogue))
    return KernelPlan(EPILOGUE_REFERENCE_SOURCE, defines, (launch, epilogue))


def reference_numpy(problem: ConvProblem, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Float64 reference on the CPU, for small problems and for checking the GPU reference;
    x and w as stored (float values, in the problem's layout), the output in that layout too."""
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    if problem.nhwc:  # compute in NCHW, hand back NHWF
        nchw = ConvProblem(problem.N, problem.K, problem.C, problem.F, problem.B, problem.stride)
        nchw = replace(nchw, padding=problem.padding, tail=problem.tail)
        y = reference_numpy(nchw, x64.transpose(0, 3, 1, 2), w64.transpose(0, 3, 1, 2))
        return y.transpose(0, 2, 3, 1)
    p = problem.padding
    x64 = np.pad(x64, ((0, 0), (0, 0), (p, p), (p, p))) if p else x64
    windows = np.lib.stride_tricks.sliding_window_view(x64, (problem.K, problem.K), axis=(2, 3))
    s = problem.stride
    windows = windows[:, :, ::s, ::s][:, :, : problem.N, : problem.N]  # B, C, N, N, K, K
    return np.einsum("bcyxij,fcij->bfyx", windows, w64, optimize=True)


def epilogue_numpy(
    problem: ConvProblem, y: np.ndarray, inputs: dict[str, np.ndarray]
) -> np.ndarray:
    """The problem's epilogue in float64 on the CPU over a convolution's output `y` (in the
    problem's layout) and its inputs as stored (scale, bias, residual by name): what the GPU
    reference applies, written independently of it, to check it."""
    fused = problem.fused
    if fused is None:
        return y
    channel = (1, 1, 1, -1) if problem.nhwc else (1, -1, 1, 1)
    v = y.astype(np.float64)
    if fused.scale:
        v = v * inputs["scale"].astype(np.float64).reshape(channel)
    if fused.bias:
        v = v + inputs["bias"].astype(np.float64).reshape(channel)
    if fused.residual:
        v = v + inputs["residual"].astype(np.float64)
    if fused.activation == "relu":
        v = np.where(v < 0.0, 0.0, v)
    elif fused.activation == "silu":
        v = v / (1.0 + np.exp(-v))
    elif fused.activation == "gelu":
        v = 0.5 * v * (1.0 + np.vectorize(math.erf)(v / math.sqrt(2.0)))
    return v
