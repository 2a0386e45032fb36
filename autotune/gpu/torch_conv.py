"""PyTorch tensors over the session's CuPy buffers, in the problem's dtype and layout, for cuDNN.

No copies: DLPack views of the stored buffers (BF16 bits as int16, viewed as bfloat16); an NHWC
buffer (B, S, S, C) is the channels-last view (B, C, S, S) of itself, its filters (F, K, K, C)
likewise, and cuDNN writes a channels-last output, whose (B, N, N, F) view is the NHWF buffer.
Also the probe that measured the tolerances (results/h100/precision): cuDNN's error in a dtype,
and the error of its output with one term of every output's sum taken away.
"""

from __future__ import annotations

from dataclasses import dataclass

from autotune.gpu.session import Check, GpuSession
from autotune.model.problem import ConvProblem
from autotune.model.records import Measurement, Status

TORCH_DTYPES = {"fp32": "float32", "tf32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def cudnn_settings(torch, dtype: str) -> None:
    """cuDNN's own algorithm search; TF32 products only for a tf32 problem."""
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = dtype == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = False


def as_tensor(torch, array, dtype: str):
    """A CuPy buffer of a dtype's storage type as a PyTorch tensor of that dtype (no copy)."""
    if dtype == "bf16":  # uint16 bits: through DLPack as int16, then reinterpreted
        import cupy as cp

        return torch.from_dlpack(array.view(cp.int16)).view(torch.bfloat16)
    return torch.from_dlpack(array)


def as_array(torch, tensor, dtype: str):
    """A PyTorch tensor of a dtype as a CuPy array of its storage type (no copy)."""
    import cupy as cp

    if dtype == "bf16":
        return cp.from_dlpack(tensor.view(torch.int16)).view(cp.uint16)
    return cp.from_dlpack(tensor)


def operands(torch, problem: ConvProblem, arrays: dict) -> tuple[object, object]:
    """x (B, C, S, S) and w (F, C, K, K) as conv2d takes them: the buffers themselves for NCHW,
    their channels-last views for NHWC."""
    x = as_tensor(torch, arrays["x"], problem.dtype)
    w = as_tensor(torch, arrays["w"], problem.dtype)
    if problem.nhwc:
        x, w = x.permute(0, 3, 1, 2), w.permute(0, 3, 1, 2)
    return x, w


def output_array(torch, problem: ConvProblem, y) -> tuple[object, bool]:
    """conv2d's output (B, F, N, N) as the problem's output buffer, and whether that needed a
    copy: never for NCHW; for NHWC only when cuDNN wrote NCHW (it may, when channels-last and
    NCHW strides of an input coincide, as with C = 1)."""
    if not problem.nhwc:
        return as_array(torch, y, problem.dtype), False
    copied = not y.is_contiguous(memory_format=torch.channels_last)
    if copied:
        y = y.contiguous(memory_format=torch.channels_last)
    return as_array(torch, y.permute(0, 2, 3, 1), problem.dtype), copied


def drop_one_term(torch, problem: ConvProblem, x, w, y):
    """y less the product x[b, C-1, oy*s+K-1, ox*s+K-1] * w[f, C-1, K-1, K-1] of every output
    (x with its padding): what a kernel that misses one term of each sum would write (in y's
    dtype and layout)."""
    n, k, s, c = problem.N, problem.K, problem.stride, problem.C - 1
    if problem.padding:
        x = torch.nn.functional.pad(x, (problem.padding,) * 4)
    xs = x[:, c, k - 1 :: s, k - 1 :: s][:, :n, :n].float()  # B, N, N
    ws = w[:, c, k - 1, k - 1].float()  # F
    dropped = y.float() - xs[:, None, :, :] * ws[None, :, None, None]
    out = torch.empty_like(y)  # same memory format as y
    out.copy_(dropped)
    return out


@dataclass(frozen=True, slots=True)
class PrecisionProbe:
    """Relative L2 errors against the float64 reference over the stored inputs."""

    cudnn: float  # cuDNN's output in the problem's dtype and layout
    dropped: float  # the same output less one term of every sum
    note: str  # "NCHW output copied" where cuDNN wrote NCHW for an NHWC problem


@dataclass(frozen=True, slots=True)
class CudnnPrecision:
    """Runs cuDNN once on a problem (settings as the baseline's) and measures the errors of its
    output and of that output less one term per sum; untimed."""

    problem: ConvProblem
    check: Check

    def run(self, session: GpuSession) -> PrecisionProbe | Measurement:
        try:
            import torch
        except ImportError:
            return Measurement(Status.LAUNCH_ERROR, error="PyTorch is not importable: no cuDNN")
        cudnn_settings(torch, self.problem.dtype)
        found: list[PrecisionProbe] = []

        def measure() -> Measurement:
            arrays = session.fresh_inputs(self.check.buffers, self.check.seed)
            x, w = operands(torch, self.problem, arrays)
            p = self.problem
            y = torch.nn.functional.conv2d(x, w, stride=p.stride, padding=p.padding)
            arrays["y"], copied = output_array(torch, self.problem, y)
            session.sync()
            cudnn = session.check_outputs(self.check, arrays)
            less = drop_one_term(torch, self.problem, x, w, y)
            arrays["y"], _ = output_array(torch, self.problem, less)
            session.sync()
            dropped = session.check_outputs(self.check, arrays)
            note = "NCHW output copied" if copied else ""
            found.append(PrecisionProbe(cudnn, dropped, note))
            return Measurement(Status.OK)

        try:
            m = session.guarded(measure)
        finally:
            torch.cuda.empty_cache()
        return found[0] if found and m.status is Status.OK else m


__all__ = [
    "CudnnPrecision",
    "PrecisionProbe",
    "as_array",
    "as_tensor",
    "cudnn_settings",
    "drop_one_term",
    "operands",
    "output_array",
]
