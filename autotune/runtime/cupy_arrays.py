"""The array side of a runtime call, as torch_tensors.py is the tensor side: CuPy arrays, and any
other DLPack producer on a CUDA device taken as CuPy arrays. FP32 (TF32 off) or FP16 (CuPy has
no bfloat16), C-contiguous NCHW (copied to be); the output a new CuPy array in NCHW, queued on
CuPy's current stream."""

from __future__ import annotations

import cupy as cp
import numpy as np

from autotune.runtime.calls import ALIGN_BYTES, CallError

CUDA_DLPACK = 2  # kDLCUDA
STORAGES = {np.float32: "float32", np.float16: "float16"}


def takes(x, w) -> bool:
    """Whether a call of these arguments is this side's: CuPy arrays, or DLPack producers."""
    return x.__class__ is cp.ndarray or (hasattr(x, "__dlpack__") and hasattr(w, "__dlpack__"))


def call(rt, x, w, stride: int, padding: int, on_miss: str, bias=None):
    """A call of runtime `rt` on arrays: `bias` ((F,), x's dtype) added in the plan's store where
    its family fuses epilogues, else after it."""
    if x.__class__ is not cp.ndarray:  # another DLPack producer
        if _dlpack_device(x) != CUDA_DLPACK or _dlpack_device(w) != CUDA_DLPACK:
            raise CallError("x and w must be on a CUDA device")
        x, w = cp.from_dlpack(x), cp.from_dlpack(w)
        bias = None if bias is None else cp.from_dlpack(bias)
    storage = STORAGES.get(x.dtype.type)
    if storage is None or w.dtype != x.dtype:
        raise CallError(f"x and w must be both float32 or float16, got {x.dtype} and {w.dtype}")
    if x.ndim != 4 or w.ndim != 4:
        raise CallError("x must be (B, C, H, W) and w (F, C, K, K)")
    device = x.device.id
    if w.device.id != device:
        raise CallError(f"x and w must be on one device, got {device} and {w.device.id}")
    if bias is not None:
        if bias.dtype != x.dtype or bias.shape != (w.shape[0],) or bias.device.id != device:
            raise CallError(f"bias must be ({w.shape[0]},) {x.dtype} on x's device")
        bias = cp.ascontiguousarray(bias)
    x, w = cp.ascontiguousarray(x), cp.ascontiguousarray(w)
    epilogue = "" if bias is None else "bias"
    key = (device, *x.shape, *w.shape, stride, padding, storage, "NCHW", False, epilogue)
    entry = rt.entry(key, on_miss)
    stream = cp.cuda.get_current_stream().ptr
    with cp.cuda.Device(device):
        if entry.nhwc:  # the plan reads NHWC: copy in, and the output back
            x = cp.ascontiguousarray(x.transpose(0, 2, 3, 1))
            w = cp.ascontiguousarray(w.transpose(0, 2, 3, 1))
        # A view that starts off the alignment the plans read at is copied.
        x = x.copy() if x.data.ptr % ALIGN_BYTES else x
        w = w.copy() if w.data.ptr % ALIGN_BYTES else w
        y = cp.empty(entry.out_shape, dtype=x.dtype)
    fused = None if bias is None or not entry.epilogue else bias.data.ptr
    rt.launch(entry, x.data.ptr, w.data.ptr, y.data.ptr, stream, bias=fused)
    y = cp.ascontiguousarray(y.transpose(0, 3, 1, 2)) if entry.nhwc else y
    if bias is not None and not entry.epilogue:  # a plan that fuses none: added after
        y += bias.reshape(1, -1, 1, 1)
    return y


def _dlpack_device(array) -> int:
    device = getattr(array, "__dlpack_device__", None)
    return int(device()[0]) if device is not None else -1


__all__ = ["STORAGES", "call", "takes"]
