"""The best-config table beside the libraries and ceilings, Chen's and maxDNN's Table 1 forms."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable

import numpy as np
import pandas as pd

from autotune.families import UnknownFamily, get_family
from autotune.model.kinds import KIND_SPECS
from autotune.model.precision import DEFAULT_DTYPE, DEFAULT_LAYOUT
from autotune.model.problem import KINDS
from autotune.model.quoting import printable
from autotune.model.space import Config
from autotune.reports.views import (
    COPY_BANDWIDTH,
    FMA_PEAK,
    KIND_LIBRARIES,
    ReportError,
    cudnn_baselines,
    device_ceilings,
    library_baselines,
    named_layers,
    of_dtype,
    peak_name,
    problem_series,
    with_precisions,
    with_problems,
)
from autotune.store import SHAPE_COLUMNS, Store

TABLE_FORMATS = ("markdown", "csv")
# From the one kind table: a table's shape columns per kind (a table of several kinds has the
# union).
KIND_COLUMNS = {k: s.columns for k, s in KIND_SPECS.items()}
BEST_COLUMNS = (
    "device",
    "family",
    *SHAPE_COLUMNS,  # for a table of conv2d shapes; other kinds put their own fields here
    "config",
    "time_ms",  # the figure: the median of its measurements (store/repeats.py)
    "gflops",
    "measurements",  # how many time_ms stands on: its evaluation and its repeats
    "arithmetic_gflops",  # the FLOPs the kernel did (a fast algorithm's fewer) over its time
    "registers",
    "smem_bytes",
    "scratch_bytes",  # extra device memory of the plan (im2col's unrolled matrix)
    "evaluations",
    "failures",
    "spread",  # interquartile range of the samples over their median (the measurement's noise)
    "throttled",  # yes: it ran below the top SM clock, dropped or held down; empty: not observed
    "protocol",  # the timing protocol of every time in the row (DESIGN section 2)
    "shape",
    "kind",
    "baseline_library",  # cudnn for conv2d, cublas for gemm, empty for conv3d
    "baseline_gflops",  # the library's OK measurement of the same shape on the same device
    "baseline_algorithm",
    "speedup",  # library time / our time
    "efficiency",  # fraction 0..1 of the measured peak of the dtype's units (FMA or tensor)
    "bandwidth_gbs",  # problem min_bytes / time
    "bandwidth_fraction",  # fraction 0..1 of the measured copy bandwidth
    "bound",  # "memory" or "compute" by the roofline ridge point; empty without ceilings
    # Joules a run (NVML, back to back after the timed runs), ours and the library's: empty
    # where energy was not observed (`autotune run --observe energy`, `autotune baseline ...`).
    "energy_j",
    "baseline_energy_j",
)
CHEN_COLUMNS = ("device", "family", "K", "config", "wins", "shapes", "won_shapes", "mean_gflops")
MAXDNN_SETS = ("alexnet", "overfeat")
TIME_DIGITS = 4  # significant digits: CUDA-event timings are not more precise than that
GFLOPS_DECIMALS = 1
RATIO_DECIMALS = 3  # speedup
FRACTION_DECIMALS = 4  # efficiency, bandwidth fraction: 0.01 % steps


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


# Shown after the shape columns only when some row is not FP32 NCHW (the shape key says it too).
PRECISION_COLUMNS = ("dtype", "layout")


def best_table(
    store: Store,
    device: str | None = None,
    family: str | None = None,
    kind: str | None = None,
    dtype: str | None = None,
) -> pd.DataFrame:
    """The best configuration per (device, family, shape) beside its kind's library (cuDNN for
    conv2d, cuBLAS for gemm; conv3d has none) and the device ceilings, rounded for reading.

    The shape columns are those of the kinds in the table (B, N, K, C, F, stride for conv2d;
    M, N, K for gemm; D, R, Cc, Kd, Kr, Kc for conv3d), empty where a row's kind lacks one.
    dtype and layout columns follow them when some row is not FP32 NCHW (`dtype` keeps the rows
    of one dtype). efficiency and bandwidth_fraction are fractions (0..1) of the measured peak
    of the units the row's dtype uses (the FMA peak for FP32, the dtype's dense tensor-core peak
    otherwise) and of the copy bandwidth; speedup is the library's time over ours, the library
    measured in the same dtype and layout (its rows are keyed by the same problem key). Cells
    without a baseline or a ceiling are empty.
    """
    df = with_precisions(with_problems(of_dtype(store.best(device, family, kind), dtype)))
    df = df.drop(columns=[*SHAPE_COLUMNS, "shape"]).rename(columns={"problem_key": "shape"})
    shape_columns = table_shape_columns(df["kind"])
    for name in shape_columns:
        values = [p.as_dict().get(name) for p in df["problem"]]
        df[name] = pd.array(values, dtype="Int64")
    df["baseline_library"] = df["kind"].map(KIND_LIBRARIES)
    base = library_baselines(store, device)[
        ["device", "library", "problem_key", "time_ms", "gflops", "algorithm", "energy_j"]
    ]
    df = df.merge(
        base.rename(
            columns={
                "library": "baseline_library",
                "problem_key": "shape",
                "time_ms": "baseline_time_ms",
                "gflops": "baseline_gflops",
                "algorithm": "baseline_algorithm",
                "energy_j": "baseline_energy_j",
            }
        ),
        on=["device", "baseline_library", "shape"],
        how="left",
    )
    ceilings = device_ceilings(store, device)
    peak = pd.Series(
        [
            ceilings.get(d, {}).get(peak_name(t), math.nan)
            for d, t in zip(df["device"], df["dtype"], strict=True)
        ],
        index=df.index,
        dtype=float,
    )
    copy = df["device"].map(lambda d: ceilings.get(d, {}).get(COPY_BANDWIDTH, math.nan))
    copy = copy.astype(float)
    time_ms = df["time_ms"].astype(float)
    min_bytes = problem_series(df, "min_bytes")
    # Computed from the unrounded values; rounding comes last.
    df["speedup"] = (df["baseline_time_ms"].astype(float) / time_ms).round(RATIO_DECIMALS)
    df["efficiency"] = (df["gflops"].astype(float) / peak).round(FRACTION_DECIMALS)
    bandwidth = min_bytes / (time_ms * 1e-3) / 1e9
    df["bandwidth_gbs"] = bandwidth.round(GFLOPS_DECIMALS)
    df["bandwidth_fraction"] = (bandwidth / copy).round(FRACTION_DECIMALS)
    intensity = problem_series(df, "flops") / min_bytes
    df["bound"] = bound_of(intensity, peak / copy)
    df["time_ms"] = df["time_ms"].map(_significant)
    df["spread"] = df["spread"].astype(float).round(FRACTION_DECIMALS)
    df["throttled"] = [throttle_mark(v) for v in df["throttled"]]
    for name in ("energy_j", "baseline_energy_j"):
        df[name] = df[name].map(_significant)
    done = [arithmetic_flops(r.family, r.problem, r.config) for r in df.itertuples()]
    df["arithmetic_gflops"] = (pd.Series(done, index=df.index, dtype=float) / time_ms / 1e6).round(
        GFLOPS_DECIMALS
    )
    df["gflops"] = df["gflops"].astype(float).round(GFLOPS_DECIMALS)
    df["baseline_gflops"] = df["baseline_gflops"].astype(float).round(GFLOPS_DECIMALS)
    for name in ("registers", "smem_bytes", "scratch_bytes"):
        df[name] = df[name].astype("Int64")  # missing resource reports stay empty, not NaN
    columns = [c for c in BEST_COLUMNS if c not in SHAPE_COLUMNS]
    default = (df["dtype"] == DEFAULT_DTYPE) & (df["layout"] == DEFAULT_LAYOUT)
    texts = list(PRECISION_COLUMNS) if not default.all() else []
    return df[columns[:2] + list(shape_columns) + texts + columns[2:]]


def observed_columns(df: pd.DataFrame, library: str) -> dict[str, pd.Series]:
    """The readings a report's table of bests adds where they were observed (best_table's
    frame): `throttled` where a best ran held down, and our and the library's joules a run where
    either side's energy was observed (`--observe energy`)."""
    columns = {}
    if (df["throttled"] == "yes").any():
        columns["throttled"] = df["throttled"]
    if df[["energy_j", "baseline_energy_j"]].notna().any().any():
        columns["J a run"] = df["energy_j"]
        if library:
            columns[f"{library} J a run"] = df["baseline_energy_j"]
    return columns


