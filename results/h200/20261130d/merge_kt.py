"""Kernel Tuner's whole in-scope CUDA suite as one table, the configurations pinned (both tools
brute-force the same 20 of each call's space, drawn with seed 0): the parts that this session's
calls ran with autotune's code at baee226 (the commits after it, to 53f62e2 and on, changed
results/ only), into results/kernel_tuner_examples/gpu.md and gpu.csv. From the checkout root:
    python3 results/h200/20261130d/merge_kt.py

The parts, later ones replacing earlier rows: call2/kt6 (accuracy, convolution; the call ran out
of time before reduction.py), call3/kt7 (fifteen examples), call4/kt_reduction, and call5/kt_cc
(convolution_correct.py again with 300 s a run, in which Kernel Tuner finished: 99.5 s; in call 2
it ran past 150 s). They ran before the bench compared the tools itself (best_vs_kt, wall_vs_kt),
so the comparison is made here from each part's columns; for an example of more than three calls
(the table keeps three bests), from its logs' per-call bests, which both tools print to 3
decimals."""

import csv
import re
from pathlib import Path

from autotune.bench.kt_examples import classification
from autotune.bench.kt_table import table_title, write_table

HERE = Path(__file__).resolve().parent
PARTS = ["call2/kt6", "call3/kt7", "call4/kt_reduction", "call5/kt_cc"]
OUTPUT = HERE.parents[1] / "kernel_tuner_examples" / "gpu"
OURS_BEST = re.compile(r"^best performing configuration: .*time=([\d.]+)ms")
KT_BEST = "BEST PERFORMING CONFIGURATION FOR OBJECTIVE time:"


def bests(text: str) -> list[float] | None:
    if "..." in text or not text.strip():
        return None
    try:
        return [float(v) for v in text.split(" / ")]
    except ValueError:
        return None


def logged_bests(logs: Path, stem: str) -> tuple[list[float], list[float]]:
    ours = [
        float(m[1])
        for line in (logs / f"{stem}.ours.log").read_text().splitlines()
        if (m := OURS_BEST.match(line))
    ]
    lines = (logs / f"{stem}.kt.log").read_text().splitlines()
    kt = [
        float(re.search(r"time=([\d.]+)ms", lines[i + 1])[1])
        for i, line in enumerate(lines)
        if line.strip() == KT_BEST
    ]
    return ours, kt


def compared(r: dict, logs: Path) -> dict:
    if r["status"] != "ran" or r["kt_status"] != "ran":
        return r
    mine, theirs = bests(r["best_ms"]), bests(r["kt_best_ms"])
    if mine is None or theirs is None:
        mine, theirs = logged_bests(logs, Path(r["example"]).stem)
    if len(mine) == len(theirs) == int(r["calls"]):
        r["best_vs_kt"] = round(max(a / b for a, b in zip(mine, theirs, strict=True)), 3)
    r["wall_vs_kt"] = round(float(r["wall_s"]) / float(r["kt_wall_s"]), 3)
    return r


if __name__ == "__main__":
    rows = {}
    for part in PARTS:
        with (HERE / part / "gpu.csv").open() as fh:
            rows.update(
                {r["example"]: compared(r, HERE / part / "logs") for r in csv.DictReader(fh)}
            )
    every = classification()
    ordered = [rows[e.name] for e in every if e.in_scope and e.name in rows]
    title = table_title(False, True, 150, 20, "cupy")
    title[3] += (
        " The command, per part, with `--only` for each of the part's examples: calls.sh 2, 3 and "
        "4 here; convolution_correct.py's row with `--timeout 300` (call 5)."
    )
    parts = ", ".join(f"h200/20261130d/{p}" for p in PARTS)
    title.insert(
        2, f"H200, autotune at baee226, in four calls: {parts}; merged by merge_kt.py there."
    )
    write_table(ordered, [e for e in every if not e.in_scope], OUTPUT, title)
    print(f"{len(ordered)} examples -> {OUTPUT}.md")
