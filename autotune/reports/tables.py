"""Reports from the results database only: best-config, Chen and maxDNN tables; plots."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd

matplotlib.use("Agg")  # files only; never needs a display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from autotune.model.kinds import KIND_SPECS, LIBRARY_LABELS  # noqa: E402
from autotune.model.problem import KINDS, ConvProblem, Problem, problem_from_dict  # noqa: E402
from autotune.model.shapes import SHAPE_SETS_FILE, named_shapes  # noqa: E402
from autotune.store.database import SHAPE_COLUMNS, Store  # noqa: E402

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TABLE_FORMATS = ("markdown", "csv")
BASELINE_LIBRARY = "cudnn"
# From the one kind table: the library each kind is compared with (kinds without one are left
# out), and a table's shape columns per kind (a table of several kinds has the union).
KIND_LIBRARIES = {k: s.library for k, s in KIND_SPECS.items() if s.library}
KIND_COLUMNS = {k: s.columns for k, s in KIND_SPECS.items()}
BEST_COLUMNS = (
    "device",
    "family",
    *SHAPE_COLUMNS,  # for a table of conv2d shapes; other kinds put their own fields here
    "config",
    "time_ms",
    "gflops",
    "registers",
    "smem_bytes",
    "scratch_bytes",  # extra device memory of the plan (im2col's unrolled matrix)
    "evaluations",
    "failures",
    "spread",  # interquartile range of the samples over their median (the measurement's noise)
    "protocol",  # the timing protocol of every time in the row (DESIGN section 2)
    "shape",
    "kind",
    "baseline_library",  # cudnn for conv2d, cublas for gemm, empty for conv3d
    "baseline_gflops",  # the library's OK measurement of the same shape on the same device
    "baseline_algorithm",
    "speedup",  # library time / our time
    "efficiency",  # fraction 0..1 of the device's measured FMA peak
    "bandwidth_gbs",  # problem min_bytes / time
    "bandwidth_fraction",  # fraction 0..1 of the measured copy bandwidth
    "bound",  # "memory" or "compute" by the roofline ridge point; empty without ceilings
)
CHEN_COLUMNS = ("device", "family", "K", "config", "wins", "shapes", "won_shapes", "mean_gflops")
MAXDNN_SETS = ("alexnet", "overfeat")
TIME_DIGITS = 4  # significant digits: CUDA-event timings are not more precise than that
GFLOPS_DECIMALS = 1
RATIO_DECIMALS = 3  # speedup
FRACTION_DECIMALS = 4  # efficiency, bandwidth fraction: 0.01 % steps
FMA_PEAK, COPY_BANDWIDTH, SGEMM = "fma_peak", "copy_bandwidth", "sgemm"
CUDNN_COLOUR = "0.25"
PEAK_COLOUR = "C3"


class ReportError(RuntimeError):
    """A report that cannot be made (nothing to show, an unknown format)."""


# ---------------------------------------------------------------------------------------------
# Tables


# What the kernel names a library launched say about its algorithm, most telling first.
_ALGORITHM_MARKERS = (
    ("fft", "FFT"),
    ("winograd", "Winograd"),
    ("implicit_gemm", "implicit GEMM"),
    ("implicit_convolve_sgemm", "implicit GEMM"),
    ("precomp", "implicit GEMM (precomputed)"),
    ("direct", "direct"),
    ("gemm", "GEMM"),
)


def algorithm_label(kernels: object) -> str:
    """A short name for a baseline's algorithm, from the kernel names stored with it (the full
    list stays in the database and the CSV)."""
    if not isinstance(kernels, str) or not kernels:
        return ""
    text = kernels.lower()
    return next((label for marker, label in _ALGORITHM_MARKERS if marker in text), "other")


def best_table(
    store: Store,
    device: str | None = None,
    family: str | None = None,
    kind: str | None = None,
) -> pd.DataFrame:
    """The best configuration per (device, family, shape) beside its kind's library (cuDNN for
    conv2d, cuBLAS for gemm; conv3d has none) and the device ceilings, rounded for reading.

    The shape columns are those of the kinds in the table (B, N, K, C, F, stride for conv2d;
    M, N, K for gemm; D, R, Cc, Kd, Kr, Kc for conv3d), empty where a row's kind lacks one.
    efficiency and bandwidth_fraction are fractions (0..1) of the measured FMA peak and copy
    bandwidth; speedup is the library's time over ours. Cells without a baseline or a ceiling
    are empty.
    """
    df = with_problems(store.best(device, family, kind))
    df = df.drop(columns=[*SHAPE_COLUMNS, "shape"]).rename(columns={"problem_key": "shape"})
    shape_columns = table_shape_columns(df["kind"])
    for name in shape_columns:
        values = [p.as_dict().get(name) for p in df["problem"]]
        df[name] = pd.array(values, dtype="Int64")
    df["baseline_library"] = df["kind"].map(KIND_LIBRARIES)
    base = library_baselines(store, device)[
        ["device", "library", "problem_key", "time_ms", "gflops", "algorithm"]
    ]
    df = df.merge(
        base.rename(
            columns={
                "library": "baseline_library",
                "problem_key": "shape",
                "time_ms": "baseline_time_ms",
                "gflops": "baseline_gflops",
                "algorithm": "baseline_algorithm",
            }
        ),
        on=["device", "baseline_library", "shape"],
        how="left",
    )
    ceilings = device_ceilings(store, device)
    fma = df["device"].map(lambda d: ceilings.get(d, {}).get(FMA_PEAK, math.nan)).astype(float)
    copy = df["device"].map(lambda d: ceilings.get(d, {}).get(COPY_BANDWIDTH, math.nan))
    copy = copy.astype(float)
    time_ms = df["time_ms"].astype(float)
    min_bytes = _problem_series(df, "min_bytes")
    # Computed from the unrounded values; rounding comes last.
    df["speedup"] = (df["baseline_time_ms"].astype(float) / time_ms).round(RATIO_DECIMALS)
    df["efficiency"] = (df["gflops"].astype(float) / fma).round(FRACTION_DECIMALS)
    bandwidth = min_bytes / (time_ms * 1e-3) / 1e9
    df["bandwidth_gbs"] = bandwidth.round(GFLOPS_DECIMALS)
    df["bandwidth_fraction"] = (bandwidth / copy).round(FRACTION_DECIMALS)
    intensity = _problem_series(df, "flops") / min_bytes
    df["bound"] = bound_of(intensity, fma / copy)
    df["time_ms"] = df["time_ms"].map(_significant)
    df["spread"] = df["spread"].astype(float).round(FRACTION_DECIMALS)
    df["gflops"] = df["gflops"].astype(float).round(GFLOPS_DECIMALS)
    df["baseline_gflops"] = df["baseline_gflops"].astype(float).round(GFLOPS_DECIMALS)
    for name in ("registers", "smem_bytes", "scratch_bytes"):
        df[name] = df[name].astype("Int64")  # missing resource reports stay empty, not NaN
    columns = [c for c in BEST_COLUMNS if c not in SHAPE_COLUMNS]
    return df[columns[:2] + list(shape_columns) + columns[2:]]


def table_shape_columns(kinds: Iterable[str]) -> tuple[str, ...]:
    """The shape columns of a table holding these kinds; conv2d's when it holds none."""
    present = [k for k in KINDS if k in set(kinds)] or ["conv2d"]
    return tuple(dict.fromkeys(name for k in present for name in KIND_COLUMNS[k]))


