"""The table of `autotune bench kt-examples` (kt_examples.py): a row per example with both
tools' totals over its tune_kernel calls, how ours compares with Kernel Tuner's (issue 33's
targets), its title, and the markdown and CSV it is written as."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from autotune.bench.kt_examples import Example

KT_VERSION = "1.5.0"
COLUMNS = (
    "example",
    "status",
    "detail",
    "calls",
    "strategy",
    "evaluations",
    "best_ms",
    "wall_s",
    "tuning_s",
    "compile_s",
    "script_s",
    "kt_status",
    "kt_evaluations",
    "kt_best_ms",
    "kt_wall_s",
    "kt_script_s",
    "best_vs_kt",
    "wall_vs_kt",
    "lines_changed",
)
# Issue 33's targets beside Kernel Tuner on the same budget and strategy: each call's best time
# at most 1.05x Kernel Tuner's, the calls' wall time at most Kernel Tuner's.
BEST_TARGET = 1.05
WALL_TARGET = 1.0


def row(example: Example, ours: dict, theirs: dict | None) -> dict:
    """The table's row: totals over the example's tune_kernel calls."""
    detail = ours.get("error", "")
    if ours["status"] == "failed" and example.fails:
        detail = f"{example.fails} ({detail})"
    out: dict = {"example": example.name, "status": ours["status"], "detail": detail}
    out.update(_totals(ours, ""))
    out.update(_script(ours, ""))
    out["strategy"] = ", ".join(dict.fromkeys(_strategy(c) for c in ours["calls"]))
    if theirs is not None:
        out["kt_status"] = theirs["status"]
        if theirs.get("error"):
            out["kt_status"] += f": {theirs['error']}"
        out.update(_totals(theirs, "kt_"))
        out.update(_script(theirs, "kt_"))
        out.update(_against(ours, theirs))
    out["lines_changed"] = ours.get("lines_changed", "")
    return out


def _against(ours: dict, theirs: dict) -> dict:
    """Where both tools ran the same calls: the worst call's best time against Kernel Tuner's
    (the calls in order, one kernel or size each) and the calls' wall time against its."""
    if ours["status"] != "ran" or theirs["status"] != "ran":
        return {}
    mine, kts = ours["calls"], theirs["calls"]
    out = {}
    if mine and len(mine) == len(kts):
        pairs = [(a.get("best_ms"), b.get("best_ms")) for a, b in zip(mine, kts, strict=True)]
        if all(_number(a) and _number(b) for a, b in pairs):
            out["best_vs_kt"] = round(max(a / b for a, b in pairs), 3)
    wall, kt_wall = sum(c["wall_s"] for c in mine), sum(c["wall_s"] for c in kts)
    if kt_wall > 0:
        out["wall_vs_kt"] = round(wall / kt_wall, 3)
    return out


def _number(value) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


def _script(report: dict, prefix: str) -> dict:
    """The process that ran the script, start to exit (the interpreter's start and every import,
    the harness's few included): about what the script's user waits for."""
    process_s = report.get("process_s")
    return {f"{prefix}script_s": round(process_s, 2)} if process_s is not None else {}


def _strategy(call: dict) -> str:
    if call.get("pinned") is not None:
        return f"{call['strategy']} (pinned {call['pinned']})"
    budget = call.get("max_fevals")
    return call["strategy"] + (f" ({budget})" if budget else "")


def _totals(report: dict, prefix: str) -> dict:
    calls = report["calls"]
    if not calls:
        return {}
    best = [c["best_ms"] for c in calls]
    return {
        f"{prefix}calls": len(calls),
        f"{prefix}evaluations": sum(c["evaluations"] for c in calls),
        # One best per call (several calls tune several kernels or sizes), slash-separated.
        f"{prefix}best_ms": " / ".join(_ms(b) for b in best[:3])
        + (" / ..." if len(best) > 3 else ""),
        f"{prefix}wall_s": round(sum(c["wall_s"] for c in calls), 2),
        **{
            f"{prefix}{key}": round(sum(c[key] for c in calls), 2)
            for key in ("tuning_s", "compile_s")
            if all(c.get(key) is not None for c in calls)
        },
    }


