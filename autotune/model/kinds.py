"""The problem kinds in one table: each kind's fields, table columns and baseline library."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class KindSpec:
    name: str
    fields: tuple[str, ...]  # a problem's fields, in the order of its key
    required: tuple[str, ...]  # what a shape must give (the others have defaults)
    columns: tuple[str, ...]  # the shape columns of a table, in reading order
    library: str | None = None  # the library a problem of this kind is compared with
    texts: tuple[str, ...] = ()  # fields given as names, not numbers, after the others in a key

    @property
    def library_label(self) -> str | None:
        return LIBRARY_LABELS[self.library] if self.library else None


CONV2D = KindSpec(
    "conv2d",
    fields=("N", "K", "C", "F", "B", "stride", "padding", "tail"),
    required=("N", "K", "C", "F"),
    columns=("B", "N", "K", "C", "F", "stride"),
    library="cudnn",
    texts=("dtype", "layout", "epilogue"),
)
GEMM = KindSpec("gemm", ("M", "N", "K"), ("M", "N", "K"), ("M", "N", "K"), library="cublas")
CONV3D = KindSpec("conv3d", *(("D", "R", "Cc", "Kd", "Kr", "Kc"),) * 3)
# A space recorded elsewhere (a Kernel Tuner cache): Kernel Tuner's problem_size, no library.
RECORDED = KindSpec("recorded", ("X", "Y", "Z"), ("X",), ("X", "Y", "Z"))
# Any kernel tuned through tune_kernel: Kernel Tuner's problem_size, the arguments' signature in
# the key (not a field: it is text), no library.
KERNEL = KindSpec("kernel", ("X", "Y", "Z"), ("X",), ("X", "Y", "Z"))

KIND_SPECS: dict[str, KindSpec] = {k.name: k for k in (CONV2D, GEMM, CONV3D, RECORDED, KERNEL)}
LIBRARY_LABELS = {"cudnn": "cuDNN", "cublas": "cuBLAS"}


def library_of(kind: str) -> str | None:
    """The baseline library of a kind (cudnn, cublas), or None (conv3d, recorded, kernel: none)."""
    spec = KIND_SPECS.get(kind)
    return spec.library if spec else None


__all__ = ["KIND_SPECS", "LIBRARY_LABELS", "KindSpec", "library_of"]
