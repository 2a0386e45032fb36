"""`autotune.MaxPool2d`: torch.nn.MaxPool2d whose eager calls on channels-last GPU tensors run
the runtime's pooling kernel (pool.cu), which optimize() swaps in beside the convolutions.
PyTorch's own NHWC max pooling took 0.61 ms of VGG-16's eager forward in bf16 at batch 32 on
the H200, about five times its bytes at the copy bandwidth (results/h200/20261202h). Traced
(torch.compile, torch.export, FX), on the CPU, with autograd recording or for any input the
kernel does not serve, it is PyTorch's pooling: torch.compile generates its own kernel."""

from __future__ import annotations

import torch

from autotune.runtime.pool_launch import CHUNK_BYTES, POOL_LAUNCHES, Pooling
from autotune.runtime.torch_layer import _FX_TRACING
from autotune.runtime.torch_tensors import STORAGES, current_stream, empty_like_layout, layout_of


def _pair(value) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else (int(value[0]), int(value[1]))


class MaxPool2d(torch.nn.MaxPool2d):
    """torch.nn.MaxPool2d without dilation, indices or ceil mode (what from_torch takes); the
    same result, bit for bit, NaN propagated as PyTorch does."""

    @classmethod
    def from_torch(cls, pool: torch.nn.MaxPool2d) -> MaxPool2d | None:
        """The same pooling run by autotune, or None for one it does not take (dilation,
        return_indices, ceil_mode)."""
        if pool.return_indices or pool.ceil_mode or _pair(pool.dilation) != (1, 1):
            return None
        return cls(pool.kernel_size, pool.stride, pool.padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if _FX_TRACING() or torch.compiler.is_compiling() or not x.is_cuda:
            return super().forward(x)
        if x.requires_grad and torch.is_grad_enabled():  # the kernel has no backward pass
            return super().forward(x)
        out = max_pool2d_nhwc(x, self.kernel_size, self.stride, self.padding)
        return super().forward(x) if out is None else out


def max_pool2d_nhwc(x: torch.Tensor, kernel, stride, padding) -> torch.Tensor | None:
    """torch.nn.functional.max_pool2d(x, kernel, stride, padding) by the runtime's kernel, on
    x's device and current stream (capturable in a CUDA graph once its shape has run); None
    where the kernel does not serve x (not on a GPU, not channels-last, a pixel not whole
    16-byte chunks, a dtype other than float32, bfloat16 and float16, an address off 16
    bytes, a shape not yet run while a CUDA graph is being captured)."""
    storage = STORAGES.get(x.dtype)
    if not x.is_cuda or storage is None or x.dim() != 4 or layout_of(x) != "NHWC":
        return None
    if x.data_ptr() % CHUNK_BYTES:
        return None
    b, c, h, w = x.shape
    pooling = Pooling(storage, b, c, h, w, _pair(kernel), _pair(stride or kernel), _pair(padding))
    if pooling.refusal() is not None:
        return None
    device = x.get_device()
    if torch.cuda.is_current_stream_capturing() and not POOL_LAUNCHES.prepared(pooling, device):
        return None  # preparing compiles and loads, never in a capture: PyTorch's pooling then
    y = empty_like_layout(x, (b, c, *pooling.out_size), "NHWC")
    if device == torch.cuda.current_device():
        POOL_LAUNCHES.run(pooling, device, x.data_ptr(), y.data_ptr(), current_stream(device))
    else:
        with torch.cuda.device(device):
            POOL_LAUNCHES.run(pooling, device, x.data_ptr(), y.data_ptr(), current_stream(device))
    return y


__all__ = ["MaxPool2d", "max_pool2d_nhwc"]