def with_problems(df: pd.DataFrame) -> pd.DataFrame:
    """A store frame (best, baselines) with a `problem` column: each row's problem object."""
    df = df.copy()
    df["problem"] = [problem_of(r) for r in df.itertuples(index=False)]
    return df


def chen_table1(
    store: Store, device: str | None = None, family: str | None = "chen_special"
) -> pd.DataFrame:
    """Chen et al.'s Table 1 form: per (device, family, filter size K) the configuration that is
    best on the most stored shapes, one column per tunable, with the shapes it wins and its mean
    GFlop/s over them. Ties go to the higher mean GFlop/s."""
    best = store.best(device, family, kind="conv2d")  # the table is per filter size K x K
    rows: list[dict[str, object]] = []
    integral: dict[str, bool] = {}  # tunables in first-seen order: are all their values ints?
    for (dev, fam, k), group in best.groupby(["device", "family", "K"], sort=True):
        ranked = (
            group.groupby("config")["gflops"]
            .agg(wins="size", mean_gflops="mean")
            .reset_index()
            .sort_values(["wins", "mean_gflops", "config"], ascending=[False, False, True])
        )
        top = ranked.iloc[0]
        won = group[group["config"] == top["config"]]
        values = json.loads(top["config"])
        for name, value in values.items():
            is_int = isinstance(value, int) and not isinstance(value, bool)
            integral[name] = integral.get(name, True) and is_int
        rows.append(
            {
                "device": dev,
                "family": fam,
                "K": int(k),
                **values,
                "config": top["config"],
                "wins": int(top["wins"]),
                "shapes": len(group),
                "won_shapes": "; ".join(won["problem_key"]),
                "mean_gflops": round(float(top["mean_gflops"]), GFLOPS_DECIMALS),
            }
        )
    columns = ["device", "family", "K", *integral, *CHEN_COLUMNS[3:]]
    df = pd.DataFrame(rows, columns=columns)
    for name, is_int in integral.items():
        if is_int:
            df[name] = df[name].astype("Int64")  # a tunable another family lacks stays empty
    return df


