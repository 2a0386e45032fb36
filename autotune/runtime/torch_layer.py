"""`autotune.Conv2d`: a drop-in forward-only layer for PyTorch models. Traced, it is the custom
op (torch_op.py), so that torch.compile takes the model as one graph; run eagerly on the GPU,
it calls the runtime directly (the same call, without the op's dispatch). Both can be captured
in a CUDA graph."""

from __future__ import annotations

import copy

import torch

from autotune.runtime import torch_op
from autotune.runtime.dispatch import Runtime, runtime, runtime_key, runtime_named
from autotune.runtime.torch_tensors import autocast_dtype, cast_to


def _square(value, what: str) -> int:
    if isinstance(value, tuple | list):
        if len(value) != 2 or value[0] != value[1]:
            raise ValueError(f"autotune.Conv2d takes a square {what}, got {tuple(value)}")
        value = value[0]
    return int(value)


# FX's symbolic tracer: the specific question where PyTorch has it (its general is_fx_tracing
# logs a deprecation warning at every call in newer versions).
_FX_TRACING = getattr(
    torch.fx._symbolic_trace,
    "is_fx_tracing_symbolic_tracing",
    torch.fx._symbolic_trace.is_fx_tracing,
)


def tf32_rounded(w: torch.Tensor) -> torch.Tensor:
    """FP32 `w` rounded to TF32's 10 mantissa bits, to nearest with ties away from zero (the
    tensor cores' cvt.rna), still FP32: the low 13 bits of each value zero."""
    bits = w.view(torch.int32)  # the same strides: a channels-last weight stays one
    return ((bits + 0x1000) & -0x2000).view(torch.float32)


def _rounded_if_tf32(x: torch.Tensor, weight: torch.Tensor, rounded: torch.Tensor | None):
    """The weight a GPU call on x computes with: its TF32 rounding (`rounded`, None for a weight
    not FP32) where x is FP32 and torch.backends.cudnn.allow_tf32 allows TF32, else `weight`."""
    tf32 = rounded is not None and x.dtype is torch.float32 and torch.backends.cudnn.allow_tf32
    return rounded if tf32 else weight


