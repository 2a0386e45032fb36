"""Problem definitions: shapes, FLOP counts, minimum bytes and shape keys (what every kind
shares, its error and bases, in problem_base.py)."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from typing import Union

from autotune.model.epilogue import DEFAULT_EPILOGUE, Epilogue, EpilogueError, epilogue_of
from autotune.model.kinds import KIND_SPECS
from autotune.model.precision import (
    DEFAULT_DTYPE,
    DEFAULT_LAYOUT,
    Precision,
    PrecisionError,
    check_dtype,
    check_layout,
    precision_of,
)
from autotune.model.problem_base import ProblemError, _check_sizes, _Problem, _UnknownWork

FLOAT32_BYTES = 4


@dataclass(frozen=True, slots=True)
class ConvProblem(_Problem):
    """2D convolution (cross-correlation) of an input with `padding` zeros around it.

    B images of C channels, F filters of K x K, an N x N output per feature map; the input side is
    (N - 1) * stride + K - 2 * padding + tail. With padding 0 (the default) the input is
    pre-padded: any padding is already part of it, which every family reads; a family that reads
    the zeros itself (Family.reads_padding) also computes padding > 0, with no copy of the input.
    `tail` counts the padded input's last rows (and columns) that no window reaches, 0 to
    stride - 1 (PyTorch's output side floors: a stride-2 layer over an even side has one); the
    families that read padding read it in place too. `dtype` says how values are stored and
    multiplied (model/precision.py), `layout` how tensors are ordered: NCHW input, FCKK filters,
    NFHW output; or NHWC, FKKC, NHWF; `epilogue` what is applied to the output before it is
    stored (model/epilogue.py; empty: nothing).
    """

    N: int
    K: int
    C: int
    F: int
    B: int = 1
    stride: int = 1
    dtype: str = DEFAULT_DTYPE
    layout: str = DEFAULT_LAYOUT
    epilogue: str = DEFAULT_EPILOGUE
    padding: int = 0  # last, so that positional construction reads as it always has
    tail: int = 0

    kind = "conv2d"
    sizes = ("N", "K", "C", "F", "B", "stride")

    def __post_init__(self) -> None:
        _check_sizes(self, self.sizes)
        padding = self.padding
        if isinstance(padding, bool) or not isinstance(padding, int):
            raise ProblemError(f"padding must be an integer, got {padding!r}")
        if not 0 <= padding < self.K:
            raise ProblemError(
                f"padding must be at least 0 and less than K={self.K} (every window then "
                f"overlaps the image), got {padding}"
            )
        tail = self.tail
        if isinstance(tail, bool) or not isinstance(tail, int) or not 0 <= tail < self.stride:
            raise ProblemError(
                f"tail (padded input rows past the last window) must be an integer from 0 to "
                f"stride - 1 = {self.stride - 1}, got {tail!r}"
            )
        try:
            check_dtype(self.dtype)
            check_layout(self.layout)
            epilogue_of(self.epilogue)
        except (PrecisionError, EpilogueError) as err:
            raise ProblemError(str(err)) from None

    @property
    def precision(self) -> Precision:
        return precision_of(self.dtype)

    @property
    def fused(self) -> Epilogue | None:
        """The epilogue applied to the output, or None."""
        return epilogue_of(self.epilogue)

    @property
    def nhwc(self) -> bool:
        return self.layout == "NHWC"

    @property
    def input_size(self) -> int:
        """Side of the input image as stored (without the zeros of `padding`, with the `tail`)."""
        return (self.N - 1) * self.stride + self.K - 2 * self.padding + self.tail

    @property
    def pre_padded(self) -> bool:
        """Whether the input is the pre-padded one that ends with its last window (no padding,
        no tail): what every family reads."""
        return not (self.padding or self.tail)

    @property
    def flops(self) -> int:
        """Required FLOPs: one multiply-add is 2 FLOPs; no bias."""
        return 2 * self.B * self.N * self.N * self.K * self.K * self.C * self.F

    @property
    def min_bytes(self) -> int:
        """Each input element and filter read once, each output written once, in storage type;
        an epilogue's scale and bias (F each) and residual (the output's size) read once."""
        inputs = self.B * self.C * self.input_size**2
        filters = self.F * self.C * self.K * self.K
        outputs = self.B * self.F * self.N * self.N
        fused = self.fused
        if fused is not None:
            inputs += self.F * (fused.scale + fused.bias) + outputs * fused.residual
        return self.precision.bytes * (inputs + filters + outputs)

    @property
    def input_shape(self) -> tuple[int, int, int, int]:
        s = self.input_size
        return (self.B, s, s, self.C) if self.nhwc else (self.B, self.C, s, s)

    @property
    def filter_shape(self) -> tuple[int, int, int, int]:
        k = self.K
        return (self.F, k, k, self.C) if self.nhwc else (self.F, self.C, k, k)

    @property
    def output_shape(self) -> tuple[int, int, int, int]:
        n = self.N
        return (self.B, n, n, self.F) if self.nhwc else (self.B, self.F, n, n)

    def fields(self) -> dict[str, int]:
        """Names a search-space constraint may use (integers only): the sizes, S the input side,
        ELEM_BYTES the storage size, TENSOR_CORE, NHWC and FUSED (an epilogue) as 0 or 1."""
        sizes = {name: getattr(self, name) for name in self.sizes}
        return {
            **sizes,
            "PADDING": self.padding,
            "S": self.input_size,
            "ELEM_BYTES": self.precision.bytes,
            "TENSOR_CORE": int(self.precision.tensor_core),
            "NHWC": int(self.nhwc),
            "FUSED": int(self.fused is not None),
        }

    def as_dict(self) -> dict[str, int | str]:
        """The fields, padding, tail, dtype, layout and epilogue only when not the default (so FP32
        NCHW shapes read as they always have)."""
        values: dict[str, int | str] = {name: getattr(self, name) for name in self.sizes}
        if self.padding:
            values["padding"] = self.padding
        if self.tail:
            values["tail"] = self.tail
        if self.dtype != DEFAULT_DTYPE:
            values["dtype"] = self.dtype
        if self.layout != DEFAULT_LAYOUT:
            values["layout"] = self.layout
        if self.epilogue != DEFAULT_EPILOGUE:
            values["epilogue"] = self.epilogue
        return values

    @property
    def key(self) -> str:
        """Shape key (N, K, C, F), with B and stride only when not 1, padding and tail only when
        not 0, dtype, layout and epilogue only when not the default."""
        text = f"N={self.N},K={self.K},C={self.C},F={self.F}"
        if self.B != 1:
            text += f",B={self.B}"
        if self.stride != 1:
            text += f",stride={self.stride}"
        if self.padding:
            text += f",padding={self.padding}"
        if self.tail:
            text += f",tail={self.tail}"
        if self.dtype != DEFAULT_DTYPE:
            text += f",dtype={self.dtype}"
        if self.layout != DEFAULT_LAYOUT:
            text += f",layout={self.layout}"
        if self.epilogue != DEFAULT_EPILOGUE:
            text += f",epilogue={self.epilogue}"
        return text


@dataclass(frozen=True, slots=True)
class GemmProblem(_Problem):
    """C[M, N] = A[M, K] @ B[K, N], FP32, row-major (a fully connected layer: M is the batch)."""

    M: int
    N: int
    K: int

    kind = "gemm"

    @property
    def flops(self) -> int:
        """One multiply-add per (m, n, k) is 2 FLOPs."""
        return 2 * self.M * self.N * self.K

    @property
    def min_bytes(self) -> int:
        """A and B read once, C written once (FP32)."""
        return FLOAT32_BYTES * (self.M * self.K + self.K * self.N + self.M * self.N)

    @property
    def a_shape(self) -> tuple[int, int]:
        return (self.M, self.K)

    @property
    def b_shape(self) -> tuple[int, int]:
        return (self.K, self.N)

    @property
    def c_shape(self) -> tuple[int, int]:
        return (self.M, self.N)

    @property
    def key(self) -> str:
        return f"M={self.M},N={self.N},K={self.K}"


@dataclass(frozen=True, slots=True)
class Conv3dProblem(_Problem):
    """Valid single-channel 3D cross-correlation: a D x R x Cc input and a Kd x Kr x Kc filter
    give a (D-Kd+1) x (R-Kr+1) x (Cc-Kc+1) output."""

    D: int
    R: int
    Cc: int
    Kd: int
    Kr: int
    Kc: int

    kind = "conv3d"

    def __post_init__(self) -> None:
        _check_sizes(self)
        for side, extent, name in (("D", "Kd", "depth"), ("R", "Kr", "rows"), ("Cc", "Kc", "cols")):
            if getattr(self, extent) > getattr(self, side):
                raise ProblemError(
                    f"filter {extent}={getattr(self, extent)} is larger than the input "
                    f"{side}={getattr(self, side)} ({name}); a valid convolution has no output"
                )

    @property
    def OD(self) -> int:  # noqa: N802 - the output sides read like the problem's other fields
        return self.D - self.Kd + 1

    @property
    def OR(self) -> int:  # noqa: N802
        return self.R - self.Kr + 1

    @property
    def OC(self) -> int:  # noqa: N802
        return self.Cc - self.Kc + 1

    @property
    def outputs(self) -> int:
        return self.OD * self.OR * self.OC

    @property
    def flops(self) -> int:
        """One multiply-add per output and filter tap is 2 FLOPs."""
        return 2 * self.outputs * self.Kd * self.Kr * self.Kc

    @property
    def min_bytes(self) -> int:
        """Input and filter read once, output written once (FP32)."""
        return FLOAT32_BYTES * (
            self.D * self.R * self.Cc + self.Kd * self.Kr * self.Kc + self.outputs
        )

    @property
    def input_shape(self) -> tuple[int, int, int]:
        return (self.D, self.R, self.Cc)

    @property
    def filter_shape(self) -> tuple[int, int, int]:
        return (self.Kd, self.Kr, self.Kc)

    @property
    def output_shape(self) -> tuple[int, int, int]:
        return (self.OD, self.OR, self.OC)

    def fields(self) -> dict[str, int]:
        """Names a search-space constraint may use, with the output sides OD, OR, OC."""
        return {**asdict(self), "OD": self.OD, "OR": self.OR, "OC": self.OC}

    @property
    def key(self) -> str:
        return f"D={self.D},R={self.R},Cc={self.Cc},Kd={self.Kd},Kr={self.Kr},Kc={self.Kc}"


@dataclass(frozen=True, slots=True)
class RecordedProblem(_UnknownWork):
    """A problem known only from a recording made elsewhere (a Kernel Tuner cache file): its
    problem size as X, Y, Z (Kernel Tuner's problem_size), no kernel of ours, no known work."""

    X: int
    Y: int = 1
    Z: int = 1

    kind = "recorded"

    @property
    def key(self) -> str:
        text = f"X={self.X}"
        text += f",Y={self.Y}" if self.Y != 1 or self.Z != 1 else ""
        return text + (f",Z={self.Z}" if self.Z != 1 else "")


@dataclass(frozen=True, slots=True)
class KernelProblem(_UnknownWork):
    """A user's kernel tuned through tune_kernel: Kernel Tuner's problem_size as X, Y, Z (0 for a
    dimension given as an expression of the tunables, written out in `args`) and the signature of
    its arguments (dtype and shape of each, constant and dynamic shared memory) with digests of
    the source and compiler options, so that another size, argument list or kernel text is
    another study; and `launch`, the launch conventions that are not Kernel Tuner's defaults
    (JSON, kt/study.py; "" for none), so that an export can compute each configuration's launch
    from the store. No known work (GFlop/s shows 0)."""

    X: int
    Y: int = 1
    Z: int = 1
    args: str = ""
    launch: str = ""

    kind = "kernel"

    def __post_init__(self) -> None:
        for name in ("X", "Y", "Z"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ProblemError(f"{name} must be a non-negative integer, got {value!r}")
        for name in ("args", "launch"):
            if not isinstance(getattr(self, name), str):
                raise ProblemError(f"{name} must be text, got {getattr(self, name)!r}")

    def fields(self) -> dict[str, int]:
        return {"X": self.X, "Y": self.Y, "Z": self.Z}

    @property
    def key(self) -> str:
        """X, Y, Z, then a digest of the signature: keys stay short (the column holds 200
        characters) however many arguments a kernel takes; the shape JSON keeps it whole. The
        launch joins the digest only where there is one, so default launches keep their keys."""
        text = self.args + (f"\nlaunch={self.launch}" if self.launch else "")
        digest = hashlib.sha256(text.encode()).hexdigest()[:12]
        return f"X={self.X},Y={self.Y},Z={self.Z},args={digest}"


Problem = Union[ConvProblem, GemmProblem, Conv3dProblem, RecordedProblem, KernelProblem]  # noqa: UP007

PROBLEM_TYPES: dict[str, type] = {
    "conv2d": ConvProblem,
    "gemm": GemmProblem,
    "conv3d": Conv3dProblem,
    "recorded": RecordedProblem,
    "kernel": KernelProblem,
}
KINDS = tuple(PROBLEM_TYPES)

KIND_FIELDS: dict[str, tuple[str, ...]] = {k: spec.fields for k, spec in KIND_SPECS.items()}
KIND_TEXTS: dict[str, tuple[str, ...]] = {k: spec.texts for k, spec in KIND_SPECS.items()}
REQUIRED_FIELDS: dict[str, tuple[str, ...]] = {k: s.required for k, s in KIND_SPECS.items()}
