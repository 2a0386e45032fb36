"""Three consumer warpgroups (WG = 3, 192-pixel tiles) against the rest, from one store: per
layer and dtype, the best evaluation of the checkout's tc_wgmma code with WG = 3, the best with
WG = 1 or 2, and cuDNN's time in the store; per dtype, the geometric mean of WG = 3's best over
the others' and the layers at least 1.0x cuDNN before and after (the best of either). With
`--bn 192`, WG = 3 at that tile width against every other configuration (session 63's 192 x 192).

    python3 wg3_pairs.py STORE.db [--bn 192]
"""

import argparse
import json
import math
import sqlite3

from autotune.families import kernel_digests

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("store")
ap.add_argument(
    "--digest", help="the kernel digest whose evaluations count (default: the checkout's)"
)
ap.add_argument("--bn", type=int, help="only WG = 3 tiles this wide count as new")
args = ap.parse_args()
digest = args.digest or kernel_digests()["tc_wgmma"]

db = sqlite3.connect(args.store)
best: dict[tuple[str, bool], tuple[float, dict]] = {}
for key, config, time_ms in db.execute(
    "SELECT problem_key, config, time_ms FROM evaluations "
    "WHERE family = 'tc_wgmma' AND status = 'OK' AND kernel_digest = ?",
    (digest,),
):
    c = json.loads(config)
    kind = (key, int(c["WG"]) == 3 and args.bn in (None, int(c["BN"])))
    if kind not in best or time_ms < best[kind][0]:
        best[kind] = (time_ms, c)
cudnn = dict(
    db.execute(
        "SELECT problem_key, time_ms FROM baselines WHERE library = 'cudnn' AND status = 'OK' "
        "ORDER BY id"  # the last measured of a layer
    )
)


def geomean(values: list[float]) -> float:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else math.nan


def short(c: dict) -> str:
    names = ("STAGES", "STORE_TMA", "PERSISTENT", "STREAM_K", "MULTICAST", "GEMM_1X1", "PINGPONG")
    return f"{c['BM']}x{c['BN']} WG={c['WG']} " + " ".join(f"{n}={c[n]}" for n in names)


print(f"kernel digest {digest}\n")
print(
    "| layer | WG 1-2 ms | WG 3 ms | WG 3 / WG 1-2 | cuDNN ms | x cuDNN before | after "
    "| WG 3's best |"
)
print("|---|--:|--:|--:|--:|--:|--:|---|")
per_dtype: dict[str, dict[str, list]] = {}
for key in sorted({k for k, _ in best}, key=lambda k: (k.split("dtype=")[1], k)):
    dtype = key.split("dtype=")[1].split(",")[0]
    old, new = best.get((key, False)), best.get((key, True))
    ref = cudnn.get(key)
    d = per_dtype.setdefault(dtype, {"ratio": [], "before": [], "after": []})
    cells = [key, f"{old[0]:.4g}" if old else "-", f"{new[0]:.4g}" if new else "-"]
    if old and new:
        d["ratio"].append(new[0] / old[0])
        cells.append(f"{new[0] / old[0]:.3f}")
    else:
        cells.append("-")
    cells.append(f"{ref:.4g}" if ref else "-")
    if ref and old:
        before = ref / old[0]
        after = ref / min(old[0], new[0] if new else math.inf)
        d["before"].append(before)
        d["after"].append(after)
        cells += [f"{before:.3f}", f"{after:.3f}"]
    else:
        cells += ["-", "-"]
    cells.append(short(new[1]) if new else "-")
    print("| " + " | ".join(cells) + " |")
print()
for dtype, d in per_dtype.items():
    print(
        f"{dtype}: WG 3 / WG 1-2 geometric mean {geomean(d['ratio']):.3f} over {len(d['ratio'])} "
        f"layers (faster on {sum(r < 1 for r in d['ratio'])}); x cuDNN {geomean(d['before']):.3f} "
        f"before, {geomean(d['after']):.3f} after; at least 1.0x: "
        f"{sum(b >= 1 for b in d['before'])} before, {sum(a >= 1 for a in d['after'])} after"
    )
