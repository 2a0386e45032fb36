"""The tensor side of a runtime call (imports PyTorch): storage types, memory formats, the
output in the input's format, and the call itself on PyTorch's current stream and allocator.

Shared by the runtime (dispatch.py) and the custom op's fake implementation (torch_op.py), so
that the output's shape and strides a traced graph expects are the ones a real call returns.
"""

from __future__ import annotations

import torch

from autotune.model.epilogue import EpilogueError, epilogue_name
from autotune.runtime.calls import ALIGN_BYTES, Call, CallError

STORAGES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}
FORMATS = {"NCHW": torch.contiguous_format, "NHWC": torch.channels_last}


def layout_of(x: torch.Tensor) -> str | None:
    """NCHW for a contiguous tensor, NHWC for a channels-last one, None for any other strides.
    A tensor that is both (one channel, or 1 x 1 images: the same memory) reads as NCHW."""
    if x.is_contiguous():
        return "NCHW"
    if x.is_contiguous(memory_format=torch.channels_last):
        return "NHWC"
    return None


def output_dims(x_shape, w_shape, stride: int, padding: int) -> tuple[int, int, int, int]:
    """(B, F, N, N) of a call, as PyTorch's conv2d counts N: (H + 2p - K) // s + 1."""
    b, _, h, _ = x_shape
    f, _, k, _ = w_shape
    n = (h + 2 * padding - k) // stride + 1
    return (b, f, n, n)


# The strides torch.empty gives (dims, layout), found once on the meta device: a call's output
# then comes from new_empty_strided, which cost 1.9-2.2 us of host time on the H200's host where
# torch.empty with a memory format cost 3.4-3.6 (results/h200/20261130e/call3/host_steps_*.md).
_STRIDES: dict[tuple[tuple[int, ...], str], tuple[int, ...]] = {}


def empty_like_layout(x: torch.Tensor, dims: tuple, layout: str) -> torch.Tensor:
    """An uninitialised tensor of x's dtype and device, `dims` in memory format `layout`, with
    the strides torch.empty would give it (the fake implementation's are the real call's)."""
    try:
        strides = _STRIDES.get((dims, layout))
    except TypeError:  # symbolic sizes (a graph traced with dynamic shapes) do not hash
        return torch.empty(dims, dtype=x.dtype, device=x.device, memory_format=FORMATS[layout])
    if strides is None:
        meta = torch.empty(dims, device="meta", memory_format=FORMATS[layout])
        strides = _STRIDES.setdefault((dims, layout), meta.stride())
    return x.new_empty_strided(dims, strides)


def output_layout(x: torch.Tensor) -> str:
    """The memory format a call's output has: the input's (contiguous for any other strides)."""
    return layout_of(x) or "NCHW"


def autocast_dtype(x: torch.Tensor) -> torch.dtype | None:
    """The dtype torch.autocast gives PyTorch's conv2d of x: its lower precision (bfloat16 or
    float16) while autocast is on for CUDA and x is a floating GPU tensor, else None."""
    if x.is_cuda and x.is_floating_point() and torch.is_autocast_enabled("cuda"):
        return torch.get_autocast_dtype("cuda")
    return None


