"""Store views shared by the tables, the plots and REPORT.md: baselines, ceilings, problems."""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Iterable

import pandas as pd

from autotune.model.kinds import KIND_SPECS
from autotune.model.parsing import problem_from_dict
from autotune.model.precision import DEFAULT_DTYPE, DEFAULT_LAYOUT, DTYPES, precision_of
from autotune.model.problem import ConvProblem, Problem
from autotune.model.shapes import SHAPE_SETS_FILE, named_shapes
from autotune.store import SHAPE_COLUMNS, Store

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

BASELINE_LIBRARY = "cudnn"
# From the one kind table: the library each kind is compared with (kinds without one are left
# out).
KIND_LIBRARIES = {k: s.library for k, s in KIND_SPECS.items() if s.library}
FMA_PEAK, COPY_BANDWIDTH, SGEMM = "fma_peak", "copy_bandwidth", "sgemm"


class ReportError(RuntimeError):
    """A report that cannot be made (nothing to show, an unknown format)."""


def cudnn_baselines(store: Store, device: str | None = None) -> pd.DataFrame:
    """cuDNN's successful baseline measurements (failed ones are no comparison)."""
    return library_baselines(store, device, BASELINE_LIBRARY)


def library_baselines(
    store: Store, device: str | None = None, library: str | None = None
) -> pd.DataFrame:
    """Successful baseline measurements of one library, or of every library (failed ones are no
    comparison)."""
    df = store.baselines(device, library)
    df = df[(df["status"] == "OK") & df["time_ms"].notna()]
    # One GPU model under two drivers is one device by name; its newest row wins.
    return df.drop_duplicates(["device", "library", "problem_key"], keep="last").reset_index(
        drop=True
    )


def device_ceilings(store: Store, device: str | None = None) -> dict[str, dict[str, float]]:
    """Newest value of each ceiling per device name: {device: {name: value}}."""
    found: dict[str, dict[str, float]] = {}
    for row in store.ceilings(device).itertuples(index=False):
        found.setdefault(str(row.device), {})[str(row.name)] = float(row.value)
    return found


def named_layers(shape_set: str) -> list[tuple[str, ConvProblem]]:
    """The layers of a named shape set with their names from shape_sets.toml."""
    with SHAPE_SETS_FILE.open("rb") as fh:
        spec = tomllib.load(fh)[shape_set]
    names = [str(layer.get("name", "")) for layer in spec.get("layers", [])]
    problems = named_shapes(shape_set)
    if len(names) != len(problems):  # a grid set has no layer names
        names = [p.key for p in problems]
    return list(zip(names, problems, strict=True))


def problem_of(row: object) -> Problem:
    """The problem of a table row: from its kind and shape dict (store frames), else from the
    conv2d columns (any row with N, K, C, F, B, stride as attributes)."""
    shape = getattr(row, "shape", None)
    if isinstance(shape, dict):
        return problem_from_dict(shape, str(getattr(row, "kind", "conv2d")))
    return ConvProblem(**{name: int(getattr(row, name)) for name in SHAPE_COLUMNS})


def with_problems(df: pd.DataFrame) -> pd.DataFrame:
    """A store frame (best, baselines) with a `problem` column: each row's problem object."""
    df = df.copy()
    df["problem"] = [problem_of(r) for r in df.itertuples(index=False)]
    return df


def problem_series(df: pd.DataFrame, attribute: str) -> pd.Series:
    """One attribute of each row's problem (flops, min_bytes) as floats, indexed as the frame."""
    problems = (
        df["problem"]
        if "problem" in df.columns
        else [problem_of(r) for r in df.itertuples(index=False)]
    )
    values = [float(getattr(p, attribute)) for p in problems]
    return pd.Series(values, index=df.index, dtype=float)


def dtype_of(problem: object) -> str:
    """A problem's dtype; kinds without one compute FP32."""
    return str(getattr(problem, "dtype", DEFAULT_DTYPE))


def layout_of(problem: object) -> str:
    return str(getattr(problem, "layout", DEFAULT_LAYOUT))


def with_precisions(df: pd.DataFrame) -> pd.DataFrame:
    """A store frame with `dtype` and `layout` columns, read from each row's problem."""
    df = df.copy()
    problems = (
        df["problem"]
        if "problem" in df.columns
        else [problem_of(r) for r in df.itertuples(index=False)]
    )
    df["dtype"] = pd.Series([dtype_of(p) for p in problems], index=df.index, dtype=object)
    df["layout"] = pd.Series([layout_of(p) for p in problems], index=df.index, dtype=object)
    return df


def of_dtype(df: pd.DataFrame, dtype: str | None) -> pd.DataFrame:
    """The rows of a store frame in one dtype (any layout); all rows for None."""
    if dtype is None or df.empty:
        return df
    keep = [dtype_of(problem_of(r)) == dtype for r in df.itertuples(index=False)]
    return df[keep]


@dataclasses.dataclass(frozen=True)
class Scope:
    """Which stored results a plot shows: all of them, or only one device's, family's, kind's
    (conv2d, gemm, conv3d) or dtype's."""

    device: str | None = None
    family: str | None = None
    kind: str | None = None
    dtype: str | None = None

    def best(self, store: Store) -> pd.DataFrame:
        """The best configuration of every study in scope (Store.best)."""
        return of_dtype(store.best(self.device, self.family, self.kind), self.dtype)

    def __str__(self) -> str:
        """The end of an error: `for device 'H100' and dtype bf16` (after a space), or nothing
        where the scope is every result."""
        parts = [f"device {self.device!r}"] if self.device is not None else []
        parts += [f"family {self.family!r}"] if self.family is not None else []
        parts += [f"{self.kind} shapes"] if self.kind is not None else []
        parts += [f"dtype {self.dtype}"] if self.dtype is not None else []
        return " for " + " and ".join(parts) if parts else ""


EVERY_RESULT = Scope()


def dtypes_present(df: pd.DataFrame) -> list[str]:
    """The dtypes of a store frame's rows, in the model's order."""
    present = {dtype_of(problem_of(r)) for r in df.itertuples(index=False)}
    return [d for d in DTYPES if d in present]


def peak_name(dtype: str) -> str:
    """The ceiling efficiency divides by in this dtype (fma_peak, tc_peak_bf16, ...)."""
    return precision_of(dtype).peak_ceiling


def peak_label(dtype: str) -> str:
    """How plots and tables name that ceiling: 'FMA peak' for FP32, 'BF16 tensor peak'."""
    precision = precision_of(dtype)
    return f"{precision.label} tensor peak" if precision.tensor_core else "FMA peak"


def precision_text(dtype: str, layout: str) -> str:
    """'' for the default FP32 NCHW, else 'BF16 NHWC' (a panel's or a section's qualifier)."""
    if dtype == DEFAULT_DTYPE and layout == DEFAULT_LAYOUT:
        return ""
    return f"{precision_of(dtype).label} {layout}"


def geometric_mean(values: Iterable[float]) -> float:
    logs = [math.log(v) for v in values]
    return math.exp(sum(logs) / len(logs)) if logs else math.nan
