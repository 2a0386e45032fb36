"""Precisions and layouts of a problem: storage type, arithmetic units, tolerance, peak."""

from __future__ import annotations

from dataclasses import dataclass

DTYPES = ("fp32", "tf32", "bf16", "fp16")
LAYOUTS = ("NCHW", "NHWC")
DEFAULT_DTYPE = "fp32"
DEFAULT_LAYOUT = "NCHW"


class PrecisionError(ValueError):
    """An unknown dtype or layout name."""


@dataclass(frozen=True, slots=True)
class Precision:
    """What a dtype means (DESIGN section 2): how values are stored, which units multiply them,
    the relative L2 error a right kernel stays within, and the ceiling efficiency divides by."""

    name: str
    storage: str  # float32, float16 or bfloat16
    bytes: int  # per stored element
    tensor_core: bool
    tolerance: float  # relative L2 against float64 over the stored inputs
    peak_ceiling: str  # the ceiling's name in the store

    @property
    def label(self) -> str:
        return self.name.upper()


# Tolerances: FP32 as ever. The others sit several times above what rounding alone gives
# (TF32 products keep 10 mantissa bits, FP16 outputs 10, BF16 outputs 7: relative errors near
# 3e-4, 3e-4 and 2e-3) and below what dropping one term of every output's sum gives (about
# 1/sqrt(C*K*K), at least 1.4e-2 on the layers of the shape sets).
PRECISIONS: dict[str, Precision] = {
    "fp32": Precision("fp32", "float32", 4, False, 1e-5, "fma_peak"),
    "tf32": Precision("tf32", "float32", 4, True, 1e-3, "tc_peak_tf32"),
    "bf16": Precision("bf16", "bfloat16", 2, True, 5e-3, "tc_peak_bf16"),
    "fp16": Precision("fp16", "float16", 2, True, 1e-3, "tc_peak_fp16"),
}


def check_dtype(name: object) -> str:
    if name not in PRECISIONS:
        raise PrecisionError(f"unknown dtype {name!r} (known: {', '.join(DTYPES)})")
    return str(name)


def check_layout(name: object) -> str:
    if name not in LAYOUTS:
        raise PrecisionError(f"unknown layout {name!r} (known: {', '.join(LAYOUTS)})")
    return str(name)


def precision_of(dtype: str) -> Precision:
    return PRECISIONS[check_dtype(dtype)]


__all__ = [
    "DEFAULT_DTYPE",
    "DEFAULT_LAYOUT",
    "DTYPES",
    "LAYOUTS",
    "PRECISIONS",
    "Precision",
    "PrecisionError",
    "check_dtype",
    "check_layout",
    "precision_of",
]
