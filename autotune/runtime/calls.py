"""What a runtime call asks for, without a GPU: its sizes as a problem, and its request (the
tensors' storage type, the input's memory order, whether TF32 products are allowed), which says
the problems (dtype, layout) that may serve it and what serving it in another layout costs."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from autotune.model.epilogue import EpilogueError, check_epilogue
from autotune.model.precision import LAYOUTS, PRECISIONS
from autotune.model.problem import ConvProblem


class CallError(ValueError):
    """Arguments autotune.conv2d cannot take (the message says which and why)."""


# The dtypes a call's storage type may be computed in: FP32 tensors in FP32, or also with TF32
# products where the caller allows them (PyTorch's torch.backends.cudnn.allow_tf32 for
# convolutions); 16-bit tensors in their own type (FP32 accumulation).
STORAGE_DTYPES = {"float32": ("fp32",), "bfloat16": ("bf16",), "float16": ("fp16",)}
TF32_DTYPES = ("fp32", "tf32")

# How the runtime launches its kernels (gpu/launch.py's LAUNCHERS): "driver", cuLaunchKernel
# with the arguments' storage made once and each tensor map encoded once per address, the
# default (ResNet-50's bf16 forward on the H200: 3.51 ms of host time against CuPy's 4.64,
# results/h200/20261129b); "cupy", CuPy's Function call, which converts every argument and
# encodes every tensor map on every call. Named here, without CuPy, for the commands' options.
LAUNCHER_NAMES = ("cupy", "driver")
# The alignment a plan's input and filters are read at (TMA tensor maps, the padding's 16-byte
# chunks): a caller's view that starts elsewhere (a slice of a larger tensor) is copied first.
ALIGN_BYTES = 16
DEFAULT_LAUNCHER = "driver"


@dataclass(frozen=True, slots=True)
class Request:
    """How a call's tensors are given: storage type, the input's memory order (NCHW for a
    contiguous tensor, NHWC for a channels-last one) and whether an FP32 call may use TF32; and
    what it asks applied to the output (`epilogue`: a name of model/epilogue.py's grammar, e.g.
    "bias" for a call with a bias, "bias_add_relu" with a residual and ReLU, which a plan of a
    family that does not fuse it pays another pass over the output for)."""

    storage: str = "float32"
    layout: str = "NCHW"
    allow_tf32: bool = False
    epilogue: str = ""
    # The call's padding and tail where a plan may read its input in place, with the zeros
    # around it and the rows no window reaches (Call.padded_problem); 0 otherwise: every plan
    # then reads a padded copy.
    padding: int = 0
    tail: int = 0

    def __post_init__(self) -> None:
        if self.storage not in STORAGE_DTYPES:
            raise CallError(f"tensors must be {', '.join(STORAGE_DTYPES)}, not {self.storage}")
        if self.layout not in LAYOUTS:
            raise CallError(f"layout must be one of {', '.join(LAYOUTS)}, not {self.layout!r}")
        try:
            check_epilogue(self.epilogue)
        except EpilogueError as err:
            raise CallError(str(err)) from None

    @property
    def dtypes(self) -> tuple[str, ...]:
        if self.storage == "float32" and self.allow_tf32:
            return TF32_DTYPES
        return STORAGE_DTYPES[self.storage]

    def problems(self, sizes: ConvProblem) -> tuple[ConvProblem, ...]:
        """Every problem that may serve a call of these sizes (the pre-padded problem): each
        dtype the request allows, in the request's own layout first, then in the other (served
        with a layout copy); with a padding or a tail, each first as the problem over the call's
        own input (read in place, by the families that read padding), then pre-padded (read
        from a padded copy)."""
        layouts = (self.layout, *(x for x in LAYOUTS if x != self.layout))
        extents = ((self.padding, self.tail), (0, 0)) if self.padding or self.tail else ((0, 0),)
        return tuple(
            replace(sizes, dtype=d, layout=lay, padding=pad, tail=tail)
            for d in self.dtypes
            for lay in layouts
            for pad, tail in extents
        )

    @classmethod
    def exactly(cls, problem: ConvProblem) -> Request:
        """The request a problem's own dtype, layout, padding and tail make (TF32 allowed for
        a tf32 one)."""
        storage = PRECISIONS[problem.dtype].storage
        tf32 = problem.dtype == "tf32"
        return cls(storage, problem.layout, tf32, padding=problem.padding, tail=problem.tail)


def epilogue_pass_bytes(problem: ConvProblem, residual: bool = False) -> int:
    """Bytes a call moves to apply its epilogue after a plan that does not fuse it: the output
    read and written once (PyTorch's in-place adds and activation, each a pass of its own, are
    counted as one), and a residual read, in the storage type."""
    p = problem
    return (3 if residual else 2) * p.precision.bytes * p.B * p.F * p.N * p.N


def layout_copy_bytes(problem: ConvProblem) -> int:
    """Bytes a call moves when its tensors are in the other layout than the plan reads: the
    input and the filters copied into the plan's layout and the output back (each read and
    written once), in the storage type."""
    p = problem
    elements = p.B * p.C * p.input_size**2 + p.F * p.C * p.K * p.K + p.B * p.F * p.N * p.N
    return 2 * p.precision.bytes * elements


def padding_copy_bytes(problem: ConvProblem, height: int, width: int) -> int:
    """Bytes the runtime's padding launch moves for a call whose (unpadded) input is height x
    width: the caller's input read, the pre-padded input the plan reads written."""
    p = problem
    return p.precision.bytes * p.B * p.C * (height * width + p.input_size**2)