def maxdnn_table1(
    store: Store, device: str | None = None, family: str | None = None
) -> pd.DataFrame:
    """maxDNN's Table 1 form: one row per layer of the alexnet and overfeat sets and device, with
    cuDNN's and every family's best GFlop/s and efficiency (fraction of the measured FMA peak).
    Layers without a measurement keep empty cells."""
    layers = [(net, name, p) for net in MAXDNN_SETS for name, p in named_layers(net)]
    keys = {p.key for _, _, p in layers}
    best = store.best(device, family)
    best = best[best["problem_key"].isin(keys)]
    base = cudnn_baselines(store, device)
    base = base[base["problem_key"].isin(keys)]
    ceilings = device_ceilings(store, device)
    devices = [device] if device is not None else _device_names(store) or [None]
    families = sorted(best["family"].unique())
    ours = best.set_index(["device", "family", "problem_key"])["gflops"].to_dict()
    theirs = base.set_index(["device", "problem_key"])[["gflops", "algorithm"]].to_dict("index")
    rows = []
    for dev in devices:
        peak = ceilings.get(dev, {}).get(FMA_PEAK, math.nan) if dev is not None else math.nan
        for net, name, problem in layers:
            cudnn = theirs.get((dev, problem.key), {})
            row: dict[str, object] = {
                "device": dev,
                "network": net,
                "layer": name,
                "shape": problem.key,
                "cudnn_algorithm": cudnn.get("algorithm"),
                "cudnn_gflops": cudnn.get("gflops", math.nan),
                "cudnn_efficiency": cudnn.get("gflops", math.nan) / peak,
            }
            for fam in families:
                gflops = ours.get((dev, fam, problem.key), math.nan)
                row[f"{fam}_gflops"] = gflops
                row[f"{fam}_efficiency"] = gflops / peak
            rows.append(row)
    columns = ["device", "network", "layer", "shape", "cudnn_algorithm"]
    columns += ["cudnn_gflops", "cudnn_efficiency"]
    columns += [f"{fam}_{what}" for fam in families for what in ("gflops", "efficiency")]
    df = pd.DataFrame(rows, columns=columns)
    for name in columns[5:]:
        decimals = GFLOPS_DECIMALS if name.endswith("_gflops") else FRACTION_DECIMALS
        df[name] = df[name].astype(float).round(decimals)
    return df


def format_table(df: pd.DataFrame, fmt: str) -> str:
    """A table as GitHub markdown (no tabulate needed) or CSV."""
    if fmt == "csv":
        return df.to_csv(index=False)
    if fmt == "markdown":
        return _markdown(df)
    raise ReportError(f"unknown table format {fmt!r} (expected {' or '.join(TABLE_FORMATS)})")


# ---------------------------------------------------------------------------------------------
# Store views shared by the tables, the plots and REPORT.md


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


def bound_of(intensity: pd.Series, ridge: pd.Series) -> pd.Series:
    """'memory' below the ridge point (FLOP/byte), 'compute' at or above it, None without one."""
    labels = np.where(intensity.to_numpy() < ridge.to_numpy(), "memory", "compute")
    return pd.Series(labels, index=intensity.index, dtype=object).where(ridge.notna(), None)


def problem_of(row: object) -> Problem:
    """The problem of a table row: from its kind and shape dict (store frames), else from the
    conv2d columns (any row with N, K, C, F, B, stride as attributes)."""
    shape = getattr(row, "shape", None)
    if isinstance(shape, dict):
        return problem_from_dict(shape, str(getattr(row, "kind", "conv2d")))
    return ConvProblem(**{name: int(getattr(row, name)) for name in SHAPE_COLUMNS})


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


def library_label(kind: str) -> str | None:
    """How plots and tables name a kind's baseline library (None: the kind has none)."""
    library = KIND_LIBRARIES.get(kind)
    return LIBRARY_LABELS.get(library, library) if library else None


def geometric_mean(values: Iterable[float]) -> float:
    logs = [math.log(v) for v in values]
    return math.exp(sum(logs) / len(logs)) if logs else math.nan


