"""REPORT.md: the tables and plots of a results database beside the seed papers' figures."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from autotune.families import FAMILIES
from autotune.model.shapes import named_shapes
from autotune.reports.plots import plot_gflops, plot_roofline, plot_speedup
from autotune.reports.tables import (
    CHEN_COLUMNS,
    algorithm_label,
    best_table,
    chen_table1,
    format_table,
    maxdnn_table1,
)
from autotune.reports.views import (
    COPY_BANDWIDTH,
    FMA_PEAK,
    SGEMM,
    ReportError,
    cudnn_baselines,
    device_ceilings,
    geometric_mean,
    named_layers,
)
from autotune.store.database import Store

REPORT_NAME = "REPORT.md"
IMAGE_DIR = "report"  # beside REPORT.md, referenced with relative paths
# Families the project plans (issue 3) but that may not be registered yet.
PLANNED_FAMILIES = (
    "chen_special",
    "chen_general",
    "maxdnn",
    "im2col_gemm",
    "implicit_gemm",
    "smem_channels",
    "sgemm",
    "conv3d",
)
CEILING_NAMES = (FMA_PEAK, COPY_BANDWIDTH, SGEMM)

# Figures quoted from the seed papers (000: Chen et al., DAC 2017; 002: Lavin, maxDNN, 2015).
CHEN_FIG7_PER_K = {1: 6.16, 3: 6.43, 5: 2.90}  # average speedup over cuDNN 5.1 per filter size
CHEN_FIG7_MEAN = 5.16
CHEN_FIG8_PER_K = {3: 30.5, 5: 45.3, 7: 30.8}  # average improvement over cuDNN, %
CHEN_FIG8_MEAN = 35.5
CHEN_BANK_LOSS_PCT = 19
CHEN_TABLE1 = {
    "W": (32, 32, 64),
    "H": (4, 8, 4),
    "FTB": (64, 32, 32),
    "WT": (16, 8, 8),
    "FT": (4, 8, 8),
    "CSH": (2, 1, 1),
}
CHEN_TABLE1_K = (3, 5, 7)
# (cuDNN v2 RC1 %, maxDNN %) per layer, GTX 980 (Maxwell GM204), batch 128.
MAXDNN_TABLE1 = {
    ("alexnet", "conv1"): (32.5, 93.4),
    ("alexnet", "conv2"): (46.7, 95.5),
    ("alexnet", "conv3"): (51.5, 95.1),
    ("alexnet", "conv4"): (57.6, 95.0),
    ("alexnet", "conv5"): (55.9, 94.6),
    ("overfeat", "L1"): (39.6, 70.3),
    ("overfeat", "L2"): (74.0, 95.6),
    ("overfeat", "L3"): (54.2, 94.4),
    ("overfeat", "L4"): (62.9, 96.2),
    ("overfeat", "L5"): (63.2, 96.3),
}
SEED_HEADING = "Seed experiments: our {label} figures beside the papers'"
FC_TIME_SAVED_PCT = 99.86  # 001: the GPU GEMM's time saving over the CPU, the report's figure


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
    label = "/".join(dict.fromkeys(_short_name(d) for d in devices))
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
        f"## {SEED_HEADING.format(label=label)}\n",
        _fig7_section(store, devices),
        _fig8_section(store, devices),
        _bank_width_section(store, devices),
        _maxdnn_seed_section(store, devices),
        _fc_seed_section(store, devices),
    ]
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / REPORT_NAME
    path.write_text("\n".join(part.rstrip("\n") + "\n" for part in parts))
    return path


# ---------------------------------------------------------------------------------------------
# Sections


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
    lines = ["## Device and ceilings\n", _md(table)]
    ceilings = store.ceilings()
    ceilings = ceilings[ceilings["device"].isin(devices)]
    if not ceilings.empty:
        view = ceilings[["device", "name", "value", "unit", "detail"]].copy()
        view["value"] = view["value"].astype(float).round(1)
        lines += ["Measured ceilings (the newest of each):\n", _md(view)]
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
    for name in dict.fromkeys([*FAMILIES, *PLANNED_FAMILIES]):
        if name not in FAMILIES:
            rows.append({"family": name, "status": "does not exist yet"})
            continue
        tuned = summary[(summary["family"] == name) & summary["device"].isin(devices)]
        studies = int(tuned["studies"].sum()) if not tuned.empty else 0
        evaluations = int(tuned["evaluations"].sum()) if not tuned.empty else 0
        status = (
            f"{studies} shapes tuned, {evaluations} evaluations"
            if studies
            else "registered, no results stored"
        )
        rows.append({"family": name, "status": status})
    return "## Kernel families\n\n" + _md(pd.DataFrame(rows))


def _best_section(store: Store, device: str | None, devices: list[str]) -> str:
    df = best_table(store, device)
    head = "## Best configuration per shape\n\n"
    if df.empty:
        return head + "No successful evaluation is stored, so there is no best configuration.\n"
    parts = [head]
    conv = df[df["kind"] == "conv2d"]
    if not conv.empty:
        parts.append(_conv2d_best(conv, devices))
    gemm = df[df["kind"] == "gemm"]
    if not gemm.empty:
        parts.append(_gemm_best(gemm, devices))
    conv3d = df[df["kind"] == "conv3d"]
    if not conv3d.empty:
        parts.append(_conv3d_best(conv3d, devices))
    return "\n".join(parts)


def _conv2d_best(df: pd.DataFrame, devices: list[str]) -> str:
    view = pd.DataFrame(
        {
            "device": df["device"],
            "family": df["family"],
            "shape": df["shape"],
            "config": df["config"].map(_config_text),
            "time_ms": df["time_ms"],
            "GFlop/s": df["gflops"],
            "% FMA peak": _percent(df["efficiency"]),
            "cuDNN GFlop/s": df["baseline_gflops"],
            "cuDNN algorithm": df["baseline_algorithm"].map(algorithm_label),
            "speedup": df["speedup"].round(2),
            "GB/s": df["bandwidth_gbs"],
            "% copy bw": _percent(df["bandwidth_fraction"]),
            "bound": df["bound"],
        }
    )
    if len(devices) == 1:
        view = view.drop(columns="device")
    notes = [
        "Speedup is cuDNN's time over ours; GB/s counts the minimum bytes (each input and filter "
        "element read once, each output written once). The full table, with registers, shared "
        "memory and evaluation counts, is `autotune best`.\n"
    ]
    no_base = int(df["baseline_gflops"].isna().sum())
    if no_base:
        notes.append(
            f"cuDNN cells are empty for {no_base} of {len(df)} rows: no successful cuDNN "
            "baseline is stored for those shapes.\n"
        )
    return _md(view) + "\n" + "\n".join(notes)


def _gemm_best(df: pd.DataFrame, devices: list[str]) -> str:
    view = pd.DataFrame(
        {
            "device": df["device"],
            "family": df["family"],
            "M": df["M"],
            "N": df["N"],
            "K": df["K"],
            "config": df["config"].map(_config_text),
            "time_ms": df["time_ms"],
            "GFlop/s": df["gflops"],
            "% FMA peak": _percent(df["efficiency"]),
            "cuBLAS GFlop/s": df["baseline_gflops"],
            "% of cuBLAS": _percent(df["speedup"]),
            "GB/s": df["bandwidth_gbs"],
            "bound": df["bound"],
        }
    )
    if len(devices) == 1:
        view = view.drop(columns="device")
    note = (
        "C[M x N] = A[M x K] @ B[K x N] in FP32; M = 1 is one image through a fully connected "
        "layer (a matrix-vector product, bound by reading B). % of cuBLAS is cuBLAS's time over "
        "ours, cuBLAS SGEMM measured through CuPy with TF32 off.\n"
    )
    no_base = int(df["baseline_gflops"].isna().sum())
    if no_base:
        note += (
            f"\ncuBLAS cells are empty for {no_base} of {len(df)} rows: no successful cuBLAS "
            "baseline is stored for those shapes.\n"
        )
    return "### GEMM (fully connected layers) beside cuBLAS\n\n" + _md(view) + "\n" + note


def _conv3d_best(df: pd.DataFrame, devices: list[str]) -> str:
    view = pd.DataFrame(
        {
            "device": df["device"],
            "family": df["family"],
            "shape": df["shape"],
            "config": df["config"].map(_config_text),
            "time_ms": df["time_ms"],
            "GFlop/s": df["gflops"],
            "% FMA peak": _percent(df["efficiency"]),
            "GB/s": df["bandwidth_gbs"],
            "% copy bw": _percent(df["bandwidth_fraction"]),
            "bound": df["bound"],
        }
    )
    if len(devices) == 1:
        view = view.drop(columns="device")
    note = (
        "Valid single-channel 3D convolution (input D x R x Cc, filter Kd x Kr x Kc). No library "
        "baseline: GB/s counts the input and filter read once and the output written once.\n"
    )
    return "### 3D convolution\n\n" + _md(view) + "\n" + note


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
            f"### {fam} on {dev}\n\n" + _md(pd.DataFrame(rows)) + f"\nWon shapes:\n\n{won}\n"
        )
    return "\n".join(parts)


# Efficiency counts the direct convolution's FLOPs; an FFT does fewer arithmetic operations.
FFT_NOTE = (
    "Above 100%: where cuDNN's own search picked an FFT algorithm (complex-FP32 GEMMs between "
    "forward and inverse transforms), it performs fewer arithmetic operations than the direct "
    "convolution whose FLOPs are counted, so its effective GFlop/s can exceed the FMA peak. Its "
    "output still passed the same 1e-5 check against the float64 reference."
)


def _maxdnn_form_section(store: Store, device: str | None, devices: list[str]) -> str:
    table = maxdnn_table1(store, device)
    view = table[["device", "network", "layer", "shape", "cudnn_algorithm", "cudnn_gflops"]].copy()
    view.columns = ["device", "network", "layer", "shape", "cuDNN algorithm", "cuDNN GFlop/s"]
    view["cuDNN algorithm"] = view["cuDNN algorithm"].map(algorithm_label)
    view["cuDNN % FMA peak"] = _percent(table["cudnn_efficiency"])
    families = [c.removesuffix("_gflops") for c in table.columns[7:] if c.endswith("_gflops")]
    for fam in families:
        view[f"{fam} GFlop/s"] = table[f"{fam}_gflops"]
        view[f"{fam} % FMA peak"] = _percent(table[f"{fam}_efficiency"])
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
        "required FLOPs.\n\n" + _md(view) + ("\n" + " ".join(notes) + "\n" if notes else "")
    )


def _plots_section(store: Store, device: str | None, out_dir: Path) -> str:
    images = out_dir / IMAGE_DIR
    plots = (
        ("GFlop/s per shape, per family, beside cuDNN and the FMA peak", plot_gflops, "gflops"),
        ("Roofline: arithmetic intensity against GFlop/s", plot_roofline, "roofline"),
        ("Speedup over cuDNN per shape", plot_speedup, "speedup"),
    )
    parts = ["## Plots\n"]
    for title, plot, stem in plots:
        parts.append(f"### {title}\n")
        try:
            paths = plot(store, images / stem, device=device)
        except ReportError as err:
            parts.append(f"Not plotted: {err}.\n")
            continue
        png, svg = (p.relative_to(out_dir).as_posix() for p in paths)
        parts.append(f"![{title}]({png})\n\n[SVG]({svg})\n")
    return "\n".join(parts)


def _fig7_section(store: Store, devices: list[str]) -> str:
    per_k = ", ".join(f"{x:.2f}x for {k}x{k}" for k, x in CHEN_FIG7_PER_K.items())
    head = (
        "### Chen et al. Fig. 7: special case (C = 1) against cuDNN\n\n"
        f"**Paper:** on a Kepler K40m against cuDNN 5.1, the special-case kernel averages {per_k}; "
        f"the mean of these three is the quoted **{CHEN_FIG7_MEAN}x**. Their best block was "
        "W = 256, H = 8.\n\n"
        "**Ours:** the best `chen_special` configuration per shape of the `special` set against "
        "cuDNN on the same device; speedup is cuDNN's time over ours.\n"
    )
    return head + "\n".join(
        _against_cudnn(store, dev, "chen_special", "special", CHEN_FIG7_MEAN, percent=False)
        for dev in devices
    )


def _fig8_section(store: Store, devices: list[str]) -> str:
    per_k = ", ".join(f"+{x}% for {k}x{k}" for k, x in CHEN_FIG8_PER_K.items())
    table = pd.DataFrame(
        [
            {"": p, **{f"{k}x{k}": v for k, v in zip(CHEN_TABLE1_K, values, strict=True)}}
            for p, values in CHEN_TABLE1.items()
        ]
    )
    head = (
        "### Chen et al. Fig. 8 and Table 1: general case against cuDNN\n\n"
        f"**Paper:** on the K40m the general-case kernel improves on cuDNN by {per_k}, "
        f"**+{CHEN_FIG8_MEAN}%** on average; its best run reached 2020 GFlop/s, 47% of the "
        "hardware peak. Their Table 1 (best configuration per filter size):\n\n" + _md(table)
    )
    if "chen_general" not in FAMILIES:
        others = store.best()
        others = others[others["device"].isin(devices)]
        keys = {p.key for p in named_shapes("general")}
        tuned = sorted(others[others["problem_key"].isin(keys)]["family"].unique())
        note = (
            f" The `general` set has results only from {', '.join(tuned)}, which is not Chen's "
            "general-case kernel; its comparison with cuDNN is in the tables and plots above."
            if tuned
            else ""
        )
        return head + f"\n**Ours:** not measured: family chen_general does not exist yet.{note}\n"
    return (
        head
        + "\n**Ours:**\n"
        + "\n".join(
            _against_cudnn(store, dev, "chen_general", "general", CHEN_FIG8_MEAN, percent=True)
            + _chen_table1_beside_paper(store, dev)
            + _chen_general_losses(store, dev)
            for dev in devices
        )
    )


# Chen's tunables in their Table 1 order, then the ones this implementation adds.
CHEN_GENERAL_PAPER_PARAMS = ("W", "H", "FTB", "WT", "FT", "CSH")
CHEN_GENERAL_OUR_PARAMS = ("VEC", "CSPLIT", "PREFETCH")


def _chen_table1_beside_paper(store: Store, dev: str) -> str:
    """Per filter size, the best configuration on the largest `general` shape (the paper's
    Table 1 is one configuration per filter size), beside the paper's K40m values."""
    best = store.best(dev, "chen_general").set_index("problem_key")
    shapes = [p for p in named_shapes("general") if p.key in best.index]
    if not shapes:
        return ""
    largest: dict[int, object] = {}
    for p in shapes:
        if p.K not in largest or p.flops > largest[p.K].flops:
            largest[p.K] = p
    rows = []
    for name in (*CHEN_GENERAL_PAPER_PARAMS, *CHEN_GENERAL_OUR_PARAMS):
        row: dict[str, object] = {"": name}
        for k in CHEN_TABLE1_K:
            paper = CHEN_TABLE1.get(name)
            row[f"K40m {k}x{k}"] = paper[CHEN_TABLE1_K.index(k)] if paper else "-"
            if k in largest:
                config = json.loads(best.loc[largest[k].key, "config"])
                row[f"H100 {k}x{k}"] = config.get(name, "-")
        rows.append(row)
    sources = ", ".join(f"{k}x{k}: {p.key}" for k, p in sorted(largest.items()))
    table = pd.DataFrame(rows)
    vec = _count_best(best.loc[[p.key for p in shapes]], "VEC")
    split = _count_best(best.loc[[p.key for p in shapes]], "CSPLIT")
    return (
        f"\nTable 1 on {dev} beside the K40m's (ours from the largest `general` shape per "
        f"filter size, {sources}; `-` where the paper has no such parameter):\n\n"
        + _md(table)
        + "\nWhat moved, and why. Best VEC over the "
        f"{len(shapes)} `general` shapes: {vec}; best CSPLIT: {split}. "
        "The K40m's shared-memory banks are 8 bytes wide, so the paper's matched unit was a "
        "float2; the H100's banks are 4 bytes, so a float already fills one and wider reads "
        "win by issuing fewer shared loads per FMA, not by matching the bank. The K40m gave a "
        "block 48 KB of shared memory and had 15 SMs; the H100 lets a block opt into 227 KB and "
        "has 132 SMs, so the same register tile (FT x WT accumulators per thread) is kept while "
        "the number of blocks, not shared memory, becomes the constraint on small images: a "
        "32 x 32 image with 64 filters makes only a few dozen blocks, which is why CSPLIT "
        "(channels split across the blocks of a cluster, summed through distributed shared "
        "memory, an addition of ours) wins there and is 1 on the large shapes. Both GPUs have "
        "64K 32-bit registers per SM and 255 per thread, so the register tile per thread is "
        "bounded the same way on both.\n"
    )


