"""REPORT.md's seed experiments: each paper's figures beside ours (Chen et al.'s in chen.py)."""

from __future__ import annotations

import math

import pandas as pd

from autotune.families import FAMILIES
from autotune.reports.chen import bank_width_section, fig7_section, fig8_section
from autotune.reports.papers import FC_TIME_SAVED_PCT, MAXDNN_TABLE1
from autotune.reports.tables import best_table, markdown_table, maxdnn_table1
from autotune.reports.views import FMA_PEAK, device_ceilings, named_layers
from autotune.store import Store

SEED_HEADING = "Seed experiments: our {label} figures beside the papers'"
# Efficiency counts the direct convolution's FLOPs; an FFT does fewer arithmetic operations.
FFT_NOTE = (
    "Above 100%: where cuDNN's own search picked an FFT algorithm (complex-FP32 GEMMs between "
    "forward and inverse transforms), it performs fewer arithmetic operations than the direct "
    "convolution whose FLOPs are counted, so its effective GFlop/s can exceed the FMA peak. Its "
    "output still passed the same 1e-5 check against the float64 reference."
)


def seed_sections(store: Store, devices: list[str]) -> list[str]:
    """The seed experiments, paper by paper, each beside our figures on every device."""
    label = "/".join(dict.fromkeys(_short_name(d) for d in devices))
    return [
        f"## {SEED_HEADING.format(label=label)}\n",
        fig7_section(store, devices),
        fig8_section(store, devices),
        bank_width_section(store, devices),
        _maxdnn_seed_section(store, devices),
        _fc_seed_section(store, devices),
    ]


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
        parts.append(f"On {dev}:\n\n" + markdown_table(pd.DataFrame(rows)))
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
        parts.append(f"On {dev}:\n\n" + markdown_table(df))
        missing = int(df["sgemm GFlop/s"].isna().sum())
        if missing:
            parts.append(
                f"{missing} of {len(df)} shapes have no successful sgemm result stored "
                "(`autotune run --family sgemm` tunes them).\n"
            )
    return "\n".join(parts)


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


def _short_name(device: str) -> str:
    words = device.removeprefix("NVIDIA ").split()
    return words[0] if words else device
