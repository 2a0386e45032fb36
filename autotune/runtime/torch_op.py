"""`torch.ops.autotune.conv2d`: the runtime as a PyTorch operator, its epilogue (bias, residual,
activation) included, so that torch.compile traces a model of autotune's convolutions as one
graph (the fake implementation gives the output's shape and strides without running anything)
and CUDA graphs capture its launches.

On CUDA tensors the op is the runtime's call (dispatch.py through torch_tensors.py); on CPU
tensors it is PyTorch's own conv2d (autotune tunes GPU kernels), which lets a machine without a
GPU trace and check a model. Both return the output in the input's memory format, as the fake
says.

The operator is defined through torch.library.Library, its kernels registered for the CUDA and
CPU dispatch keys directly: a compiled graph calls it once per convolution, and
torch.library.custom_op's Python layers (an autograd kernel, a redispatch, a Dynamo guard around
the body) cost about as much host time again as this registration does (11 us against 5.6 us
over the body, measured on the 2-core machine). It has no autograd kernel: the layer is forward
only.
"""

from __future__ import annotations

import torch

from autotune.runtime.torch_tensors import (
    apply_epilogue,
    empty_like_layout,
    output_dims,
    output_layout,
)

OP_NAME = "autotune::conv2d"
SCHEMA = (
    "conv2d(Tensor x, Tensor w, Tensor? bias, Tensor? residual, int stride, int padding, "
    "str activation, str on_miss, str runtime) -> Tensor"
)

_LIBRARY = torch.library.Library("autotune", "DEF")
_LIBRARY.define(SCHEMA)


def _conv2d_cuda(x, w, bias, residual, stride, padding, activation, on_miss, runtime):
    """activation(conv2d(x, w) + bias + residual) by the runtime named `runtime`
    (dispatch.runtime_key), the epilogue in the kernel's store where its family fuses it."""
    from autotune.runtime.dispatch import runtime_named

    rt = runtime_named(runtime)
    return rt.conv2d(x, w, stride, padding, on_miss, bias, residual, activation)


def _conv2d_cpu(x, w, bias, residual, stride, padding, activation, on_miss, runtime):
    y = torch.nn.functional.conv2d(x, w, bias, stride=stride, padding=padding)
    out = empty_like_layout(x, tuple(y.shape), output_layout(x))
    out.copy_(y)
    return apply_epilogue(out, None, residual, activation)


def _conv2d_fake(x, w, bias, residual, stride, padding, activation, on_miss, runtime):
    return empty_like_layout(x, output_dims(x.shape, w.shape, stride, padding), output_layout(x))


_LIBRARY.impl("conv2d", _conv2d_cuda, "CUDA")
_LIBRARY.impl("conv2d", _conv2d_cpu, "CPU")
torch.library.register_fake(OP_NAME, _conv2d_fake, lib=_LIBRARY)

# The operator (its only overload):
# conv2d(x, w, bias, residual, stride, padding, activation, on_miss, runtime).
conv2d = torch.ops.autotune.conv2d.default


__all__ = ["OP_NAME", "conv2d"]