# ---------------------------------------------------------------------------------------------
# Plots


def plot_gflops(
    store: Store,
    path_stem: Path,
    device: str | None = None,
    family: str | None = None,
    kind: str | None = None,
) -> list[Path]:
    """GFlop/s of the best configuration against problem shape, one panel per (device, family)
    with its kind's library on the same shapes (cuDNN, cuBLAS) and the measured FMA peak; a
    conv3d panel adds the achieved bandwidth on a second axis. Written as PNG and SVG."""
    df = store.best(device, family, kind)
    if df.empty:
        raise ReportError(f"no successful evaluations stored{_scope(device, family, kind)}")
    base = library_baselines(store, device).set_index(["device", "library", "problem_key"])
    base = base["gflops"]
    ceilings = device_ceilings(store, device)
    panels = _panels(df)
    colours = _family_colours(df)
    fig, axes = plt.subplots(
        len(panels), 1, figsize=(_width(panels), 4.6 * len(panels)), squeeze=False
    )
    try:
        for ax, ((dev, fam), rows) in zip(axes[:, 0], panels, strict=True):
            x = np.arange(len(rows))
            kind = str(rows["kind"].iloc[0])
            ax.plot(x, rows["gflops"], marker="o", color=colours[fam], label=f"{fam} (best config)")
            library, label = KIND_LIBRARIES.get(kind), library_label(kind)
            keys = rows["problem_key"]
            lib = np.array([base.get((dev, library, k), math.nan) for k in keys], dtype=float)
            if not np.isnan(lib).all():
                ax.plot(x, lib, marker="s", ls="--", color=CUDNN_COLOUR, label=label)
            top = float(np.nanmax([rows["gflops"].max(), *lib]))
            peak = ceilings.get(dev, {}).get(FMA_PEAK)
            if peak is not None:
                ax.axhline(peak, ls="--", color=PEAK_COLOUR, label=f"FMA peak {peak:,.0f} GFlop/s")
                top = max(top, peak)
            _shape_axis(ax, rows)
            ax.set_ylabel("GFlop/s")
            ax.set_ylim(0, 1.15 * top)  # room above the highest line for the legend
            note = f" (no {label} baseline stored)" if label and np.isnan(lib).all() else ""
            ax.set_title(f"{fam} on {dev}\nbest configuration per shape{note}")
            ax.grid(True, axis="y", alpha=0.3)
            if kind == "conv3d":
                # A stencil is judged by its bandwidth as much as by its FLOPs.
                gbs = _problem_series(rows, "min_bytes") / (rows["time_ms"].astype(float) * 1e-3)
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
                continue
            _legend_outside(ax)
        return _save(fig, path_stem)
    finally:
        plt.close(fig)


def plot_roofline(
    store: Store, path_stem: Path, device: str | None = None, kind: str | None = None
) -> list[Path]:
    """Arithmetic intensity (FLOP per minimum byte) against GFlop/s, log-log, one point per tuned
    shape and family and per library baseline (cuDNN, cuBLAS), under the measured bandwidth and
    compute roofs."""
    best = store.best(device, kind=kind)
    base = library_baselines(store, device)
    if kind is not None:
        base = base[base["kind"] == kind]
    if best.empty and base.empty:
        raise ReportError(
            f"no successful evaluations or baselines stored{_scope(device, None, kind)}"
        )
    ceilings = device_ceilings(store, device)
    devices = sorted(set(best["device"]) | set(base["device"]))
    colours = _family_colours(best)
    fig, axes = plt.subplots(1, len(devices), figsize=(8.0 * len(devices), 5.8), squeeze=False)
    try:
        for ax, dev in zip(axes[0, :], devices, strict=True):
            mine, theirs = best[best["device"] == dev], base[base["device"] == dev]
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
                ax.scatter(
                    x, rows["gflops"], marker=marker, color=CUDNN_COLOUR, label=label, zorder=3
                )
            roofs = _draw_roofs(ax, ceilings.get(dev, {}), min(xs) / 3, max(xs) * 3)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("arithmetic intensity (FLOP/byte, minimum bytes moved)")
            ax.set_ylabel("GFlop/s")
            title = f"Roofline on {dev}"
            ax.set_title(title if roofs else f"{title} (no ceilings stored: roofs not drawn)")
            ax.grid(True, which="major", alpha=0.3)
            ax.legend(loc="lower right", fontsize=8)
        return _save(fig, path_stem)
    finally:
        plt.close(fig)