def throttle_mark(value: object) -> str:
    """A stored throttled reading as a table shows it: yes, no, or empty (not observed)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return "yes" if float(value) else "no"


def arithmetic_flops(family: str, problem: object, config: object) -> float:
    """The FLOPs a stored configuration did: its family's count where the family is known and
    says (a fast algorithm does fewer than the direct count), else the problem's."""
    try:
        return get_family(family).arithmetic_flops(problem, Config.from_json(config))
    except (UnknownFamily, KeyError, ValueError, TypeError):
        return float(problem.flops)


def table_shape_columns(kinds: Iterable[str]) -> tuple[str, ...]:
    """The shape columns of a table holding these kinds; conv2d's when it holds none."""
    present = [k for k in KINDS if k in set(kinds)] or ["conv2d"]
    return tuple(dict.fromkeys(name for k in present for name in KIND_COLUMNS[k]))


def chen_table1(
    store: Store, device: str | None = None, family: str | None = "chen_special"
) -> pd.DataFrame:
    """Chen et al.'s Table 1 form: per (device, family, filter size K) the configuration that is
    best on the most stored shapes, one column per tunable, with the shapes it wins and its mean
    GFlop/s over them. Ties go to the higher mean GFlop/s."""
    # The table is per filter size K x K, of FP32 NCHW results (the paper's; other dtypes have
    # their own report sections).
    best = store.best(device, family, kind="conv2d")
    best = with_precisions(best)
    best = best[(best["dtype"] == DEFAULT_DTYPE) & (best["layout"] == DEFAULT_LAYOUT)]
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
        return _printable_text(df).to_csv(index=False)
    if fmt == "markdown":
        return markdown_table(df)
    raise ReportError(f"unknown table format {fmt!r} (expected {' or '.join(TABLE_FORMATS)})")


