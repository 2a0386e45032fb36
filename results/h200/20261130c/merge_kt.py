"""Kernel Tuner's whole in-scope CUDA suite as one table, from the three parts that calls 1-3
of calls.sh ran at 5289c88 (the GPU opened in the caller's process; every call's budget a
random_sample of 20 of each tool's own drawing; 150 s a run): results/kernel_tuner_examples/
gpu.md and gpu.csv. From the checkout root:  python3 results/h200/20261130c/merge_kt.py"""

import csv
from pathlib import Path

from autotune.bench.kt_examples import classification
from autotune.bench.kt_table import table_title, write_table

HERE = Path(__file__).resolve().parent
PARTS = [HERE / f"call{n}" / "kt" / "gpu.csv" for n in (1, 2, 3)]
OUTPUT = HERE.parents[1] / "kernel_tuner_examples" / "gpu"

if __name__ == "__main__":
    rows = {}
    for part in PARTS:
        with part.open() as fh:
            rows.update({r["example"]: r for r in csv.DictReader(fh)})
    every = classification()
    ordered = [rows[e.name] for e in every if e.in_scope and e.name in rows]
    title = table_title(False, True, 150, 20, "cupy")
    title[3] = (
        "Budget: max_fevals 20 per call, a random_sample of each tool's own drawing where a "
        "script brute-forces (before the bench pinned the configurations, 241b98c); time limit "
        "150 s per run. Command, per part: `autotune bench kt-examples --kernel-tuner --kt-lang "
        "cupy --max-fevals 20 --timeout 150 --only ...` (calls.sh 1, 2 and 3)."
    )
    parts = ", ".join(str(p.relative_to(HERE.parents[1])) for p in PARTS)
    title.insert(2, f"H200, main at 5289c88, in three calls: {parts}; merged by merge_kt.py there.")
    write_table(ordered, [e for e in every if not e.in_scope], OUTPUT, title)
    print(f"{len(ordered)} examples -> {OUTPUT}.md")
