"""Per layer and dtype, the fastest split-in-cluster configuration (SPLIT_CLUSTER = 1) against
the fastest other one, both measured with this call's code (evaluations stored since --since):
    python3 split_vs_rest.py DB --since "YYYY-MM-DD HH:MM:SS" [--dtype D]"""

import argparse
import json
import sqlite3

ap = argparse.ArgumentParser()
ap.add_argument("db")
ap.add_argument("--since", required=True)
ap.add_argument("--dtype", action="append")
args = ap.parse_args()
rows = sqlite3.connect(args.db).execute(
    "select problem_key, config, time_ms from evaluations where family = 'tc_wgmma' "
    "and status = 'OK' and protocol = 2 and created_at >= ?",
    (args.since,),
)
best: dict[tuple[str, bool], tuple[float, dict]] = {}
for key, config, ms in rows:
    c = json.loads(config)
    if args.dtype and not any(f"dtype={d}," in key for d in args.dtype):
        continue
    kind = (key, bool(c.get("SPLIT_CLUSTER", 0)))
    if kind not in best or ms < best[kind][0]:
        best[kind] = (ms, c)


def short(c: dict) -> str:
    s = f"{c['BM']}x{c['BN']} WG{c['WG']} S{c['STAGES']}"
    for name, tag in (
        ("SPLIT_K", "split"),
        ("STORE_TMA", "tma-store"),
        ("GEMM_1X1", "1x1"),
        ("PINGPONG", "pp"),
        ("PERSISTENT", "persistent"),
        ("MULTICAST", "mc"),
    ):
        if int(c.get(name, 0)):
            s += f" {tag}" + (f"={c[name]}" if name in ("SPLIT_K", "MULTICAST") else "")
    return s


print("| layer | best other, ms | config | split in cluster, ms | config | other / split |")
print("|---|--:|---|--:|---|--:|")
for key in sorted({k for k, _ in best}):
    other, split = best.get((key, False)), best.get((key, True))
    cells = [key.replace(",layout=NHWC", "")]
    for b in (other, split):
        cells += [f"{b[0]:.4f}", short(b[1])] if b else ["", ""]
    cells.append(f"{other[0] / split[0]:.3f}" if other and split else "")
    print("| " + " | ".join(cells) + " |")
