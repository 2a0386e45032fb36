"""Kinds of tc_wgmma configuration against each other, from one store: per shape, the best
evaluation of each kind (the values of the --by tunables, default WG) beside cuDNN measured in
the same store, and per kind the geometric mean over the shapes of its best time over the best
of the reference (--ref, default WG=2: every configuration with two consumer warpgroups); over
the layers with C > 3, what the reference's best alone and the best of every kind make of issue
36's per-layer and mean targets.

    python3 wg_pairs.py STORE.db [--dtype DTYPE] [--by WG] [--ref WG=2]
    python3 wg_pairs.py STORE.db --by PINGPONG,STORE_TMA --ref PINGPONG=0
"""

import argparse
import json
import math
import sqlite3

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("store")
ap.add_argument("--dtype")
ap.add_argument("--by", default="WG", help="comma-separated tunables whose values make a kind")
ap.add_argument("--ref", default="WG=2", help="TUNABLE=VALUE: the configurations compared with")
args = ap.parse_args()
by = args.by.split(",")
ref_name, ref_value = args.ref.split("=")

db = sqlite3.connect(args.store)
best: dict[str, dict[str, tuple[float, dict]]] = {}
reference: dict[str, float] = {}
for key, config, time_ms in db.execute(
    "SELECT problem_key, config, time_ms FROM evaluations "
    "WHERE family = 'tc_wgmma' AND status = 'OK'"
):
    if args.dtype and f"dtype={args.dtype}," not in key:
        continue
    c = json.loads(config)
    kind = ",".join(f"{name}={c[name]}" for name in by)
    held = best.setdefault(key, {}).get(kind)
    if held is None or time_ms < held[0]:
        best[key][kind] = (time_ms, c)
    if str(c[ref_name]) == ref_value and time_ms < reference.get(key, math.inf):
        reference[key] = time_ms
cudnn = dict(
    db.execute(
        "SELECT problem_key, time_ms FROM baselines WHERE library = 'cudnn' AND status = 'OK'"
    )
)
kinds = sorted({k for v in best.values() for k in v})
print("| shape | " + " | ".join(f"{k}: ms (x cuDNN)" for k in kinds) + " | cuDNN ms | the best |")
print("|---|" + "--:|" * len(kinds) + "--:|---|")
ratios: dict[str, list[float]] = {k: [] for k in kinds}
# Issue 36's per-layer and mean targets over the layers with C > 3: cuDNN over the reference's
# best alone, and over the best of every kind.
speedups: dict[str, list[float]] = {f"{args.ref} alone": [], "every kind": []}
for key in sorted(best):
    row, lib, ref = best[key], cudnn.get(key), reference.get(key)
    cells = []
    for k in kinds:
        if k not in row:
            cells.append("")
            continue
        t = row[k][0]
        cells.append(f"{t:.4g} ({lib / t:.3f})" if lib else f"{t:.4g}")
        if ref:
            ratios[k].append(t / ref)
    t, c = min(row.values(), key=lambda v: v[0])
    if lib and ref and int(key.split("C=")[1].split(",")[0]) > 3:
        speedups[f"{args.ref} alone"].append(lib / ref)
        speedups["every kind"].append(lib / t)
    tile = f"{c['BM']}x{c['BN']} WG={c['WG']} STAGES={c['STAGES']} PINGPONG={c['PINGPONG']} "
    tile += f"STORE_TMA={c['STORE_TMA']} PERSISTENT={c['PERSISTENT']} MULTICAST={c['MULTICAST']}"
    print(f"| {key} | " + " | ".join(cells) + f" | {f'{lib:.4g}' if lib else ''} | {tile} |")
print()
for k, r in ratios.items():
    if r:
        mean = math.exp(sum(map(math.log, r)) / len(r))
        print(
            f"- {k}: best over {args.ref}'s best, {len(r)} shapes: geometric mean {mean:.3f}, "
            f"best {min(r):.3f}, worst {max(r):.3f}"
        )
for name, values in speedups.items():
    if values:
        mean = math.exp(sum(map(math.log, values)) / len(values))
        print(
            f"- layers with C > 3, {name}: {sum(v >= 1.0 for v in values)} of {len(values)} at "
            f"least 1.0x cuDNN, geometric mean {mean:.3f}x"
        )