def _count_best(best: pd.DataFrame, name: str) -> str:
    counts: dict[object, int] = {}
    for text in best["config"]:
        value = json.loads(text).get(name)
        counts[value] = counts.get(value, 0) + 1
    return ", ".join(f"{v} on {n}" for v, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def _chen_general_losses(store: Store, dev: str) -> str:
    """Every measured shape where chen_general is slower than cuDNN, with cuDNN's algorithm."""
    best = store.best(dev, "chen_general").set_index("problem_key")
    base = cudnn_baselines(store, dev).set_index("problem_key")
    losses = []
    measured = 0
    for key in best.index:
        if key not in base.index:
            continue
        measured += 1
        ours, theirs = float(best.loc[key, "time_ms"]), float(base.loc[key, "time_ms"])
        if ours > theirs:
            algorithm = algorithm_label(base.loc[key, "algorithm"])
            losses.append(f"{key} ({theirs / ours:.2f}x, cuDNN {algorithm})")
    if not measured:
        return ""
    if not losses:
        return f"\nchen_general is faster than cuDNN on all {measured} measured shapes.\n"
    fft = sum("FFT" in loss for loss in losses)
    return (
        f"\nWhere chen_general loses to cuDNN ({len(losses)} of {measured} measured shapes, "
        "speedup below 1): "
        + "; ".join(losses)
        + ". "
        + (
            f"{fft} of these are layers where cuDNN runs an FFT algorithm, which performs fewer "
            "multiply-adds than the direct convolution counts, so no direct kernel can match it "
            "there at equal efficiency."
            if fft
            else ""
        )
        + "\n"
    )


def _bank_width_section(store: Store, devices: list[str]) -> str:
    head = (
        "### Chen et al.: matched against unmatched bank width\n\n"
        f"**Paper:** on the K40m, whose shared-memory banks are 8 bytes wide, the 3x3 special-"
        "case kernel computing on single floats (unmatched) lost "
        f"**{CHEN_BANK_LOSS_PCT}%** of the performance of the one computing on float2 "
        "(matched) (Fig. 7b).\n\n"
        "**Ours:** `chen_special`'s VEC is that unit (1 = float, 2 = float2, 4 = float4). Per "
        "shape, the best time among the evaluated VEC = 1 configurations against the best among "
        "VEC >= 2; the loss is 1 - t(VEC >= 2) / t(VEC = 1), so a negative loss means VEC = 1 "
        "was faster. The tuner sampled the space rather than covering it, so each best is the "
        "best of what was evaluated. The paper itself gives 4-byte banks for GPUs other than "
        "Kepler: on the H100 a float already fills a bank, so this comparison measures wider "
        "shared loads and more outputs per thread, not the mismatch the paper removed.\n"
    )
    if "chen_special" not in FAMILIES:
        return head + "\nNot measured: family chen_special does not exist yet.\n"
    return head + "\n".join(_bank_width(store, dev) for dev in devices)


def _maxdnn_seed_section(store: Store, devices: list[str]) -> str:
    head = (
        "### maxDNN Table 1: per-layer efficiency\n\n"
        "**Paper:** on a GTX 980 (Maxwell GM204) at batch 128, cuDNN v2 RC1 against maxDNN, as a "
        "percentage of the theoretical peak (2 FLOPs x 128 cores x 16 SMs x clock), crediting "
        "only the required FLOPs (bias included). **Ours:** percentages of the *measured* FMA "
        "peak, bias not counted (DESIGN section 2).\n"
    )
    if "maxdnn" not in FAMILIES:
        head += "\nThe maxdnn column is not measured: family maxdnn does not exist yet.\n"
    if (maxdnn_table1(store)["cudnn_efficiency"] > 1).any():
        head += "\n" + FFT_NOTE + "\n"
    parts = [head]
    table = maxdnn_table1(store)
    for dev in devices:
        mine = table[table["device"] == dev]
        rows = []
        for row in mine.itertuples(index=False):
            paper_cudnn, paper_maxdnn = MAXDNN_TABLE1[(row.network, row.layer)]
            entry = {
                "network": row.network,
                "layer": row.layer,
                "shape": row.shape,
                "paper cuDNN %": paper_cudnn,
                "paper maxDNN %": paper_maxdnn,
                "our cuDNN %": round(100 * row.cudnn_efficiency, 1),
                "our maxdnn %": math.nan,
            }
            if "maxdnn" in FAMILIES:
                entry["our maxdnn %"] = round(100 * getattr(row, "maxdnn_efficiency", math.nan), 1)
            rows.append(entry)
        parts.append(f"On {dev}:\n\n" + _md(pd.DataFrame(rows)))
        reasons = _efficiency_gaps(store, dev, mine)
        if reasons:
            parts.append("Missing: " + "; ".join(reasons) + ".\n")
    return "\n".join(parts)


def _fc_seed_section(store: Store, devices: list[str]) -> str:
    head = (
        "### Course report (001): fully connected layers as a tiled SGEMM\n\n"
        "**Paper:** on a V100, the report's shared-memory tiled GEMM for AlexNet's fully "
        f"connected layers takes {FC_TIME_SAVED_PCT}% less time than its CPU implementation; it "
        "gives no GFlop/s. **Ours:** the best `sgemm` configuration per shape of the `alexnet_fc` "
        "set (batch 1 and 128, and square 4096 and 8192) against cuBLAS SGEMM on the same "
        "device, TF32 off on both sides.\n"
    )
    if "sgemm" not in FAMILIES:
        return head + "\nNot measured: family sgemm does not exist yet.\n"
    table = best_table(store, family="sgemm", kind="gemm")
    layers = named_layers("alexnet_fc")
    parts = [head]
    for dev in devices:
        mine = table[table["device"] == dev].set_index("shape")
        rows = []
        for name, problem in layers:
            row = mine.loc[problem.key] if problem.key in mine.index else None
            rows.append(
                {
                    "layer": name,
                    "shape": problem.key,
                    "sgemm GFlop/s": math.nan if row is None else row["gflops"],
                    "cuBLAS GFlop/s": math.nan if row is None else row["baseline_gflops"],
                    "% of cuBLAS": math.nan
                    if row is None
                    else round(100 * float(row["speedup"]), 1),
                }
            )
        df = pd.DataFrame(rows)
        parts.append(f"On {dev}:\n\n" + _md(df))
        missing = int(df["sgemm GFlop/s"].isna().sum())
        if missing:
            parts.append(
                f"{missing} of {len(df)} shapes have no successful sgemm result stored "
                "(`autotune run --family sgemm` tunes them).\n"
            )
    return "\n".join(parts)


# ---------------------------------------------------------------------------------------------
# Seed comparisons


def _against_cudnn(
    store: Store, dev: str, family: str, shape_set: str, paper_mean: float, percent: bool
) -> str:
    if family not in FAMILIES:
        return f"\nNot measured: family {family} does not exist yet.\n"
    best = store.best(dev, family).set_index("problem_key")
    base = cudnn_baselines(store, dev).set_index("problem_key")
    rows = []
    for p in sorted(named_shapes(shape_set), key=lambda p: (p.K, p.N, p.C, p.F)):
        ours = best.loc[p.key] if p.key in best.index else None
        theirs = base.loc[p.key] if p.key in base.index else None
        speedup = (
            float(theirs["time_ms"]) / float(ours["time_ms"])
            if ours is not None and theirs is not None
            else math.nan
        )
        rows.append(
            {
                "K": p.K,
                "shape": p.key,
                f"{family} GFlop/s": _round(ours, "gflops"),
                "config": _config_text(ours["config"]) if ours is not None else None,
                "cuDNN GFlop/s": _round(theirs, "gflops"),
                "cuDNN algorithm": algorithm_label(theirs["algorithm"])
                if theirs is not None
                else None,
                "speedup": round(speedup, 2),
            }
        )
    df = pd.DataFrame(rows)
    parts = [f"\nOn {dev}:\n", _md(df.drop(columns="K"))]
    measured = df.dropna(subset=["speedup"])
    no_ours = int(df[f"{family} GFlop/s"].isna().sum())
    no_base = int(df["cuDNN GFlop/s"].isna().sum())
    if no_ours:
        parts.append(f"{no_ours} of {len(df)} shapes have no successful {family} result stored.")
    if measured.empty:
        parts.append(
            f"Not measured: no speedup to put beside the paper's "
            f"{_ratio_text(paper_mean, percent, paper=True)}, because "
            + (
                f"no cuDNN baseline is stored for the `{shape_set}` set on {dev} "
                f"(`autotune baseline --shapes {shape_set}` measures them)."
                if no_base == len(df)
                else f"no shape has both a {family} result and a cuDNN baseline."
            )
        )
        return "\n".join(parts) + "\n"
    if no_base:
        parts.append(f"{no_base} of {len(df)} shapes have no cuDNN baseline stored.")
    lines = []
    per_k = {}
    for k, group in measured.groupby("K", sort=True):
        s = group["speedup"].to_numpy()
        per_k[k] = float(s.mean())
        lines.append(
            f"- {k}x{k} ({len(s)} shapes): arithmetic mean "
            f"{_ratio_text(per_k[k], percent)}, geometric mean "
            f"{_ratio_text(geometric_mean(s), percent)}"
        )
    all_s = measured["speedup"].to_numpy()
    lines.append(
        f"- mean of the per-filter arithmetic means (the paper's statistic): "
        f"**{_ratio_text(sum(per_k.values()) / len(per_k), percent)}** against the paper's "
        f"{_ratio_text(paper_mean, percent, paper=True)}"
    )
    lines.append(
        f"- over all {len(all_s)} shapes: geometric mean "
        f"**{_ratio_text(geometric_mean(all_s), percent)}**, arithmetic mean "
        f"{_ratio_text(float(all_s.mean()), percent)}"
    )
    return "\n".join(parts).rstrip("\n") + "\n\n" + "\n".join(lines) + "\n"


def _bank_width(store: Store, dev: str) -> str:
    history = store.history(dev, "chen_special")
    history = history[(history["status"] == "OK") & history["time_ms"].notna()].copy()
    if history.empty:
        return f"\nOn {dev}: not measured: no successful chen_special evaluation is stored.\n"
    history["VEC"] = history["config"].map(lambda c: json.loads(c).get("VEC"))
    rows = []
    for _, g in history.groupby("problem_key", sort=False):
        narrow, wide = g[g["VEC"] == 1], g[g["VEC"] >= 2]
        t1 = float(narrow["time_ms"].min()) if not narrow.empty else math.nan
        fastest = wide.loc[wide["time_ms"].idxmin()] if not wide.empty else None
        t2 = float(fastest["time_ms"]) if fastest is not None else math.nan
        rows.append(
            {
                "K": int(g["K"].iloc[0]),
                "N": int(g["N"].iloc[0]),
                "F": int(g["F"].iloc[0]),
                "shape": g["problem_key"].iloc[0],
                "VEC=1 evaluated": len(narrow),
                "best VEC=1 ms": _sig(t1),
                "VEC>=2 evaluated": len(wide),
                "best VEC>=2 ms": _sig(t2),
                "its VEC": int(fastest["VEC"]) if fastest is not None else None,
                "loss of VEC=1 %": round(100 * (1 - t2 / t1), 1),
            }
        )
    df = pd.DataFrame(rows).sort_values(["K", "N", "F"])
    df["its VEC"] = df["its VEC"].astype("Int64")
    parts = [f"\nOn {dev}:\n", _md(df.drop(columns=["K", "N", "F"]))]
    both = df.dropna(subset=["loss of VEC=1 %"])
    if both.empty:
        parts.append(
            "Not measured: no shape has successful evaluations with both VEC = 1 and VEC >= 2."
        )
        return "\n".join(parts) + "\n"
    lines = []
    three = both[both["K"] == 3]["loss of VEC=1 %"]
    if not three.empty:
        lines.append(
            f"- 3x3 filters ({len(three)} shapes, the paper's case): mean loss "
            f"**{three.mean():.1f}%** (range {three.min():.1f}% to {three.max():.1f}%), against "
            f"the paper's {CHEN_BANK_LOSS_PCT}%"
        )
    loss = both["loss of VEC=1 %"]
    lines.append(
        f"- all {len(loss)} shapes with both: mean loss {loss.mean():.1f}% "
        f"(range {loss.min():.1f}% to {loss.max():.1f}%)"
    )
    return "\n".join(parts).rstrip("\n") + "\n\n" + "\n".join(lines) + "\n"


def _efficiency_gaps(store: Store, dev: str, rows: pd.DataFrame) -> list[str]:
    reasons = []
    if FMA_PEAK not in device_ceilings(store, dev).get(dev, {}):
        reasons.append(f"our efficiencies need the measured FMA peak, not stored for {dev}")
    no_base = int(rows["cudnn_gflops"].isna().sum())
    if no_base:
        sets = " and ".join(f"`{s}`" for s in ("alexnet", "overfeat"))
        reasons.append(
            f"{no_base} of {len(rows)} layers have no cuDNN baseline stored (the {sets} sets)"
        )
    return reasons


# ---------------------------------------------------------------------------------------------
# Helpers


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


def _short_name(device: str) -> str:
    words = device.removeprefix("NVIDIA ").split()
    return words[0] if words else device


def _config_text(config: object) -> str | None:
    if not isinstance(config, str):
        return None
    return " ".join(f"{k}={v}" for k, v in json.loads(config).items())


def _percent(fractions: pd.Series) -> pd.Series:
    return (fractions.astype(float) * 100).round(1)


def _round(row: pd.Series | None, column: str) -> float:
    return math.nan if row is None else round(float(row[column]), 1)


def _sig(value: float) -> float:
    return value if math.isnan(value) else float(f"{value:.4g}")


def _ratio_text(value: float, percent: bool, paper: bool = False) -> str:
    if percent:
        return f"{100 * (value - 1):+.1f}%" if not paper else f"+{value}%"
    return f"{value:.2f}x" if not paper else f"{value}x"


def _cell(value: object) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value)


def _md(df: pd.DataFrame) -> str:
    return format_table(df, "markdown")


__all__ = ["REPORT_NAME", "write_report"]