def plot_speedup(
    store: Store,
    path_stem: Path,
    device: str | None = None,
    family: str | None = None,
    kind: str | None = None,
) -> list[Path]:
    """Speedup over the kind's library (cuDNN for conv2d, cuBLAS for gemm: its time / ours) per
    shape, bars from 1x on a log axis, one panel per (device, family) with its geometric mean;
    shapes without a baseline are left out."""
    best = store.best(device, family, kind)
    best = best.assign(library=best["kind"].map(KIND_LIBRARIES))
    base = library_baselines(store, device)[["device", "library", "problem_key", "time_ms"]]
    df = best.merge(
        base.rename(columns={"time_ms": "cudnn_ms"}), on=["device", "library", "problem_key"]
    )
    if df.empty:
        present = set(best["kind"]) or ({kind} if kind else set(KIND_LIBRARIES))
        kinds = [k for k in KINDS if k in present and k in KIND_LIBRARIES] or ["conv2d"]
        names = " or ".join(str(library_label(k)) for k in kinds)
        raise ReportError(
            f"no {names} baselines stored for the tuned shapes{_scope(device, family, kind)}"
        )
    df["speedup"] = df["cudnn_ms"].astype(float) / df["time_ms"].astype(float)
    panels = _panels(df)
    colours = _family_colours(df)
    fig, axes = plt.subplots(
        len(panels), 1, figsize=(_width(panels), 4.6 * len(panels)), squeeze=False
    )
    try:
        for ax, ((dev, fam), rows) in zip(axes[:, 0], panels, strict=True):
            speedup = rows["speedup"].to_numpy()
            label = library_label(str(rows["kind"].iloc[0]))
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
                f"{fam} against {label} on {dev}\ngeometric mean {mean:.2f}x over {shapes}"
            )
            ax.grid(True, axis="y", alpha=0.3)
            _legend_outside(ax)
        return _save(fig, path_stem)
    finally:
        plt.close(fig)


def _panels(df: pd.DataFrame) -> list[tuple[tuple[str, str], pd.DataFrame]]:
    return [
        ((str(dev), str(fam)), _plot_order(rows))
        for (dev, fam), rows in df.groupby(["device", "family"], sort=True)
    ]


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


def _width(panels: list[tuple[tuple[str, str], pd.DataFrame]]) -> float:
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


def _draw_roofs(ax: plt.Axes, ceilings: dict[str, float], x_lo: float, x_hi: float) -> bool:
    fma, copy = ceilings.get(FMA_PEAK), ceilings.get(COPY_BANDWIDTH)
    if fma is not None and copy is not None:
        ridge = fma / copy
        x_lo, x_hi = min(x_lo, ridge / 3), max(x_hi, ridge * 3)
        ax.plot(
            [x_lo, ridge], [copy * x_lo, fma], color="C7", label=f"copy bandwidth {copy:,.0f} GB/s"
        )
        ax.plot([ridge, x_hi], [fma, fma], color=PEAK_COLOUR, label=f"FMA peak {fma:,.0f} GFlop/s")
        ax.axvline(ridge, color="0.7", ls=":", lw=0.8)
    elif fma is not None:
        ax.axhline(fma, color=PEAK_COLOUR, label=f"FMA peak {fma:,.0f} GFlop/s")
    elif copy is not None:
        ax.plot(
            [x_lo, x_hi], [copy * x_lo, copy * x_hi], color="C7", label=f"copy {copy:,.0f} GB/s"
        )
    sgemm = ceilings.get(SGEMM)
    if sgemm is not None:
        ax.axhline(sgemm, color="C9", ls="--", lw=1, label=f"cuBLAS SGEMM {sgemm:,.0f} GFlop/s")
    return fma is not None or copy is not None


def _intensity(rows: pd.DataFrame) -> np.ndarray:
    return (_problem_series(rows, "flops") / _problem_series(rows, "min_bytes")).to_numpy()


def _problem_series(df: pd.DataFrame, attribute: str) -> pd.Series:
    problems = (
        df["problem"]
        if "problem" in df.columns
        else [problem_of(r) for r in df.itertuples(index=False)]
    )
    values = [float(getattr(p, attribute)) for p in problems]
    return pd.Series(values, index=df.index, dtype=float)


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


def _device_names(store: Store) -> list[str]:
    return list(dict.fromkeys(str(n) for n in store.devices()["name"]))


def _scope(device: str | None, family: str | None, kind: str | None = None) -> str:
    parts = []
    if device is not None:
        parts.append(f"device {device!r}")
    if family is not None:
        parts.append(f"family {family!r}")
    if kind is not None:
        parts.append(f"{kind} shapes")
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
