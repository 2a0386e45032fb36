"""Chen et al.'s experiments (Fig. 7, Fig. 8 and Table 1, bank width) beside ours, for REPORT.md."""

from __future__ import annotations

import json
import math

import pandas as pd

from autotune.families import FAMILIES
from autotune.model.shapes import named_shapes
from autotune.reports.papers import (
    CHEN_BANK_LOSS_PCT,
    CHEN_FIG7_MEAN,
    CHEN_FIG7_PER_K,
    CHEN_FIG8_MEAN,
    CHEN_FIG8_PER_K,
    CHEN_TABLE1,
    CHEN_TABLE1_K,
)
from autotune.reports.tables import algorithm_label, config_text, markdown_table
from autotune.reports.views import cudnn_baselines, geometric_mean
from autotune.store import Store

# Chen's tunables in their Table 1 order, then the ones this implementation adds.
CHEN_GENERAL_PAPER_PARAMS = tuple(CHEN_TABLE1)
CHEN_GENERAL_OUR_PARAMS = ("VEC", "CSPLIT", "PREFETCH")


def fig7_section(store: Store, devices: list[str]) -> str:
    """Fig. 7: the special case (C = 1) against cuDNN, the paper's speedups beside ours."""
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


def fig8_section(store: Store, devices: list[str]) -> str:
    """Fig. 8 and Table 1: the general case against cuDNN, and its best configurations."""
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
        "hardware peak. Their Table 1 (best configuration per filter size):\n\n"
        + markdown_table(table)
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


def bank_width_section(store: Store, devices: list[str]) -> str:
    """Fig. 7b: what computing on single floats rather than float2 cost the 3x3 kernel."""
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
                "config": config_text(ours["config"]) if ours is not None else None,
                "cuDNN GFlop/s": _round(theirs, "gflops"),
                "cuDNN algorithm": algorithm_label(theirs["algorithm"])
                if theirs is not None
                else None,
                "speedup": round(speedup, 2),
            }
        )
    df = pd.DataFrame(rows)
    parts = [f"\nOn {dev}:\n", markdown_table(df.drop(columns="K"))]
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
        + markdown_table(table)
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
    parts = [f"\nOn {dev}:\n", markdown_table(df.drop(columns=["K", "N", "F"]))]
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


def _round(row: pd.Series | None, column: str) -> float:
    return math.nan if row is None else round(float(row[column]), 1)


def _sig(value: float) -> float:
    return value if math.isnan(value) else float(f"{value:.4g}")


def _ratio_text(value: float, percent: bool, paper: bool = False) -> str:
    if percent:
        return f"{100 * (value - 1):+.1f}%" if not paper else f"+{value}%"
    return f"{value:.2f}x" if not paper else f"{value}x"
