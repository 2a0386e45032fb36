"""Reports from the results database only: best-configuration tables and GFlop/s plots."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib
import pandas as pd

matplotlib.use("Agg")  # files only; never needs a display
import matplotlib.pyplot as plt  # noqa: E402

from autotune.store import SHAPE_COLUMNS, Store  # noqa: E402

TABLE_FORMATS = ("markdown", "csv")
BEST_COLUMNS = (
    "device",
    "family",
    *SHAPE_COLUMNS,
    "config",
    "time_ms",
    "gflops",
    "registers",
    "smem_bytes",
    "evaluations",
    "failures",
    "shape",
)
TIME_DIGITS = 4  # significant digits: CUDA-event timings are not more precise than that
GFLOPS_DECIMALS = 1


class ReportError(RuntimeError):
    """A report that cannot be made (nothing to show, an unknown format)."""


def best_table(store: Store, device: str | None = None, family: str | None = None) -> pd.DataFrame:
    """The best configuration per (device, family, shape), rounded for reading."""
    df = store.best(device, family).rename(columns={"problem_key": "shape"})
    df["time_ms"] = df["time_ms"].map(_significant)
    df["gflops"] = df["gflops"].astype(float).round(GFLOPS_DECIMALS)
    for name in ("registers", "smem_bytes"):
        df[name] = df[name].astype("Int64")  # missing resource reports stay empty, not NaN
    return df[list(BEST_COLUMNS)]


def format_table(df: pd.DataFrame, fmt: str) -> str:
    """A table as GitHub markdown (no tabulate needed) or CSV."""
    if fmt == "csv":
        return df.to_csv(index=False)
    if fmt == "markdown":
        return _markdown(df)
    raise ReportError(f"unknown table format {fmt!r} (expected {' or '.join(TABLE_FORMATS)})")


def plot_gflops(
    store: Store,
    path_stem: Path,
    device: str | None = None,
    family: str | None = None,
) -> list[Path]:
    """GFlop/s of the best configuration against problem shape, one line per family and one
    subplot per device; written as PNG and SVG beside path_stem."""
    df = store.best(device, family)
    if df.empty:
        raise ReportError(f"no successful evaluations stored{_scope(device, family)}")
    devices = sorted(df["device"].unique())
    widest = max(df[df["device"] == name]["problem_key"].nunique() for name in devices)
    fig, axes = plt.subplots(
        len(devices),
        1,
        figsize=(max(6.0, 0.6 * widest + 3.0), 4.8 * len(devices)),
        squeeze=False,
    )
    try:
        # One colour per family in every subplot, so devices compare at a glance.
        colours = {f: f"C{i % 10}" for i, f in enumerate(sorted(df["family"].unique()))}
        for ax, name in zip(axes[:, 0], devices, strict=True):
            _plot_device(ax, df[df["device"] == name], name, colours)
        fig.tight_layout()
        path_stem = Path(path_stem)
        path_stem.parent.mkdir(parents=True, exist_ok=True)
        paths = [path_stem.with_suffix(".png"), path_stem.with_suffix(".svg")]
        # Text stays text in the SVG: searchable, editable, and a fraction of the size.
        with plt.rc_context({"svg.fonttype": "none"}):
            for path in paths:
                fig.savefig(path, dpi=150)
    finally:
        plt.close(fig)
    return paths


def _plot_device(ax: plt.Axes, df: pd.DataFrame, device: str, colours: dict[str, str]) -> None:
    order = df.sort_values(["N", "K", "C", "F", "B", "stride"])["problem_key"].drop_duplicates()
    position = {key: i for i, key in enumerate(order)}
    for family, rows in df.groupby("family", sort=True):
        rows = rows.assign(x=rows["problem_key"].map(position)).sort_values("x")
        ax.plot(rows["x"], rows["gflops"], marker="o", color=colours[family], label=str(family))
    ax.set_xticks(range(len(order)))
    ax.set_xticklabels(list(order), rotation=45, ha="right", fontsize=8)
    ax.set_xlabel("problem shape (N, K, C, F)")
    ax.set_ylabel("GFlop/s")
    ax.set_ylim(0, 1.1 * float(df["gflops"].max()))  # room above the highest point
    ax.set_title(f"Best configuration per shape on {device}")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(title="family")


def _scope(device: str | None, family: str | None) -> str:
    parts = []
    if device is not None:
        parts.append(f"device {device!r}")
    if family is not None:
        parts.append(f"family {family!r}")
    return " for " + " and ".join(parts) if parts else ""


def _significant(value: object) -> float | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(f"{float(value):.{TIME_DIGITS}g}")


def _markdown(df: pd.DataFrame) -> str:
    header = [str(c) for c in df.columns]
    numeric = [pd.api.types.is_numeric_dtype(df[c]) for c in df.columns]
    rows = [[_cell(v) for v in row] for row in df.itertuples(index=False, name=None)]
    widths = [max([len(h), 3, *(len(r[i]) for r in rows)]) for i, h in enumerate(header)]

    def line(cells: list[str]) -> str:
        padded = [
            c.rjust(w) if right else c.ljust(w)
            for c, w, right in zip(cells, widths, numeric, strict=True)
        ]
        return "| " + " | ".join(padded) + " |"

    separator = [
        "-" * (w - 1) + ":" if right else "-" * w for w, right in zip(widths, numeric, strict=True)
    ]
    return "\n".join([line(header), line(separator), *(line(r) for r in rows)]) + "\n"


def _cell(value: object) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return ""
    # A pipe would end the cell and a newline the row.
    return str(value).replace("|", "\\|").replace("\n", " ")
