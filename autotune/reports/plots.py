"""Plots from the results database: GFlop/s per shape, the roofline, the speedup over a library."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd

matplotlib.use("Agg")  # files only; never needs a display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from autotune.model.kinds import KIND_SPECS, LIBRARY_LABELS  # noqa: E402
from autotune.model.problem import KINDS  # noqa: E402
from autotune.reports.views import (  # noqa: E402
    BASELINE_LIBRARY,
    COPY_BANDWIDTH,
    EVERY_RESULT,
    FMA_PEAK,
    KIND_LIBRARIES,
    SGEMM,
    ReportError,
    Scope,
    device_ceilings,
    dtype_of,
    dtypes_present,
    geometric_mean,
    layout_of,
    library_baselines,
    of_dtype,
    peak_label,
    peak_name,
    precision_text,
    problem_of,
    problem_series,
)
from autotune.store import Store  # noqa: E402

CUDNN_COLOUR = "0.25"
FMA_DTYPE = "fp32"  # the dtype whose roof is the FMA peak
PEAK_COLOUR = "C3"


def plot_gflops(store: Store, path_stem: Path, scope: Scope = EVERY_RESULT) -> list[Path]:
    """GFlop/s of the best configuration against problem shape, one panel per (device, family,
    dtype and layout) with its kind's library on the same shapes in the same dtype and layout
    (cuDNN, cuBLAS) and the measured peak of the dtype's units (FMA, or the tensor cores'); a
    conv3d panel adds the achieved bandwidth on a second axis. Written as PNG and SVG."""
    df = scope.best(store)
    if df.empty:
        raise ReportError(f"no successful evaluations stored{scope}")
    base = library_baselines(store, scope.device).set_index(["device", "library", "problem_key"])
    base = base["gflops"]
    ceilings = device_ceilings(store, scope.device)
    panels = _panels(df)
    colours = _family_colours(df)

    def draw(ax: plt.Axes, panel) -> None:
        (dev, fam, variant), rows = panel
        x = np.arange(len(rows))
        kind = str(rows["kind"].iloc[0])
        row_dtype = dtype_of(problem_of(next(rows.itertuples(index=False))))
        ax.plot(x, rows["gflops"], marker="o", color=colours[fam], label=f"{fam} (best config)")
        library, label = KIND_LIBRARIES.get(kind), KIND_SPECS[kind].library_label
        keys = rows["problem_key"]
        lib = np.array([base.get((dev, library, k), math.nan) for k in keys], dtype=float)
        if not np.isnan(lib).all():
            ax.plot(x, lib, marker="s", ls="--", color=CUDNN_COLOUR, label=label)
        top = float(np.nanmax([rows["gflops"].max(), *lib]))
        peak = ceilings.get(dev, {}).get(peak_name(row_dtype))
        if peak is not None:
            label_peak = f"{peak_label(row_dtype)} {peak:,.0f} GFlop/s"
            ax.axhline(peak, ls="--", color=PEAK_COLOUR, label=label_peak)
            top = max(top, peak)
        _shape_axis(ax, rows)
        ax.set_ylabel("GFlop/s")
        ax.set_ylim(0, 1.15 * top)  # room above the highest line for the legend
        note = f" (no {label} baseline stored)" if label and np.isnan(lib).all() else ""
        ax.set_title(f"{fam}{_in(variant)} on {dev}\nbest configuration per shape{note}")
        ax.grid(True, axis="y", alpha=0.3)
        if kind == "conv3d":
            # A stencil is judged by its bandwidth as much as by its FLOPs.
            gbs = problem_series(rows, "min_bytes") / (rows["time_ms"].astype(float) * 1e-3)
            twin = ax.twinx()
            twin.plot(x, gbs / 1e9, marker="^", ls=":", color="C8", label="achieved GB/s")
            twin.set_ylabel("GB/s (minimum bytes)")
            twin.set_ylim(0, 1.15 * float((gbs / 1e9).max()))
            handles, labels = ax.get_legend_handles_labels()
            more, more_labels = twin.get_legend_handles_labels()
            ax.legend(
                handles + more,
                labels + more_labels,
                loc="upper left",
                bbox_to_anchor=(1.08, 1.0),
                fontsize=8,
                borderaxespad=0.0,
            )
            return
        _legend_outside(ax)

    return _drawn(panels, draw, path_stem)


def plot_roofline(store: Store, path_stem: Path, scope: Scope = EVERY_RESULT) -> list[Path]:
    """Arithmetic intensity (FLOP per minimum byte, in the dtype's storage size) against GFlop/s,
    log-log, one point per tuned shape and family and per library baseline (cuDNN, cuBLAS),
    under the measured bandwidth roof and the compute roof of the dtype's units (the FMA peak
    for FP32, the dtype's dense tensor-core peak otherwise): one panel per device and dtype
    present, or only the scope's."""
    best = scope.best(store)
    base = of_dtype(library_baselines(store, scope.device), scope.dtype)
    if scope.kind is not None:
        base = base[base["kind"] == scope.kind]
    if scope.family is not None:  # one family's roofline: the libraries only beside its points
        dtypes = dtypes_present(best)
        beside = [dtype_of(problem_of(r)) in dtypes for r in base.itertuples(index=False)]
        base = base[pd.Series(beside, index=base.index, dtype=bool)]
    if best.empty and base.empty:
        raise ReportError(f"no successful evaluations or baselines stored{scope}")
    ceilings = device_ceilings(store, scope.device)
    devices = sorted(set(best["device"]) | set(base["device"]))
    both = pd.concat([best[["device", "kind", "shape"]], base[["device", "kind", "shape"]]])
    panels = [(dev, t) for dev in devices for t in dtypes_present(both[both["device"] == dev])]
    colours = _family_colours(best)
    figure = plt.subplots(1, len(panels), figsize=(8.0 * len(panels), 5.8), squeeze=False)

    def draw(ax: plt.Axes, panel) -> None:
        dev, panel_dtype = panel
        mine = of_dtype(best[best["device"] == dev], panel_dtype)
        theirs = of_dtype(base[base["device"] == dev], panel_dtype)
        xs: list[float] = []
        for fam, rows in mine.groupby("family", sort=True):
            x = _intensity(rows)
            xs += list(x)
            ax.scatter(x, rows["gflops"], color=colours[fam], label=str(fam), zorder=3)
        for library, rows in theirs.groupby("library", sort=True):
            x = _intensity(rows)
            xs += list(x)
            marker = "x" if library == BASELINE_LIBRARY else "+"
            label = LIBRARY_LABELS.get(str(library), str(library))
            ax.scatter(x, rows["gflops"], marker=marker, color=CUDNN_COLOUR, label=label, zorder=3)
        roofs = _draw_roofs(ax, ceilings.get(dev, {}), min(xs) / 3, max(xs) * 3, panel_dtype)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("arithmetic intensity (FLOP/byte, minimum bytes moved)")
        ax.set_ylabel("GFlop/s")
        # FP32 alone keeps its old title; beside another dtype, every panel names its own.
        named = panel_dtype != FMA_DTYPE or len({t for _, t in panels}) > 1
        title = f"Roofline on {dev}" + _in(panel_dtype.upper() if named else "")
        ax.set_title(title if roofs else f"{title} (no ceilings stored: roofs not drawn)")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)

    return _drawn(panels, draw, path_stem, figure)