LAYOUT_COPIES = 3  # operations of a layout copy: the input, the filters, the output


@dataclass(frozen=True, slots=True)
class Call:
    """One call's shape and request, as the cache of prepared plans is keyed."""

    device: int
    B: int
    C: int
    H: int
    W: int
    F: int
    Cw: int
    KH: int
    KW: int
    stride: int
    padding: int
    storage: str = "float32"
    layout: str = "NCHW"
    allow_tf32: bool = False
    # What the call asks the plan to apply to its output (model/epilogue.py): "bias" when it
    # passes a bias, "bias_add_relu" with a residual and ReLU too, ..., which a family that
    # fuses epilogues applies in its store; "" for none.
    epilogue: str = ""

    @classmethod
    def of(cls, key: tuple) -> Call:
        sizes = tuple(_single(v) for v in key[:11])
        return cls(*sizes, *key[11:])

    @property
    def request(self) -> Request:
        own = self.padded_problem()
        padding, tail = (own.padding, own.tail) if own is not None else (0, 0)
        return Request(
            self.storage, self.layout, bool(self.allow_tf32), self.epilogue, padding, tail
        )

    def padded_problem(self) -> ConvProblem | None:
        """The call as a problem over its own input, read in place with the zeros around it and
        its tail (a stride-2 layer over an even side has one: ConvProblem.tail), where that
        differs from the pre-padded problem and can be one: a padding below the filter size;
        None otherwise."""
        sizes = self.problem()
        if not 0 <= self.padding < sizes.K:
            return None
        padded = replace(sizes, padding=self.padding)
        padded = replace(padded, tail=self.H - padded.input_size)
        return padded if padded.padding or padded.tail else None

    def problem(self) -> ConvProblem:
        """The sizes as a problem over the pre-padded input (FP32 NCHW: the request says which
        dtypes and layouts may serve it). Square images and filters only."""
        if self.C != self.Cw:
            raise CallError(f"x has {self.C} channels, w {self.Cw}")
        if self.KH != self.KW:
            raise CallError(f"filters must be square, got {self.KH} x {self.KW}")
        if min(self.B, self.C, self.H, self.W, self.F, self.KH) < 1:
            raise CallError("every extent of x and w must be at least 1")
        if self.H != self.W:
            raise CallError(
                f"images must be square (the store's shapes are), got {self.H} x {self.W}"
            )
        if not isinstance(self.stride, int) or not isinstance(self.padding, int):
            raise CallError("stride and padding must be integers")
        if self.stride < 1 or self.padding < 0:
            raise CallError(
                f"stride must be >= 1 and padding >= 0, got {self.stride}, {self.padding}"
            )
        side = self.H + 2 * self.padding
        if side < self.KH:
            raise CallError(
                f"a {self.KH} x {self.KH} filter is larger than the padded image ({side})"
            )
        n = (side - self.KH) // self.stride + 1
        return ConvProblem(N=n, K=self.KH, C=self.C, F=self.F, B=self.B, stride=self.stride)


def _single(value):
    """An extent as an int: a NumPy integer, or a pair of equal ints (PyTorch's (s, s))."""
    if isinstance(value, tuple | list) and len(value) == 2 and value[0] == value[1]:
        value = value[0]
    return int(value) if isinstance(value, np.integer) else value


__all__ = [
    "ALIGN_BYTES",
    "DEFAULT_LAUNCHER",
    "LAUNCHER_NAMES",
    "LAYOUT_COPIES",
    "STORAGE_DTYPES",
    "Call",
    "CallError",
    "Request",
    "epilogue_pass_bytes",
    "layout_copy_bytes",
    "padding_copy_bytes",
]
