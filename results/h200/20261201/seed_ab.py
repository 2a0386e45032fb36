"""Two stores' tc_wgmma bests per shape side by side (the same searches with two sets of
starting configurations): each shape's best time in each, their ratio, and the geometric mean.

    python3 seed_ab.py BEFORE.db AFTER.db [DEVICE]
"""

import math
import sys

from autotune.reports import best_table
from autotune.store import Store

DEVICE = sys.argv[3] if len(sys.argv) > 3 else "NVIDIA H200"


def bests(path: str) -> dict[str, float]:
    store = Store(path)
    try:
        df = best_table(store, device=DEVICE, kind="conv2d")
    finally:
        store.close()
    df = df[df["family"] == "tc_wgmma"]
    return {str(s): float(t) for s, t in zip(df["shape"], df["time_ms"], strict=True)}


before, after = bests(sys.argv[1]), bests(sys.argv[2])
shared = [s for s in before if s in after]
print("| shape | before ms | after ms | after / before |\n|---|--:|--:|--:|")
for s in shared:
    print(f"| {s} | {before[s]:.4g} | {after[s]:.4g} | {after[s] / before[s]:.3f} |")
ratios = [after[s] / before[s] for s in shared]
if ratios:
    mean = math.exp(sum(map(math.log, ratios)) / len(ratios))
    print(
        f"\n{len(shared)} shapes; after / before: geometric mean {mean:.3f}, "
        f"{sum(r < 1 for r in ratios)} faster, {sum(r > 1 for r in ratios)} slower"
    )
