"""Tiles in turn (PINGPONG = 1) against the rest, per layer, from one store: the best evaluation
of the current tc_wgmma kernel of each kind, its configuration, and the rest's best over it
(above 1: PINGPONG is faster). Configurations stored before PINGPONG existed count as 0.

    python3 pp_pairs.py STORE.db --dtype tf32 > pp_pairs_tf32.md
"""

import argparse
import json
import math
import sqlite3

from autotune.families import FAMILIES

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("store")
ap.add_argument("--dtype", required=True)
args = ap.parse_args()

family = FAMILIES["tc_wgmma"]
best: dict[str, dict[int, tuple[float, dict]]] = {}
for key, config, time_ms in sqlite3.connect(args.store).execute(
    "SELECT problem_key, config, time_ms FROM evaluations WHERE family = 'tc_wgmma' "
    "AND status = 'OK' AND time_ms IS NOT NULL AND kernel_digest = ?",
    (family.kernel_digest(),),
):
    if f"dtype={args.dtype}," not in key:
        continue
    c = json.loads(config)
    kind = int(c.get("PINGPONG", 0))
    held = best.setdefault(key, {}).get(kind)
    if held is None or time_ms < held[0]:
        best[key][kind] = (time_ms, c)

SHOWN = ("BM", "BN", "STAGES", "MULTICAST", "GEMM_1X1")
print("| layer | rest ms | PINGPONG ms | PINGPONG's configuration | rest / PINGPONG |")
print("|---|--:|--:|---|--:|")
ratios = []
for key in sorted(best):
    if 0 not in best[key] or 1 not in best[key]:
        continue
    (rest, _), (pp, c) = best[key][0], best[key][1]
    ratios.append(rest / pp)
    shown = ", ".join(f"{n}={c[n]}" for n in SHOWN)
    print(f"| {key.split(',dtype')[0]} | {rest:.4f} | {pp:.4f} | {shown} | {rest / pp:.3f} |")
if ratios:
    mean = math.exp(sum(map(math.log, ratios)) / len(ratios))
    print(
        f"\n{sum(r > 1 for r in ratios)} of {len(ratios)} layers faster with PINGPONG; "
        f"geometric mean of rest / PINGPONG {mean:.3f} (best of each side, each measured as "
        "its study measured it)."
    )