def bound_of(intensity: pd.Series, ridge: pd.Series) -> pd.Series:
    """'memory' below the ridge point (FLOP/byte), 'compute' at or above it, None without one."""
    labels = np.where(intensity.to_numpy() < ridge.to_numpy(), "memory", "compute")
    return pd.Series(labels, index=intensity.index, dtype=object).where(ridge.notna(), None)


def config_text(config: object) -> str | None:
    """A stored configuration (JSON) as 'W=32 H=4 ...' for a table cell."""
    if not isinstance(config, str):
        return None
    return " ".join(f"{k}={v}" for k, v in json.loads(config).items())


def percent(fractions: pd.Series) -> pd.Series:
    """Fractions (0..1) as percentages with one decimal, for reading."""
    return (fractions.astype(float) * 100).round(1)


def _device_names(store: Store) -> list[str]:
    return list(dict.fromkeys(str(n) for n in store.devices()["name"]))


def _significant(value: object) -> float | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(f"{float(value):.{TIME_DIGITS}g}")


def _printable_text(df: pd.DataFrame) -> pd.DataFrame:
    """The table with every text cell's control characters escaped: a merged campaign file
    may carry anything, and a table goes to a terminal. Lossless for what autotune stores
    (identifiers, shape keys, JSON, which escapes its own)."""
    out = df.copy()
    for name in out.columns:
        if not pd.api.types.is_numeric_dtype(out[name]):
            out[name] = out[name].map(lambda v: printable(v) if isinstance(v, str) else v)
    return out


def markdown_table(df: pd.DataFrame) -> str:
    """A table as GitHub markdown, numbers right-aligned (no tabulate needed)."""
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
    # A pipe would end the cell and a newline the row; other controls are escaped.
    return printable(str(value).replace("\n", " ")).replace("|", "\\|")
