"""Problem definitions: shapes, FLOP counts, minimum bytes and shape keys."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

FLOAT32_BYTES = 4


class ProblemError(ValueError):
    """A problem description that cannot be a valid convolution."""


@dataclass(frozen=True, slots=True)
class ConvProblem:
    """2D convolution over a pre-padded input (valid cross-correlation).

    B images of C channels, F filters of K x K, an N x N output per feature map; the input side is
    (N - 1) * stride + K, i.e. any padding is already part of the input.
    """

    N: int
    K: int
    C: int
    F: int
    B: int = 1
    stride: int = 1

    kind = "conv2d"

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ProblemError(f"{f.name} must be an integer, got {value!r}")
            if value < 1:
                raise ProblemError(f"{f.name} must be at least 1, got {value}")

    @property
    def input_size(self) -> int:
        """Side of the (pre-padded) input image."""
        return (self.N - 1) * self.stride + self.K

    @property
    def flops(self) -> int:
        """Required FLOPs: one multiply-add is 2 FLOPs; no bias."""
        return 2 * self.B * self.N * self.N * self.K * self.K * self.C * self.F

    @property
    def min_bytes(self) -> int:
        """Each input element and filter read once, each output written once (FP32)."""
        inputs = self.B * self.C * self.input_size**2
        filters = self.F * self.C * self.K * self.K
        outputs = self.B * self.F * self.N * self.N
        return FLOAT32_BYTES * (inputs + filters + outputs)

    @property
    def input_shape(self) -> tuple[int, int, int, int]:
        return (self.B, self.C, self.input_size, self.input_size)

    @property
    def filter_shape(self) -> tuple[int, int, int, int]:
        return (self.F, self.C, self.K, self.K)

    @property
    def output_shape(self) -> tuple[int, int, int, int]:
        return (self.B, self.F, self.N, self.N)

    def fields(self) -> dict[str, int]:
        """Names a search-space constraint may use, with S the input side."""
        return {**asdict(self), "S": self.input_size}

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    @property
    def key(self) -> str:
        """Shape key (N, K, C, F), with B and stride only when not 1."""
        text = f"N={self.N},K={self.K},C={self.C},F={self.F}"
        if self.B != 1:
            text += f",B={self.B}"
        if self.stride != 1:
            text += f",stride={self.stride}"
        return text

    def __str__(self) -> str:
        return self.key


PROBLEM_FIELDS = ("N", "K", "C", "F", "B", "stride")


def parse_shape(text: str) -> ConvProblem:
    """Parse 'N=128,K=3,C=64,F=64[,B=..,stride=..]' into a ConvProblem."""
    values: dict[str, int] = {}
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        name, sep, raw = part.partition("=")
        if not sep:
            raise ProblemError(f"shape item {part!r} is not NAME=VALUE")
        if name not in PROBLEM_FIELDS:
            raise ProblemError(
                f"unknown shape field {name!r} (expected {', '.join(PROBLEM_FIELDS)})"
            )
        if name in values:
            raise ProblemError(f"shape field {name!r} given twice")
        try:
            values[name] = int(raw)
        except ValueError:
            raise ProblemError(f"shape field {name}={raw!r} is not an integer") from None
    missing = [n for n in ("N", "K", "C", "F") if n not in values]
    if missing:
        raise ProblemError(f"shape {text!r} lacks {', '.join(missing)}")
    return ConvProblem(**values)


def problem_from_dict(values: dict[str, object]) -> ConvProblem:
    """Build a ConvProblem from a mapping (a TOML table or a CSV row), checking field names."""
    unknown = sorted(set(values) - set(PROBLEM_FIELDS))
    if unknown:
        raise ProblemError(f"unknown shape field(s) {', '.join(unknown)}")
    converted: dict[str, int] = {}
    for name, raw in values.items():
        if raw is None or raw == "":
            continue
        try:
            converted[name] = int(raw)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise ProblemError(f"shape field {name}={raw!r} is not an integer") from None
    missing = [n for n in ("N", "K", "C", "F") if n not in converted]
    if missing:
        raise ProblemError(f"shape lacks {', '.join(missing)}")
    return ConvProblem(**converted)
