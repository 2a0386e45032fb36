"""How PINGPONG fared in the bf16 table's searches (calls 3 and 4): per layer, the best
tc_wgmma time with the warpgroups taking tiles in turn and with them sharing each tile, among
the configurations the search measured (not an exhaustive A/B: `pingpong_*.toml` is that).
From the checkout root, over call 4's store:
    python3 results/h200/20261130f/pingpong_share.py STORE.db > results/h200/20261130f/call4/pingpong_share.md"""

import json
import sqlite3
import sys

db = sqlite3.connect(sys.argv[1])
digest = db.execute(
    "select kernel_digest from evaluations where family = 'tc_wgmma' order by id desc limit 1"
).fetchone()[0]
best: dict[str, dict[int, float]] = {}
for key, config, time_ms in db.execute(
    "select problem_key, config, time_ms from evaluations where family = 'tc_wgmma' and "
    "status = 'OK' and protocol = 2 and kernel_digest = ? and problem_key like '%bf16%' and "
    "problem_key not like '%epilogue%'",
    (digest,),
):
    pp = int(json.loads(config).get("PINGPONG", 0))
    times = best.setdefault(key, {})
    times[pp] = min(time_ms, times.get(pp, float("inf")))
print("| layer | best, tiles shared (ms) | best, tiles in turn (ms) | in turn / shared |")
print("|---|--:|--:|--:|")
wins = 0
for key, times in sorted(best.items(), key=lambda kv: kv[0]):
    if len(times) == 2:
        ratio = times[1] / times[0]
        wins += ratio < 1
        print(f"| {key.split(',dtype')[0]} | {times[0]:.4f} | {times[1]:.4f} | {ratio:.3f} |")
both = sum(len(t) == 2 for t in best.values())
print(f"\nPINGPONG's best was the faster on {wins} of the {both} layers where the search measured both.")