def _ms(value: float) -> str:
    return (
        "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.4g}"
    )


def write_table(rows: list[dict], excluded: list[Example], path: Path, title: list[str]) -> None:
    """`path`.csv and `path`.md: the rows, the totals, and the examples out of scope."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.with_suffix(".csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    ran = counts.get("ran", 0)
    lines = [*title, ""]
    others = "".join(f"; {k}: {v}" for k, v in sorted(counts.items()) if k != "ran")
    share = 100 * ran / max(1, len(rows))
    lines.append(
        f"In scope: {len(rows)}; ran: {ran} ({share:.0f}%){others}. Out of scope: {len(excluded)}."
    )
    lines += _against_totals(rows)
    lines += ["", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        cells = [str(r.get(c, "")).replace("|", "\\|").replace("\n", " ") for c in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## Out of scope", "", "| example | why |", "|---|---|"]
    lines += [f"| {e.name} | {e.reason} |" for e in excluded]
    path.with_suffix(".md").write_text("\n".join(lines) + "\n")


def _against_totals(rows: list[dict]) -> list[str]:
    """The targets' counts over the rows both tools ran (best_vs_kt, wall_vs_kt)."""
    best = [float(r["best_vs_kt"]) for r in rows if r.get("best_vs_kt") not in (None, "")]
    wall = [float(r["wall_vs_kt"]) for r in rows if r.get("wall_vs_kt") not in (None, "")]
    if not best and not wall:
        return []
    return [
        "",
        f"Beside Kernel Tuner (best_vs_kt: the worst call's best time over Kernel Tuner's; "
        f"wall_vs_kt: the calls' wall time over Kernel Tuner's): best at most {BEST_TARGET:g}x "
        f"on {sum(b <= BEST_TARGET for b in best)} of {len(best)}, wall at most "
        f"{WALL_TARGET:g}x on {sum(w <= WALL_TARGET for w in wall)} of {len(wall)}.",
    ]


def table_title(synthetic: bool, with_kt: bool, timeout_s: float, max_fevals, kt_lang) -> list[str]:
    stem = "synthetic" if synthetic else "gpu"
    title = [f"# Kernel Tuner's CUDA examples through autotune ({stem})", ""]
    if synthetic:
        title.append(
            "The synthetic worker: the real GPU worker process with a synthetic session inside "
            "(CPU only). Times are not timings: this checks that each script runs through "
            "tune_kernel's mapping, the worker and the tuner."
        )
    else:
        title.append(
            f"On the GPU; Kernel Tuner {KT_VERSION} beside it: {'yes' if with_kt else 'no'}."
        )
    budget = (
        f"{max_fevals} configurations per call: where a script brute-forces, the same "
        f"{max_fevals} for both tools (drawn once with seed 0 from the call's space, "
        "brute-forced: 'pinned'), else max_fevals"
        if max_fevals
        else "each script's own"
    )
    title.append(
        f"Budget: {budget}; time limit {timeout_s:g} s per run. Command: "
        f"`autotune bench kt-examples{' --synthetic' if synthetic else ''}"
        f"{' --kernel-tuner' if with_kt else ''}"
        f"{f' --kt-lang {kt_lang}' if with_kt and kt_lang else ''}"
        f"{f' --max-fevals {max_fevals}' if max_fevals else ''} --timeout {timeout_s:g}`."
    )
    title.append(
        "wall_s: the tune_kernel calls, start to return; tuning_s: of which the tuner ran "
        "(the rest: the GPU's opening, the store, the arguments); compile_s: NVRTC's "
        "compiles, summed over the compile pool; script_s: the process that ran the script, start "
        "to exit (every import included). Each tool's compile cache starts empty and lasts the "
        "suite's run (autotune's cubins; CuPy's kernel cache under Kernel Tuner), as a user's "
        "lasts from one script to the next."
    )
    return title