def cast_to(t: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """t in `dtype` (itself where it is so already; its memory format kept), None for None."""
    return t if t is None or t.dtype is dtype else t.to(dtype)


def autocast_inputs(x, w, bias=None, residual=None) -> tuple:
    """A convolution's tensors as torch.autocast gives them to PyTorch's conv2d: each in
    autocast's lower precision where autocast_dtype(x) names one, else as they are. A residual
    is cast too: it is added in the same store (PyTorch's own add would promote instead)."""
    dtype = autocast_dtype(x)
    if dtype is None:
        return x, w, bias, residual
    return cast_to(x, dtype), cast_to(w, dtype), cast_to(bias, dtype), cast_to(residual, dtype)


def call(
    rt,
    x: torch.Tensor,
    w: torch.Tensor,
    stride: int,
    padding: int,
    on_miss: str,
    bias: torch.Tensor | None = None,
    residual: torch.Tensor | None = None,
    activation: str = "",
):
    """A tensor call of runtime `rt`: FP32 (TF32 products where torch.backends.cudnn.allow_tf32
    allows them, as PyTorch's own convolutions), BF16 or FP16; contiguous or channels-last
    (other strides are made contiguous). Then, in order: `bias` ((F,), x's dtype) added,
    `residual` (the output's shape and dtype) added, `activation` ("relu", "silu", "gelu")
    applied; in the plan's store where its family fuses that epilogue (model/epilogue.py; a
    bias is needed for any), else by PyTorch after it. The output, the workspace and any layout
    copies come from PyTorch's allocator on the current stream, so that a call of a prepared
    shape can be captured in a CUDA graph: it waits for nothing and decides nothing beyond a
    dictionary lookup. A plan's counters (zero before a run, left zero by it) are the one
    exception to the allocator: outside a capture they lie in the runtime's zeroed region of
    the stream, which it allocates (after a wait for the stream, when it grows) at the first
    call there that needs more; while capturing they are a zeroed tensor of PyTorch's, whose
    memset the graph records, so that every replay starts from zero (the stream's region
    would be shared with the calls made outside the graph)."""
    storage = STORAGES.get(x.dtype)
    if storage is None or w.dtype is not x.dtype:
        raise CallError(
            f"x and w must be both float32, bfloat16 or float16, got {x.dtype} and {w.dtype}"
        )
    device = x.get_device()  # -1 on the CPU
    if device < 0 or w.get_device() != device:
        raise CallError(f"x and w must be on one CUDA device, got {x.device} and {w.device}")
    if x.dim() != 4 or w.dim() != 4:
        raise CallError("x must be (B, C, H, W) and w (F, C, K, K)")
    layout = layout_of(x)
    if layout is None:
        x, layout = x.contiguous(), "NCHW"
    if bias is not None and (
        bias.dtype is not x.dtype or bias.shape != (w.shape[0],) or bias.get_device() != device
    ):
        raise CallError(f"bias must be ({w.shape[0]},) {x.dtype} on {x.device}")
    try:
        epilogue = epilogue_name(bias is not None, residual is not None, activation)
    except EpilogueError as err:
        raise CallError(str(err)) from None
    key = call_key(x, w, stride, padding, epilogue, layout)
    entry = rt.entries.get(key)
    # "nearest" (the default) first: whether the plan is exact formats its problem's key.
    if entry is None or not (on_miss == "nearest" or entry.exact):
        if not torch.cuda.is_current_stream_capturing():
            entry = rt.entry(key, on_miss)
        elif entry is None:  # preparing compiles, loads and allocates: never while capturing
            raise CallError(
                f"{Call.of(key).problem().key} ({storage}, {layout}) was not prepared before "
                "CUDA-graph capture: run one call of it first (a warm-up)"
            )
    out = empty_like_layout(x, entry.out_dims, layout)
    mine = "NHWC" if entry.nhwc else "NCHW"
    if mine == layout:
        xin, y = x, out
    else:  # the plan reads the other layout: the input copied in, the output back
        xin = x.contiguous(memory_format=FORMATS[mine])
        y = empty_like_layout(x, entry.out_dims, mine)
    w = w.contiguous(memory_format=FORMATS[mine])  # no copy when it is so already
    # A view that starts off the alignment the plans read at is copied (calls.ALIGN_BYTES).
    if xin.data_ptr() % ALIGN_BYTES:
        xin = xin.clone(memory_format=FORMATS[mine])
    if w.data_ptr() % ALIGN_BYTES:
        w = w.clone(memory_format=FORMATS[mine])
    base = None
    if entry.workspace_bytes:
        workspace = torch.empty(entry.workspace_bytes, dtype=torch.uint8, device=x.device)
        base = workspace.data_ptr()
    bias_ptr = residual_ptr = None
    if entry.epilogue:  # fused: the bias, and the residual in the layout the plan writes
        bias_ptr = bias.contiguous().data_ptr()
        if residual is not None:
            if tuple(residual.shape) != tuple(entry.out_dims) or residual.dtype is not x.dtype:
                raise CallError(f"residual must be {tuple(entry.out_dims)} {x.dtype}")
            residual = residual.contiguous(memory_format=FORMATS[mine])
            residual_ptr = residual.data_ptr()
    counters_ptr = None
    if entry.counters and torch.cuda.is_current_stream_capturing():
        counters = torch.zeros(entry.counter_bytes, dtype=torch.uint8, device=x.device)
        counters_ptr = counters.data_ptr()
    stream = current_stream(device)
    rt.launch(
        entry,
        xin.data_ptr(),
        w.data_ptr(),
        y.data_ptr(),
        stream,
        base,
        bias_ptr,
        residual_ptr,
        counters_ptr,
    )
    if y is not out:
        out.copy_(y)
    if not entry.epilogue:  # a plan that fuses none (or a call without a bias): after it
        apply_epilogue(out, bias, residual, activation)
    return out


def call_key(x, w, stride: int, padding: int, epilogue: str, layout: str | None = None) -> tuple:
    """The runtime's key of a call (its `entries`): the device, the tensors' extents, stride
    and padding, storage type, x's layout (`layout` where the caller knows it), whether TF32
    is allowed, and the epilogue's name."""
    storage = STORAGES[x.dtype]
    tf32 = storage == "float32" and bool(torch.backends.cudnn.allow_tf32)
    layout = layout or layout_of(x) or "NCHW"
    return (x.get_device(), *x.shape, *w.shape, stride, padding, storage, layout, tf32, epilogue)


def apply_epilogue(y, bias=None, residual=None, activation: str = ""):
    """What a fused epilogue does, by PyTorch on `y` in place: the bias, the residual, then the
    activation (GELU the exact one, PyTorch's default)."""
    if bias is not None:
        y.add_(bias.view(1, -1, 1, 1))
    if residual is not None:
        y.add_(residual)
    if activation == "relu":
        y.relu_()
    elif activation == "silu":
        torch.nn.functional.silu(y, inplace=True)
    elif activation == "gelu":
        y.copy_(torch.nn.functional.gelu(y))
    elif activation:
        raise CallError(f"unknown activation {activation!r}")
    return y


# PyTorch's own getter of the current stream's handle, looked up once (an attribute of
# torch._C costs about 1 us a lookup); None in a build without CUDA.
_RAW_STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def current_stream(device: int) -> int:
    """The caller's current stream on `device`, as a cudaStream_t handle."""
    if _RAW_STREAM is not None:
        return _RAW_STREAM(device)
    return torch.cuda.current_stream(device).cuda_stream


__all__ = [
    "FORMATS",
    "STORAGES",
    "apply_epilogue",
    "autocast_dtype",
    "autocast_inputs",
    "call",
    "cast_to",
    "current_stream",
    "empty_like_layout",
    "layout_of",
    "output_dims",
    "output_layout",
]