def plot_speedup(store: Store, path_stem: Path, scope: Scope = EVERY_RESULT) -> list[Path]:
    """Speedup over the kind's library (cuDNN for conv2d, cuBLAS for gemm: its time / ours) per
    shape, the library measured in the same dtype and layout (one problem key), bars from 1x on
    a log axis, one panel per (device, family, dtype and layout) with its geometric mean;
    shapes without a baseline are left out."""
    best = scope.best(store)
    best = best.assign(library=best["kind"].map(KIND_LIBRARIES))
    base = library_baselines(store, scope.device)[["device", "library", "problem_key", "time_ms"]]
    df = best.merge(
        base.rename(columns={"time_ms": "cudnn_ms"}), on=["device", "library", "problem_key"]
    )
    if df.empty:
        present = set(best["kind"]) or ({scope.kind} if scope.kind else set(KIND_LIBRARIES))
        kinds = [k for k in KINDS if k in present and k in KIND_LIBRARIES] or ["conv2d"]
        names = " or ".join(str(KIND_SPECS[k].library_label) for k in kinds)
        raise ReportError(f"no {names} baselines stored for the tuned shapes{scope}")
    df["speedup"] = df["cudnn_ms"].astype(float) / df["time_ms"].astype(float)
    panels = _panels(df)
    colours = _family_colours(df)

    def draw(ax: plt.Axes, panel) -> None:
        (dev, fam, variant), rows = panel
        speedup = rows["speedup"].to_numpy()
        label = KIND_SPECS[str(rows["kind"].iloc[0])].library_label
        x = np.arange(len(rows))
        mean = geometric_mean(speedup)
        # Bars start at 1x, so faster-than-cuDNN points up and slower points down.
        ax.bar(x, speedup - 1.0, bottom=1.0, color=colours[fam], width=0.7, label=str(fam))
        for xi, s in zip(x, speedup, strict=True):
            ax.annotate(
                f"{s:.2f}x",
                (xi, s),
                xytext=(0, 3 if s >= 1 else -3),
                textcoords="offset points",
                ha="center",
                va="bottom" if s >= 1 else "top",
                fontsize=7,
            )
        ax.axhline(1.0, color="black", lw=1, label=f"{label} (1x)")
        ax.axhline(mean, color=PEAK_COLOUR, ls=":", label=f"geometric mean {mean:.2f}x")
        ax.set_yscale("log")
        low, high = min(speedup.min(), 1.0), max(speedup.max(), 1.0)
        ax.set_ylim(low / 1.6, high * 1.6)
        # 1-2-5 steps, so a range within one decade still has labelled ticks.
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        _shape_axis(ax, rows)
        ax.set_ylabel(f"speedup over {label} (time ratio)")
        shapes = f"{len(rows)} shape" + ("s" if len(rows) != 1 else "")
        ax.set_title(
            f"{fam} against {label}{_in(variant)} on {dev}\n"
            f"geometric mean {mean:.2f}x over {shapes}"
        )
        ax.grid(True, axis="y", alpha=0.3)
        _legend_outside(ax)

    return _drawn(panels, draw, path_stem)


