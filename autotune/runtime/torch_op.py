"""`torch.ops.autotune.conv2d`: the runtime as a PyTorch custom op, so that torch.compile traces
a model of autotune's convolutions as one graph (the fake implementation gives the output's
shape and strides without running anything) and CUDA graphs capture its launches.

On CUDA tensors the op is the runtime's call (dispatch.py through torch_tensors.py); on CPU
tensors it is PyTorch's own conv2d (autotune tunes GPU kernels), which lets a machine without a
GPU trace and check a model. Both return the output in the input's memory format, as the fake
says.
"""

from __future__ import annotations

import torch

from autotune.runtime.torch_tensors import empty_like_layout, output_dims, output_layout

OP_NAME = "autotune::conv2d"


@torch.library.custom_op(OP_NAME, mutates_args=())
def conv2d(
    x: torch.Tensor, w: torch.Tensor, stride: int, padding: int, on_miss: str, runtime: str
) -> torch.Tensor:
    """y = conv2d(x, w) by the runtime named `runtime` (dispatch.runtime_key)."""
    from autotune.runtime.dispatch import runtime_named

    return runtime_named(runtime).conv2d(x, w, stride, padding, on_miss)


@conv2d.register_kernel("cpu")
def _conv2d_cpu(x, w, stride, padding, on_miss, runtime):
    y = torch.nn.functional.conv2d(x, w, stride=stride, padding=padding)
    out = empty_like_layout(x, tuple(y.shape), output_layout(x))
    out.copy_(y)
    return out


@conv2d.register_fake
def _conv2d_fake(x, w, stride, padding, on_miss, runtime):
    return empty_like_layout(x, output_dims(x.shape, w.shape, stride, padding), output_layout(x))


__all__ = ["OP_NAME", "conv2d"]
