#!/usr/bin/env bash
# A/B of tc_wgmma's output store (branch next/tma-store): each configuration of subspace.toml
# timed with STORE_TMA = 0 (the consumers' st.global) and 1 (staged in shared memory, stored by
# tensor-memory copies), on ResNet-50's distinct convolutions at batch 32 in bf16 and tf32 (NHWC),
# in one GPU session, protocol 2. From the checkout root of the branch, on the GPU machine:
#   OUT=dir bash results/h200/tma_store_ab/ab.sh
# Writes $OUT/ab.db (the runs), $OUT/ab.md (per shape and dtype: the best of each, B over A, and
# the geometric mean of B over A over every configuration pair).
set -eu
OUT=${OUT:-/tmp/tma_ab}; mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd)
for dtype in bf16 tf32; do
  python3 -m autotune run --family tc_wgmma --shapes resnet50 --dtype "$dtype" --layout NHWC \
    --subspace "$HERE/subspace.toml" --strategy brute_force --exhaustive --no-baseline \
    --storage "$OUT/ab.db" > "$OUT/run_$dtype.log" 2>&1 || echo "run $dtype: rc=$?"
done
python3 - "$OUT" <<'PY'
import json, math, sqlite3, sys
out = sys.argv[1]
rows = sqlite3.connect(f"{out}/ab.db").execute(
    "select problem_key, config, time_ms from evaluations where family = 'tc_wgmma' and status = 'OK'"
).fetchall()
pairs, best = {}, {}
for key, config, ms in rows:
    c = json.loads(config)
    store = int(c.pop("STORE_TMA", 0))
    pairs.setdefault((key, json.dumps(c, sort_keys=True)), {})[store] = ms
    best.setdefault(key, {}).setdefault(store, ms)
    best[key][store] = min(best[key][store], ms)
ratios = {}
for (key, _), t in pairs.items():
    if 0 in t and 1 in t:
        ratios.setdefault(key, []).append(t[1] / t[0])
lines = ["| shape | best, st.global (A) ms | best, TMA store (B) ms | B / A best | B / A, geomean of pairs |", "|---|--:|--:|--:|--:|"]
for key in sorted(best, key=lambda k: -best[k].get(0, 0)):
    a, b = best[key].get(0), best[key].get(1)
    if a is None or b is None or key not in ratios:
        continue
    g = math.exp(sum(map(math.log, ratios[key])) / len(ratios[key]))
    lines.append(f"| {key} | {a:.4f} | {b:.4f} | {b / a:.3f} | {g:.3f} |")
every = [r for rs in ratios.values() for r in rs]
if every:
    lines.append(f"\nEvery pair: {len(every)}, B / A geometric mean {math.exp(sum(map(math.log, every)) / len(every)):.3f}")
open(f"{out}/ab.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
