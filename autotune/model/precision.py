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


# Tolerances, from results/h100/precision/README.md (cuDNN 9.19 through PyTorch on the H100, every
# layer of alexnet, overfeat and vgg16, both layouts, against float64 over the stored inputs):
# cuDNN's own output reaches at most 8.6e-7 (fp32), 2.6e-4 (tf32), 1.7e-3 (bf16), 2.1e-4 (fp16);
# the same output less one term of every sum at least 1.03e-2 (OverFeat L5, C*K*K = 9216). Each
# tolerance sits between, 3x or more above cuDNN and 2x or more below a dropped term. TF32 gets
# 2e-3, not 1e-3: cuDNN rounds its inputs to TF32 (2.6e-4), while a kernel that hands FP32 bits
# to the tensor cores truncates them, which alone gives 6.9e-4 (tf32_truncation.md there).
PRECISIONS: dict[str, Precision] = {
    "fp32": Precision("fp32", "float32", 4, False, 1e-5, "fma_peak"),
    "tf32": Precision("tf32", "float32", 4, True, 2e-3, "tc_peak_tf32"),
    "bf16": Precision("bf16", "bfloat16", 2, True, 5e-3, "tc_peak_bf16"),
    "fp16": Precision("fp16", "float16", 2, True, 1e-3, "tc_peak_fp16"),
}

# The dtypes the tensor cores multiply (what a tensor-core family computes).
TENSOR_CORE_DTYPES = tuple(name for name, p in PRECISIONS.items() if p.tensor_core)

# The device ceilings measured once per device: the FP32 ones, then the dense tensor-core peak of
# each tensor-core dtype, by ceiling name (what its efficiency divides by).
FP32_CEILINGS = ("fma_peak", "copy_bandwidth", "sgemm")
TENSOR_CORE_CEILINGS = {p.peak_ceiling: p.name for p in PRECISIONS.values() if p.tensor_core}
CEILING_NAMES = FP32_CEILINGS + tuple(TENSOR_CORE_CEILINGS)


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


def family_precisions(
    family, dtypes: tuple[str, ...] = (), layouts: tuple[str, ...] = ()
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The dtypes and layouts a family is tuned in: those asked, else its own: fp32 (NCHW) where
    it computes (reads) it, else every one it declares (a tensor-core family's tf32, bf16 and
    fp16 in NHWC)."""
    own_dtypes, own_layouts = tuple(family.dtypes), tuple(family.layouts)
    if not dtypes:
        dtypes = (DEFAULT_DTYPE,) if DEFAULT_DTYPE in own_dtypes else own_dtypes
    if not layouts:
        layouts = (DEFAULT_LAYOUT,) if DEFAULT_LAYOUT in own_layouts else own_layouts
    return dtypes, layouts


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
    "family_precisions",
    "precision_of",
]