class Conv2d(torch.nn.Module):
    """Like torch.nn.Conv2d (square kernel, stride and padding; zero padding; no groups or
    dilation), computed by the fastest stored kernel for each input shape, dtype (FP32, TF32
    where torch.backends.cudnn.allow_tf32 allows it, BF16, FP16: the weight's, as the input's)
    and memory format (the output in the input's). Forward only: the weight and bias are
    parameters without gradients, and an input that requires a gradient while autograd
    records is refused (the kernels have no backward pass). The bias, when there is one, is
    added in the kernel's store where the plan's family fuses epilogues (run eagerly), else by
    PyTorch after the convolution. Under torch.autocast("cuda") it computes in autocast's lower
    precision, as torch.nn.Conv2d does: the input, and the weight and bias cast once."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        bias: bool = True,
        *,
        on_miss: str = "nearest",
        database: str | None = None,
        runtime_: Runtime | None = None,
        device=None,
        dtype=torch.float32,
    ) -> None:
        super().__init__()
        # The same initialisation as torch.nn.Conv2d's, by construction.
        like = torch.nn.Conv2d(
            in_channels,
            out_channels,
            _square(kernel_size, "kernel"),
            bias=bias,
            device=device,
            dtype=dtype,
        )
        self._adopt(like.weight.detach(), None if like.bias is None else like.bias.detach())
        self.register_load_state_dict_post_hook(Conv2d._round_weight)  # weights copied in place
        self.stride = _square(stride, "stride")
        self.padding = _square(padding, "padding")
        self.on_miss = on_miss
        # A fused epilogue beyond the bias (traced.fuse_epilogues sets them on a copy): the
        # activation applied last, and whether forward takes a residual to add before it.
        self.activation = ""
        self.takes_residual = False
        self._runtime = runtime_ or runtime(database)
        self._runtime_key = runtime_key(self._runtime)  # what the op carries (a string)

    def _adopt(self, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
        self.weight = torch.nn.Parameter(weight, requires_grad=False)
        if bias is None and "bias" not in self._parameters:  # a parameter of None, as nn.Conv2d's
            self.register_parameter("bias", None)
        else:
            self.bias = None if bias is None else torch.nn.Parameter(bias, requires_grad=False)
        self._round_weight()
        # The weight and bias cast for torch.autocast, by dtype: (their versions, the casts).
        # PyTorch's autocast caches only leaves that require a gradient, which these are not.
        self._casts: dict = {}

    def _round_weight(self, *_) -> None:
        """Keep `weight_tf32`, the FP32 weight rounded to TF32 (None for other dtypes), which
        calls with TF32 allowed compute with: cuDNN rounds its inputs so, while a tensor-core
        plan that reads FP32 bits from shared memory truncates them, a bias that compounds
        layer after layer (ResNet-50's logits drifted 1.9e-2 from float64 against eager's
        5.9e-4 on the H200; the plans round their own FP32 outputs for the next layer)."""
        w = self.weight.detach()
        rounded = tf32_rounded(w) if w.dtype is torch.float32 else None
        self.register_buffer("weight_tf32", rounded, persistent=False)
        self._rounded_version = self.weight._version

    @classmethod
    def from_torch(cls, conv: torch.nn.Conv2d, **kwargs) -> Conv2d:
        """The same layer (its weights copied by reference) run by autotune."""
        if conv.groups != 1 or _square(conv.dilation, "dilation") != 1:
            raise ValueError("autotune.Conv2d has no groups or dilation")
        if conv.padding_mode != "zeros" or isinstance(conv.padding, str):
            raise ValueError("autotune.Conv2d pads with zeros by a number of pixels")
        layer = cls(
            conv.in_channels,
            conv.out_channels,
            conv.kernel_size,
            conv.stride,
            conv.padding,
            bias=conv.bias is not None,
            device=conv.weight.device,
            dtype=conv.weight.dtype,
            **kwargs,
        )
        layer._adopt(conv.weight.detach(), None if conv.bias is None else conv.bias.detach())
        return layer

    def with_epilogue(self, activation: str = "", residual: bool = False) -> Conv2d:
        """This layer (its parameters shared) that also adds a residual, given to forward, and
        applies `activation` ("relu", "silu", "gelu") after its bias: one pass over the output
        in the kernel's store where the plan's family fuses that epilogue."""
        layer = copy.copy(self)  # a new instance dict; the parameters are the same tensors
        layer.activation, layer.takes_residual = activation, residual
        return layer

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        fx = _FX_TRACING()  # x is a Proxy then: nothing about it can be asked
        if not fx and x.requires_grad and torch.is_grad_enabled():
            raise RuntimeError(
                "autotune.Conv2d is forward only: run it under torch.no_grad() or "
                "torch.inference_mode(), or on an input that does not require a gradient"
            )
        if not fx and not torch.compiler.is_compiling() and x.is_cuda:
            return self._eager(x, residual)
        weight, bias = self._weight_for(x), self.bias
        cast = None if fx else autocast_dtype(x)
        if cast is not None:  # under torch.autocast: its lower precision, as nn.Conv2d's
            x, residual = cast_to(x, cast), cast_to(residual, cast)
            weight, bias = self._cast_parameters(cast)
        # Traced (torch.compile, torch.export, FX) or on the CPU: the op, as one node, its
        # epilogue with it (in the kernel's store on the GPU where the family fuses it).
        return torch_op.conv2d(
            x,
            weight,
            bias,
            residual,
            self.stride,
            self.padding,
            self.activation,
            self.on_miss,
            self._runtime_key,
        )

    def _eager(self, x: torch.Tensor, residual: torch.Tensor | None) -> torch.Tensor:
        """A call run eagerly on the GPU: the layer calls the runtime itself. The custom op's
        dispatch costs about as much host time as the call it wraps (20 us against 15 us for
        the op's CPU body, measured on the 2-core machine), once per convolution of a model.
        The bias goes with the call: a plan that fuses epilogues adds it in its store, which
        saves a launch and a pass over the output."""
        weight, bias = self._held()
        if self._rounded_version != weight._version:  # written in place since
            self._round_weight()
        weight = _rounded_if_tf32(x, weight, self._buffers.get("weight_tf32"))
        cast = autocast_dtype(x)
        if cast is not None:  # under torch.autocast: its lower precision, as nn.Conv2d's
            x, residual = cast_to(x, cast), cast_to(residual, cast)
            weight, bias = self._cast_parameters(cast)
        rt = runtime_named(self._runtime_key)  # the runtime the op would call
        return rt.conv2d(
            x, weight, self.stride, self.padding, self.on_miss, bias, residual, self.activation
        )

    def _held(self) -> tuple:
        """(weight, bias) as the module holds them. Read from its parameters' dictionary where
        both are plain parameters: nn.Module's attribute lookup costs about 1 us a read. With
        these reads (and the stream's getter looked up once, torch_tensors.py) ResNet-50's
        eager forward of ours took 2-6% less host time on the H200's host
        (results/h200/20261202i, call 7). A parametrized or swapped-in weight or
        bias (torch.nn.utils.parametrize, functional_call) is read as an attribute, as PyTorch's
        own layers read theirs."""
        held = self._parameters
        if "weight" in held and "bias" in held:
            return held["weight"], held["bias"]
        return self.weight, self.bias

    def _apply(self, fn, *args, **kwargs):
        """.to(), .cuda(), .half() ...: the rounded weight derived again from the converted one
        (none for a weight no longer FP32), not converted beside it; no autocast casts kept."""
        self.weight_tf32 = None
        self._casts.clear()
        module = super()._apply(fn, *args, **kwargs)
        self._round_weight()
        return module

    def _cast_parameters(self, dtype: torch.dtype) -> tuple:
        """The weight and bias in `dtype`, cast once and kept until either is written in place
        or replaced; traced (torch.compile), the casts are the graph's own."""
        if torch.compiler.is_compiling():
            return cast_to(self.weight, dtype), cast_to(self.bias, dtype)
        versions = (self.weight._version, None if self.bias is None else self.bias._version)
        kept = self._casts.get(dtype)
        if kept is None or kept[0] != versions or kept[1] is not self.weight:
            weight = cast_to(self.weight.detach(), dtype)
            bias = None if self.bias is None else cast_to(self.bias.detach(), dtype)
            kept = self._casts[dtype] = (versions, self.weight, weight, bias)
        return kept[2], kept[3]

    def _weight_for(self, x: torch.Tensor) -> torch.Tensor:
        """The rounded weight for a call on the GPU with TF32 allowed (under FX, x is a Proxy
        that cannot say: the weight as it is, as on the CPU, where PyTorch has no TF32)."""
        if _FX_TRACING() or not x.is_cuda:
            return self.weight
        return _rounded_if_tf32(x, self.weight, self.weight_tf32)

    def extra_repr(self) -> str:
        f, c, k, _ = self.weight.shape
        fused = f", activation={self.activation!r}" if self.activation else ""
        fused += ", residual=True" if self.takes_residual else ""
        return (
            f"{c}, {f}, kernel_size={k}, stride={self.stride}, padding={self.padding}, "
            f"bias={self.bias is not None}{fused}, on_miss={self.on_miss!r}"
        )
