"""REPORT.md's sections per dtype other than FP32: best per layer beside cuDNN in that dtype."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pandas as pd

from autotune.model.parsing import parse_shape
from autotune.model.precision import DEFAULT_DTYPE, DTYPES, precision_of
from autotune.model.problem import ConvProblem
from autotune.model.shapes import shape_set_kinds
from autotune.reports.figures import embedded
from autotune.reports.plots import plot_roofline, plot_speedup
from autotune.reports.tables import (
    best_table,
    config_text,
    markdown_table,
    observed_columns,
    percent,
)
from autotune.reports.views import (
    device_ceilings,
    geometric_mean,
    named_layers,
    peak_label,
    peak_name,
)
from autotune.store import Store


def precision_sections(
    store: Store, device: str | None, devices: list[str], out_dir: Path
) -> list[str]:
    """One section per dtype other than FP32 with 2D-convolution results stored, in the model's
    order; none when the store holds FP32 only."""
    table = best_table(store, device, kind="conv2d")
    if "dtype" not in table.columns:  # every row FP32 NCHW
        return []
    present = [d for d in DTYPES if d != DEFAULT_DTYPE and (table["dtype"] == d).any()]
    return [
        _section(store, table[table["dtype"] == d], d, device, devices, out_dir) for d in present
    ]


def layer_names() -> dict[str, tuple[int, str]]:
    """'alexnet conv2' and the like, with its place in the shape sets' order, per FP32 NCHW key
    of every named layer (grid sets have no layer names), so that a bf16 row of those sizes is
    named and ordered as its layer."""
    names: dict[str, tuple[int, str]] = {}
    for set_name, kind in shape_set_kinds().items():
        if kind != "conv2d":
            continue
        for layer, problem in named_layers(set_name):
            if layer != problem.key and isinstance(problem, ConvProblem):
                names.setdefault(_sizes_key(problem), (len(names), f"{set_name} {layer}"))
    return names


def _sizes_key(problem: ConvProblem) -> str:
    # A fused problem is named as its layer too (its shape key still names the epilogue).
    return dataclasses.replace(problem, dtype=DEFAULT_DTYPE, layout="NCHW", epilogue="").key


def _section(
    store: Store,
    rows: pd.DataFrame,
    dtype: str,
    device: str | None,
    devices: list[str],
    out_dir: Path,
) -> str:
    precision = precision_of(dtype)
    label, peak = precision.label, peak_name(dtype)
    ceilings = device_ceilings(store, device)
    units = "TF32 tensor-core products" if dtype == "tf32" else "tensor-core products"
    storage = "FP32" if precision.storage == "float32" else precision.storage
    parts = [
        f"## {label}: best per layer beside cuDNN in {label}\n",
        f"{label} problems store their tensors in {storage} ({precision.bytes} bytes an "
        f"element) and compute with {units}, accumulating in FP32; a result passes when its "
        f"relative L2 error against the float64 reference over the stored inputs is at most "
        f"{precision.tolerance:g}. cuDNN runs in the same dtype and layout. Percentages are of "
        f"the measured dense {label} tensor-core peak (ceiling `{peak}`).\n",
    ]
    for dev in devices:
        value = ceilings.get(dev, {}).get(peak)
        if value is None:
            parts.append(
                f"No `{peak}` ceiling is stored for {dev}: its percentages are empty and its "
                "roofline has no compute roof.\n"
            )
        else:
            parts.append(f"{peak_label(dtype)} on {dev}: {value:,.0f} GFlop/s.\n")
    parts += [_layers_table(rows, ceilings, peak, label, devices), _summary(rows, label)]
    parts.append(_plots(store, dtype, label, device, out_dir))
    return "\n".join(parts)


def _layers_table(
    rows: pd.DataFrame,
    ceilings: dict[str, dict[str, float]],
    peak: str,
    label: str,
    devices: list[str],
) -> str:
    """Per device and shape the fastest family's best, beside cuDNN's in the same dtype."""
    names = layer_names()
    fastest = (
        rows.assign(_t=rows["time_ms"].astype(float))
        .sort_values(["_t", "family"], kind="stable")
        .drop_duplicates(["device", "shape"])
    )
    # Named layers in their sets' order, then the other shapes in the store's.
    named = [names.get(_sizes_key(parse_shape(k))) for k in fastest["shape"]]
    stored = {key: i for i, key in enumerate(rows["shape"])}
    places = [
        (0, n[0]) if n else (1, stored[k]) for n, k in zip(named, fastest["shape"], strict=True)
    ]
    fastest = fastest.assign(_place=places).sort_values(["device", "_place"], kind="stable")
    peaks = fastest["device"].map(lambda d: ceilings.get(d, {}).get(peak, math.nan)).astype(float)
    view = pd.DataFrame(
        {
            "device": fastest["device"],
            "layer": [names.get(_sizes_key(parse_shape(k)), (0, ""))[1] for k in fastest["shape"]],
            "shape": fastest["shape"],
            "family": fastest["family"],
            "config": fastest["config"].map(config_text),
            "time_ms": fastest["time_ms"],
            "GFlop/s": fastest["gflops"],
            f"% {label} peak": percent(fastest["efficiency"]),
            "cuDNN GFlop/s": fastest["baseline_gflops"],
            f"cuDNN % {label} peak": percent(fastest["baseline_gflops"].astype(float) / peaks),
            "speedup": fastest["speedup"].astype(float).round(2),
            **observed_columns(fastest, "cuDNN"),
        }
    )
    if len(devices) == 1:
        view = view.drop(columns="device")
    if not view["layer"].astype(bool).any():
        view = view.drop(columns="layer")
    note = (
        "Speedup is cuDNN's time over ours, both in "
        f"{label} and the row's layout (the shape key names both).\n"
    )
    missing = int(fastest["baseline_gflops"].isna().sum())
    if missing:
        note += (
            f"\ncuDNN cells are empty for {missing} of {len(fastest)} rows: no successful "
            f"cuDNN {label} baseline is stored for those shapes.\n"
        )
    return markdown_table(view.reset_index(drop=True)) + "\n" + note


def _summary(rows: pd.DataFrame, label: str) -> str:
    """Per device and family: the geometric-mean speedup over cuDNN and the best percentage of
    the peak, with its shape."""
    lines = []
    for (dev, fam), group in rows.groupby(["device", "family"], sort=True):
        speedups = group["speedup"].dropna().astype(float)
        text = f"- {fam} on {dev}: {len(group)} shapes"
        if len(speedups):
            mean = geometric_mean(speedups)
            text += f"; geometric mean {mean:.2f}x cuDNN over {len(speedups)} with a baseline"
        efficiency = group["efficiency"].astype(float)
        if efficiency.notna().any():
            top = group.loc[efficiency.idxmax()]
            text += f"; best {float(top['efficiency']) * 100:.1f}% of the {label} peak"
            text += f" ({top['shape']})"
            if float(top["efficiency"]) > 1:
                # Then the ceiling is a library GEMM's rate (cuBLAS's, off sm_90 or stored
                # before our wgmma loop measured it), a lower bound of what the units do.
                text += ": past the stored peak, which is then not the units' peak"
        lines.append(text)
    return "\n".join(lines) + "\n"


def _plots(store: Store, dtype: str, label: str, device: str | None, out_dir: Path) -> str:
    plots = (
        (
            f"{label} roofline (copy bandwidth and the {label} peak)",
            plot_roofline,
            f"roofline_{dtype}",
        ),
        (f"{label} speedup over cuDNN in {label}", plot_speedup, f"speedup_{dtype}"),
    )
    return "\n".join(embedded(store, out_dir, plots, device, dtype))


__all__ = ["layer_names", "precision_sections"]