def _drawn(panels: list, draw, path_stem: Path, figure=None) -> list[Path]:
    """`draw(ax, panel)` for each panel on its own axes of `figure` (fig, axes; by default one
    panel a row, as wide as the most shapes need), saved as PNG and SVG; closed, also on failure."""
    fig, axes = figure or plt.subplots(
        len(panels), 1, figsize=(_width(panels), 4.6 * len(panels)), squeeze=False
    )
    try:
        for ax, panel in zip(axes.flat, panels, strict=True):
            draw(ax, panel)
        return _save(fig, path_stem)
    finally:
        plt.close(fig)


def shape_label(row: object, with_c: bool = True) -> str:
    """A short tick label: 'N=4096 K=5 F=64' for conv2d (C only when asked, B and stride when
    not 1), 'M=128 N=4096 K=9216' for gemm, '256x128x128 * 5x5x5' for conv3d."""
    p = problem_of(row)
    if p.kind == "gemm":
        return f"M={p.M} N={p.N} K={p.K}"
    if p.kind == "conv3d":
        return f"{p.D}x{p.R}x{p.Cc} * {p.Kd}x{p.Kr}x{p.Kc}"
    parts = [f"N={p.N}", f"K={p.K}"] + ([f"C={p.C}"] if with_c else []) + [f"F={p.F}"]
    if p.B != 1:
        parts.append(f"B={p.B}")
    if p.stride != 1:
        parts.append(f"stride={p.stride}")
    return " ".join(parts)


def _panels(df: pd.DataFrame) -> list[tuple[tuple[str, str, str], pd.DataFrame]]:
    """One panel per device, family and precision ('' for FP32 NCHW, 'BF16 NHWC'), FP32 NCHW
    first: a bf16 point beside an fp32 one of the same sizes would compare two problems."""
    variants = [
        precision_text(dtype_of(p), layout_of(p))
        for p in (problem_of(r) for r in df.itertuples(index=False))
    ]
    df = df.assign(_variant=variants)
    return [
        ((str(dev), str(fam), str(variant)), _plot_order(rows.drop(columns="_variant")))
        for (dev, fam, variant), rows in df.groupby(["device", "family", "_variant"], sort=True)
    ]


def _in(variant: str) -> str:
    return f" in {variant}" if variant else ""


# The x-axis order per kind: conv2d by filter size first, as the papers' figures are; GEMM by
# batch rows M, then N, K; conv3d by filter, then input.
_PLOT_ORDER = {
    "conv2d": ("K", "N", "C", "F", "B", "stride"),
    "gemm": ("M", "N", "K"),
    "conv3d": ("Kd", "Kr", "Kc", "D", "R", "Cc"),
}


def _plot_order(rows: pd.DataFrame) -> pd.DataFrame:
    problems = [problem_of(r) for r in rows.itertuples(index=False)]

    def key(i: int) -> tuple:
        p = problems[i]
        return (p.kind, *(getattr(p, n) for n in _PLOT_ORDER[p.kind]))

    order = sorted(range(len(rows)), key=key)
    return rows.iloc[order].reset_index(drop=True)


