"""REPORT.md: the device, the families, the tables and plots, then the seed papers' experiments."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from autotune.families import FAMILIES
from autotune.model.kinds import KIND_SPECS, KindSpec
from autotune.reports.figures import embedded
from autotune.reports.plots import plot_gflops, plot_roofline, plot_speedup
from autotune.reports.precisions import precision_sections
from autotune.reports.seeds import FFT_NOTE, seed_sections
from autotune.reports.tables import (
    CHEN_COLUMNS,
    algorithm_label,
    best_table,
    chen_table1,
    config_text,
    markdown_table,
    maxdnn_table1,
    observed_columns,
    percent,
)
from autotune.reports.views import COPY_BANDWIDTH, FMA_PEAK, SGEMM, ReportError
from autotune.store import Store

REPORT_NAME = "REPORT.md"
CEILING_NAMES = (FMA_PEAK, COPY_BANDWIDTH, SGEMM)
FP32 = "fp32"  # the dtype of the sections before the per-dtype ones (and of the papers)


# What each timing protocol counts (DESIGN section 2), for the report's reader.
PROTOCOLS = {
    1: "one run between two CUDA events on an idle GPU, right after the previous sample: the "
    "host's launch and an L2 still holding the problem are counted",
    2: "a write of a scratch buffer of at least twice the L2 is queued before each sample, and the "
    "host queues its samples ahead, so every sample starts with a cold L2 and the host's launch "
    "is not counted; the median of the samples, with their interquartile range over the median "
    "as the spread",
}


def write_report(store: Store, out_dir: Path, device: str | None = None) -> Path:
    """Write out_dir/REPORT.md and its images (in out_dir/report/); return the REPORT.md path."""
    devices = _devices(store, device)
    out_dir = Path(out_dir)
    parts = [
        f"# Autotuning report: {', '.join(devices)}\n\n"
        f"Generated from the results database `{_database_name(store)}` by "
        "`autotune.reports.markdown.write_report`; "
        "every number below is read from it or quoted from a seed paper. An empty cell means "
        "nothing was measured; the text next to each table says why.\n\n"
        f"Every time, ceiling and baseline here was measured under timing protocol "
        f"{store.protocol} ({PROTOCOLS.get(store.protocol, 'see DESIGN section 2')}); "
        "measurements of other protocols in the database are left out, never mixed in "
        "(`autotune report --protocol N`).\n",
        _device_section(store, devices),
        _families_section(store, devices),
        _best_section(store, device, devices),
        _chen_form_section(store, device),
        _maxdnn_form_section(store, device, devices),
        _plots_section(store, device, out_dir),
        *precision_sections(store, device, devices, out_dir),
        *seed_sections(store, devices),
    ]
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / REPORT_NAME
    path.write_text("\n".join(part.rstrip("\n") + "\n" for part in parts))
    return path


def _device_section(store: Store, devices: list[str]) -> str:
    info = store.devices()
    info = info[info["name"].isin(devices)]
    table = pd.DataFrame(
        {
            "device": info["name"],
            "compute capability": info["compute_capability"],
            "SMs": info["sm_count"],
            "clock (MHz)": info["clock_mhz"],
            "memory (GiB)": (info["memory_bytes"].astype(float) / 2**30).round(1),
            "driver": info["driver_version"],
            "CUDA runtime": info["runtime_version"],
        }
    )
    lines = ["## Device and ceilings\n", markdown_table(table)]
    ceilings = store.ceilings()
    ceilings = ceilings[ceilings["device"].isin(devices)]
    if not ceilings.empty:
        view = ceilings[["device", "name", "value", "unit", "detail"]].copy()
        view["value"] = view["value"].astype(float).round(1)
        lines += ["Measured ceilings (the newest of each):\n", markdown_table(view)]
    for dev in devices:
        have = set(ceilings.loc[ceilings["device"] == dev, "name"])
        missing = [n for n in CEILING_NAMES if n not in have]
        if missing:
            lines.append(
                f"Not measured on {dev}: {', '.join(missing)} (no such ceiling stored). "
                + _ceiling_consequences(missing)
                + "\n"
            )
    return "\n".join(lines)


def _ceiling_consequences(missing: list[str]) -> str:
    effects = []
    if FMA_PEAK in missing:
        effects.append("efficiencies and the roofline's compute roof are left empty")
    if COPY_BANDWIDTH in missing:
        effects.append("bandwidth fractions, the memory/compute bound and the bandwidth roof too")
    if SGEMM in missing:
        effects.append("the SGEMM line is not drawn")
    return ("Consequently " + "; ".join(effects) + ".") if effects else ""


def _families_section(store: Store, devices: list[str]) -> str:
    summary = store.summary()
    rows = []
    for name in FAMILIES:  # the registry itself: every family the package can tune
        tuned = summary[(summary["family"] == name) & summary["device"].isin(devices)]
        studies = int(tuned["studies"].sum()) if not tuned.empty else 0
        evaluations = int(tuned["evaluations"].sum()) if not tuned.empty else 0
        status = (
            f"{studies} shapes tuned, {evaluations} evaluations"
            if studies
            else "registered, no results stored"
        )
        rows.append({"family": name, "status": status})
    return "## Kernel families\n\n" + markdown_table(pd.DataFrame(rows))


# How REPORT.md shows one kind's best configurations. Which fields a shape has and which library
# it is compared with come from the kind table; "{lib}" in a column or the text stands for the
# library's label.
@dataclass(frozen=True, slots=True)
class BestForm:
    heading: str  # empty: the table opens the section (conv2d, the kind of the papers)
    columns: tuple[str, ...]  # after device and family, in reading order
    note: str


BEST_FORMS = {
    "conv2d": BestForm(
        "",
        (
            "shape",
            "config",
            "time_ms",
            "GFlop/s",
            "% FMA peak",
            "{lib} GFlop/s",
            "{lib} algorithm",  # cuDNN chooses among algorithms per shape
            "speedup",
            "GB/s",
            "% copy bw",
            "bound",
        ),
        "Speedup is {lib}'s time over ours; GB/s counts the minimum bytes (each input and filter "
        "element read once, each output written once). The full table, with registers, shared "
        "memory and evaluation counts, is `autotune best`.\n",
    ),
    "gemm": BestForm(
        "### GEMM (fully connected layers) beside {lib}",
        (
            *KIND_SPECS["gemm"].columns,  # M, N and K say more than the key
            "config",
            "time_ms",
            "GFlop/s",
            "% FMA peak",
            "{lib} GFlop/s",
            "% of {lib}",
            "GB/s",
            "bound",
        ),
        "C[M x N] = A[M x K] @ B[K x N] in FP32; M = 1 is one image through a fully connected "
        "layer (a matrix-vector product, bound by reading B). % of {lib} is {lib}'s time over "
        "ours, {lib} SGEMM measured through CuPy with TF32 off.\n",
    ),
    "conv3d": BestForm(
        "### 3D convolution",
        ("shape", "config", "time_ms", "GFlop/s", "% FMA peak", "GB/s", "% copy bw", "bound"),
        "Valid single-channel 3D convolution (input D x R x Cc, filter Kd x Kr x Kc). No library "
        "baseline: GB/s counts the input and filter read once and the output written once.\n",
    ),
}
# Each column of a best section from best_table's frame; any other is its column of that name.
_BEST_CELLS: dict[str, Callable[[pd.DataFrame], pd.Series]] = {
    "config": lambda df: df["config"].map(config_text),
    "GFlop/s": lambda df: df["gflops"],
    "% FMA peak": lambda df: percent(df["efficiency"]),
    "{lib} GFlop/s": lambda df: df["baseline_gflops"],
    "{lib} algorithm": lambda df: df["baseline_algorithm"].map(algorithm_label),
    "speedup": lambda df: df["speedup"].round(2),
    "% of {lib}": lambda df: percent(df["speedup"]),
    "GB/s": lambda df: df["bandwidth_gbs"],
    "% copy bw": lambda df: percent(df["bandwidth_fraction"]),
}


def _best_section(store: Store, device: str | None, devices: list[str]) -> str:
    df = best_table(store, device, dtype=FP32)  # the other dtypes have sections of their own
    head = "## Best configuration per shape\n\n"
    if df.empty:
        return head + "No successful evaluation is stored, so there is no best configuration.\n"
    parts = [head]
    for spec in KIND_SPECS.values():
        rows = df[df["kind"] == spec.name]
        if spec.name in BEST_FORMS and not rows.empty:
            parts.append(_kind_best(rows, spec, devices))
    return "\n".join(parts)


def _kind_best(df: pd.DataFrame, spec: KindSpec, devices: list[str]) -> str:
    form, lib = BEST_FORMS[spec.name], spec.library_label
    cells = {"device": df["device"], "family": df["family"]}
    for name in form.columns:
        cell = _BEST_CELLS.get(name)
        cells[name.format(lib=lib)] = cell(df) if cell else df[name]
    cells.update(observed_columns(df, lib))
    view = pd.DataFrame(cells)
    if len(devices) == 1:
        view = view.drop(columns="device")
    note = form.note.format(lib=lib)
    no_base = int(df["baseline_gflops"].isna().sum())
    if lib and no_base:
        note += (
            f"\n{lib} cells are empty for {no_base} of {len(df)} rows: no successful {lib} "
            "baseline is stored for those shapes.\n"
        )
    heading = form.heading.format(lib=lib) + "\n\n" if form.heading else ""
    return heading + markdown_table(view) + "\n" + note


def _chen_form_section(store: Store, device: str | None) -> str:
    table = chen_table1(store, device, family=None)
    head = (
        "## Best configuration per filter size (the form of Chen et al.'s Table 1)\n\n"
        "For each filter size, the configuration that is best on the most shapes of that size, "
        "the shapes it wins, and its mean GFlop/s over them. Chen et al. tabulate their general-"
        "case kernel this way; here every family with results is tabulated.\n"
    )
    if table.empty:
        return head + "\nNo successful 2D-convolution evaluation is stored.\n"
    parts = [head]
    for (dev, fam), group in table.groupby(["device", "family"], sort=True):
        params = [c for c in group.columns if c not in CHEN_COLUMNS and group[c].notna().any()]
        columns = {f"{r['K']}x{r['K']}": r for r in group.to_dict("records")}
        rows = [{"": p, **{c: _cell(r[p]) for c, r in columns.items()}} for p in params]
        rows.append(
            {"": "shapes won", **{c: f"{r['wins']} of {r['shapes']}" for c, r in columns.items()}}
        )
        rows.append({"": "mean GFlop/s", **{c: str(r["mean_gflops"]) for c, r in columns.items()}})
        won = "\n".join(f"- {c}: {r['won_shapes']}" for c, r in columns.items())
        parts.append(
            f"### {fam} on {dev}\n\n"
            + markdown_table(pd.DataFrame(rows))
            + f"\nWon shapes:\n\n{won}\n"
        )
    return "\n".join(parts)


def _maxdnn_form_section(store: Store, device: str | None, devices: list[str]) -> str:
    table = maxdnn_table1(store, device)
    view = table[["device", "network", "layer", "shape", "cudnn_algorithm", "cudnn_gflops"]].copy()
    view.columns = ["device", "network", "layer", "shape", "cuDNN algorithm", "cuDNN GFlop/s"]
    view["cuDNN algorithm"] = view["cuDNN algorithm"].map(algorithm_label)
    view["cuDNN % FMA peak"] = percent(table["cudnn_efficiency"])
    families = [c.removesuffix("_gflops") for c in table.columns[7:] if c.endswith("_gflops")]
    for fam in families:
        view[f"{fam} GFlop/s"] = table[f"{fam}_gflops"]
        view[f"{fam} % FMA peak"] = percent(table[f"{fam}_efficiency"])
    if len(devices) == 1:
        view = view.drop(columns="device")
    notes = []
    if table["cudnn_gflops"].isna().all():
        notes.append("cuDNN cells are empty: no cuDNN baseline is stored for these layers.")
    if not families:
        notes.append("No family has results on these layers.")
    if table["cudnn_efficiency"].isna().all() and table["cudnn_gflops"].notna().any():
        notes.append("Efficiency cells are empty: no FMA peak is stored for the device.")
    if (table["cudnn_efficiency"] > 1).any():
        notes.append(FFT_NOTE)
    return (
        "## Per-layer efficiency (the form of maxDNN's Table 1)\n\n"
        "AlexNet v2 and Overfeat convolution layers at batch 128 (shape sets `alexnet` and "
        "`overfeat`); efficiency is GFlop/s over the measured FMA peak, counting only the "
        "required FLOPs.\n\n"
        + markdown_table(view)
        + ("\n" + " ".join(notes) + "\n" if notes else "")
    )


def _plots_section(store: Store, device: str | None, out_dir: Path) -> str:
    plots = (
        ("GFlop/s per shape, per family, beside cuDNN and the FMA peak", plot_gflops, "gflops"),
        ("Roofline: arithmetic intensity against GFlop/s", plot_roofline, "roofline"),
        ("Speedup over cuDNN per shape", plot_speedup, "speedup"),
    )
    return "\n".join(["## Plots\n", *embedded(store, out_dir, plots, device, FP32)])


def _devices(store: Store, device: str | None) -> list[str]:
    names = list(dict.fromkeys(str(n) for n in store.devices()["name"]))
    if device is not None:
        if device not in names:
            raise ReportError(f"no device {device!r} in the results database")
        return [device]
    if not names:
        raise ReportError("the results database holds no device: nothing to report")
    return names


def _database_name(store: Store) -> str:
    # A SQLite file by its name only: the report should not carry one machine's directories.
    if store.url.startswith("sqlite:///"):
        return Path(store.url.removeprefix("sqlite:///")).name
    return store.url


def _cell(value: object) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value)


__all__ = ["REPORT_NAME", "write_report"]
