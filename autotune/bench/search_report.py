"""The search benchmark's figures: the summary table, its Markdown page and its plot."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from autotune.bench.kt_search import (
    KT_PREFIX,
    versus_kt,
)
from autotune.bench.scoring import COLUMNS, Case, at_budget, expected_random, p_score
from autotune.strategies import (
    DEFAULT_STRATEGY,
)


def summarise(cases, results, budgets, inner) -> tuple[pd.DataFrame, pd.DataFrame]:
    rows, timing = [], []
    randoms = {
        (ci, b): expected_random(case.fractions(), b)
        for ci, case in enumerate(cases)
        for b in budgets
    }
    grouped: dict[tuple[str, int], list] = {}
    for name, ci, _seed, trajectory, spent, asks in results:
        grouped.setdefault((name, ci), []).append(trajectory)
        timing.append((name, cases[ci].name, spent, asks))
    for (name, ci), trajectories in sorted(grouped.items()):
        for b in budgets:
            f = float(np.mean([at_budget(t, b) for t in trajectories]))
            rows.append(
                {
                    "space": cases[ci].name,
                    "strategy": name,
                    "budget": b,
                    "fraction_of_optimum": f,
                    "p_score": p_score(f, randoms[(ci, b)]),
                    "seeds": len(trajectories),
                    "random_expected": randoms[(ci, b)],
                    "space_size": len(cases[ci].space),
                }
            )
    frame = pd.DataFrame(rows)
    if len(frame):
        overall = (
            frame.groupby(["strategy", "budget"], sort=False)
            .agg(
                fraction_of_optimum=("fraction_of_optimum", "mean"),
                p_score=("p_score", "mean"),
                seeds=("seeds", "min"),
                random_expected=("random_expected", "mean"),
                spaces=("space", "nunique"),
            )
            .reset_index()
        )
        overall.insert(0, "space", "ALL")
        frame = pd.concat([frame, overall], ignore_index=True)
        default = frame[frame["strategy"] == inner].copy()
        default["strategy"] = "default"
        frame = pd.concat([frame, default], ignore_index=True)
    ask = pd.DataFrame(timing, columns=["strategy", "space", "seconds", "asks"])
    runs = ask.groupby("strategy")
    ask = (
        runs.apply(
            lambda g: 1e3 * g["seconds"].sum() / max(1, g["asks"].sum()), include_groups=False
        )
        .rename("ms_per_ask")
        .reset_index()
    )
    # Kernel Tuner's strategies may end a run before the budget on their own (their defaults).
    ask["evaluations_per_run"] = ask["strategy"].map(runs["asks"].mean())
    return frame, ask


# ---------------------------------------------------------------------------------------------
# Output


def write_outputs(
    frame: pd.DataFrame, ask: pd.DataFrame, cases: list[Case], out: Path, meta, stem="search"
):
    out.mkdir(parents=True, exist_ok=True)
    csv = out / f"{stem}.csv"
    frame[COLUMNS].to_csv(csv, index=False, float_format="%.4f")
    md = out / f"{stem}.md"
    md.write_text(markdown(frame, ask, cases, meta))
    ask_csv = out / f"{stem}_ask_ms.csv"
    ask.to_csv(ask_csv, index=False, float_format="%.4f")
    return [csv, md, ask_csv, *plot(frame, out / stem)]


def markdown(frame: pd.DataFrame, ask: pd.DataFrame, cases: list[Case], meta: str) -> str:
    every = frame[frame["space"] == "ALL"]
    budgets = sorted(every["budget"].unique())
    ms = dict(zip(ask["strategy"], ask["ms_per_ask"], strict=True))
    lines = [
        "# Search strategies on the recorded spaces",
        "",
        meta,
        "",
        "Mean fraction of the optimum (optimum time over the best time found) after each budget,",
        "averaged over the spaces, with the mean P score against random search",
        "(P = (f - f_random) / (1 - f_random), f_random the exact expectation of random search at",
        "that budget) in parentheses; ms/ask is the strategy's own time per ask and tell;",
        "evals/run is how many evaluations a run made on average (a strategy that stops before",
        "the largest budget keeps its best at the larger ones).",
        "",
        "| strategy | " + " | ".join(f"{b} evals" for b in budgets) + " | ms/ask | evals/run |",
        "|---|" + "---:|" * (len(budgets) + 2),
    ]
    rnd = every.drop_duplicates("budget").set_index("budget")["random_expected"]
    lines.append("| random (expected) | " + " | ".join(f"{rnd[b]:.3f}" for b in budgets) + " | | |")
    evals = dict(zip(ask["strategy"], ask["evaluations_per_run"], strict=True))
    for name, g in every.groupby("strategy", sort=False):
        g = g.set_index("budget")
        cells = [
            f"{g.loc[b, 'fraction_of_optimum']:.3f} ({g.loc[b, 'p_score']:+.2f})" for b in budgets
        ]
        own = name if name != "default" else DEFAULT_STRATEGY
        cost, used = ms.get(own, math.nan), evals.get(own, math.nan)
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {cost:.2f} | {used:.0f} |")
    lines += versus_kt(frame, DEFAULT_STRATEGY)
    lines += [
        "",
        "## Spaces",
        "",
        "| space | device | valid configs | failures | optimum ms |",
        "|---|---|---:|---:|---:|",
    ]
    for c in cases:
        failures = sum(t is None for t in c.ok.values())
        lines.append(
            f"| {c.name} | {c.device} | {len(c.space)} | {failures} | {c.optimum_ms:.4g} |"
        )
    lines += ["", "## Per space, fraction of the optimum at 50 evaluations", ""]
    at50 = frame[
        (frame["space"] != "ALL") & (frame["budget"] == min(budgets, key=lambda b: abs(b - 50)))
    ]
    if len(at50):
        table = at50.pivot_table(index="space", columns="strategy", values="fraction_of_optimum")
        lines.append("| space | " + " | ".join(table.columns) + " |")
        lines.append("|---|" + "---:|" * len(table.columns))
        for space, row in table.iterrows():
            lines.append(f"| {space} | " + " | ".join(f"{v:.3f}" for v in row) + " |")
    return "\n".join(lines) + "\n"


def plot(frame: pd.DataFrame, stem: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    every = frame[(frame["space"] == "ALL") & (frame["strategy"] != "default")]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    # 20 colours: with more than 10 strategies the default cycle gave two of them one colour.
    colours = plt.get_cmap("tab20").colors
    for i, (name, g) in enumerate(every.groupby("strategy", sort=False)):
        style = "--" if name.startswith(KT_PREFIX) else "-"  # Kernel Tuner's dashed
        ax.plot(
            g["budget"],
            g["fraction_of_optimum"],
            style,
            marker="o",
            label=name,
            color=colours[(2 * i) % 20 + (2 * i) // 20 % 2],
        )
    rnd = every.drop_duplicates("budget")
    ax.plot(rnd["budget"], rnd["random_expected"], "k--", lw=1, label="random (expected)")
    ax.set_xscale("log")
    ax.set_xticks(sorted(every["budget"].unique()))
    ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
    ax.set_xlabel("evaluations")
    ax.set_ylabel("mean fraction of the optimum")
    spaces = int(frame[frame["space"] != "ALL"]["space"].nunique())
    ax.set_title(f"Search strategies over {spaces} recorded spaces")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths = [stem.with_suffix(".png"), stem.with_suffix(".svg")]
    for p in paths:
        fig.savefig(p, dpi=120)
    plt.close(fig)
    return paths