def _legend_outside(ax: plt.Axes) -> None:
    # Right of the panel: a legend inside would hide a bar or a point somewhere.
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, borderaxespad=0.0)


def _family_colours(df: pd.DataFrame) -> dict[str, str]:
    # One colour per family in every panel and plot.
    return {f: f"C{i % 10}" for i, f in enumerate(sorted(df["family"].unique()))}


def _width(panels: list[tuple[tuple[str, str, str], pd.DataFrame]]) -> float:
    widest = max(len(rows) for _, rows in panels)
    return max(9.0, 0.5 * widest + 3.0)


def _shape_axis(ax: plt.Axes, rows: pd.DataFrame) -> None:
    problems = [problem_of(r) for r in rows.itertuples(index=False)]
    kind = problems[0].kind if problems else "conv2d"
    with_c = kind == "conv2d" and any(p.C != 1 for p in problems)
    labels = [shape_label(r, with_c) for r in rows.itertuples(index=False)]
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=40, ha="right", fontsize=8)
    ax.set_xlim(-0.6, len(labels) - 0.4)
    if kind == "gemm":
        ax.set_xlabel("problem shape (C[M x N] = A[M x K] @ B[K x N], FP32)")
        return
    if kind == "conv3d":
        ax.set_xlabel("problem shape (input D x R x Cc * filter Kd x Kr x Kc, one channel)")
        return
    # A faint rule between filter sizes, like the sub-figures of Chen's Fig. 7.
    changes = np.flatnonzero(np.diff([p.K for p in problems])) + 0.5
    for x in changes:
        ax.axvline(x, color="0.8", lw=0.8)
    fields = "output N x N, filter K x K" + (", C channels" if with_c else "") + ", F filters"
    ax.set_xlabel(f"problem shape ({fields})")


def _draw_roofs(
    ax: plt.Axes, ceilings: dict[str, float], x_lo: float, x_hi: float, dtype: str = "fp32"
) -> bool:
    """The copy-bandwidth roof (the points' bytes are counted in the dtype's storage size) and
    the compute roof of the dtype's units; the SGEMM line for FP32 only."""
    fma, copy = ceilings.get(peak_name(dtype)), ceilings.get(COPY_BANDWIDTH)
    name = peak_label(dtype)
    if fma is not None and copy is not None:
        ridge = fma / copy
        x_lo, x_hi = min(x_lo, ridge / 3), max(x_hi, ridge * 3)
        ax.plot(
            [x_lo, ridge], [copy * x_lo, fma], color="C7", label=f"copy bandwidth {copy:,.0f} GB/s"
        )
        ax.plot([ridge, x_hi], [fma, fma], color=PEAK_COLOUR, label=f"{name} {fma:,.0f} GFlop/s")
        ax.axvline(ridge, color="0.7", ls=":", lw=0.8)
    elif fma is not None:
        ax.axhline(fma, color=PEAK_COLOUR, label=f"{name} {fma:,.0f} GFlop/s")
    elif copy is not None:
        ax.plot(
            [x_lo, x_hi], [copy * x_lo, copy * x_hi], color="C7", label=f"copy {copy:,.0f} GB/s"
        )
    sgemm = ceilings.get(SGEMM) if peak_name(dtype) == FMA_PEAK else None
    if sgemm is not None:
        ax.axhline(sgemm, color="C9", ls="--", lw=1, label=f"cuBLAS SGEMM {sgemm:,.0f} GFlop/s")
    return fma is not None or copy is not None


def _intensity(rows: pd.DataFrame) -> np.ndarray:
    return (problem_series(rows, "flops") / problem_series(rows, "min_bytes")).to_numpy()


def _save(fig: plt.Figure, path_stem: Path) -> list[Path]:
    fig.tight_layout()
    path_stem = Path(path_stem)
    path_stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [path_stem.with_suffix(".png"), path_stem.with_suffix(".svg")]
    # Text stays text in the SVG: searchable, editable, and a fraction of the size. A fixed
    # hash salt (clip-path ids) and no date: the same data writes the same bytes, so a report
    # regenerated from an unchanged database is no change in git.
    with plt.rc_context({"svg.fonttype": "none", "svg.hashsalt": "autotune"}):
        for path in paths:
            metadata = {"Date": None} if path.suffix == ".svg" else None
            fig.savefig(path, dpi=150, metadata=metadata)
    return paths
