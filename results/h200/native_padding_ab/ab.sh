#!/usr/bin/env bash
# A/B of branch next/native-padding: VGG-16's and ResNet-50's 3x3 convolutions at batch 32 in
# bf16 (NHWC), each timed by tc_wgmma over the pre-padded input (A: padding materialised, what the
# runtime copies today) and over the unpadded input with padding=1 read through the im2col box
# (B), with every configuration of subspace.toml, in one GPU session, protocol 2. Prediction: B
# within 3% of A configuration by configuration (the same tiles and copies; B reads fewer bytes),
# so that the runtime saves its padding copy whole. From the checkout root, on the GPU machine:
#   OUT=dir bash results/h200/native_padding_ab/ab.sh
set -eu
OUT=${OUT:-/tmp/npad_ab}; mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd)
SHAPES="N=224,K=3,C=64,F=64 N=112,K=3,C=128,F=128 N=56,K=3,C=256,F=256 N=28,K=3,C=512,F=512
N=14,K=3,C=512,F=512 N=56,K=3,C=64,F=64 N=28,K=3,C=128,F=128 N=14,K=3,C=256,F=256
N=7,K=3,C=512,F=512"
args=()
for s in $SHAPES; do
  args+=(--shape "$s,B=32,dtype=bf16,layout=NHWC" --shape "$s,B=32,padding=1,dtype=bf16,layout=NHWC")
done
python3 -m autotune run --family tc_wgmma "${args[@]}" --subspace "$HERE/subspace.toml" \
  --strategy brute_force --exhaustive --no-baseline --storage "$OUT/ab.db" > "$OUT/run.log" 2>&1 \
  || echo "run: rc=$?"
python3 - "$OUT" <<'PY'
import json, math, sqlite3, sys
out = sys.argv[1]
rows = sqlite3.connect(f"{out}/ab.db").execute(
    "select problem_key, config, time_ms from evaluations where family = 'tc_wgmma' and status = 'OK'"
).fetchall()
times = {}
for key, config, ms in rows:
    padded = ",padding=1" in key
    times.setdefault(key.replace(",padding=1", ""), {}).setdefault(config, {})[padded] = ms
lines = ["| shape | best pre-padded (A) ms | best padded (B) ms | B / A best | B / A, geomean of pairs |",
         "|---|--:|--:|--:|--:|"]
every = []
for shape, configs in sorted(times.items(), key=lambda kv: kv[0]):
    pairs = [(t[False], t[True]) for t in configs.values() if False in t and True in t]
    if not pairs:
        continue
    a = min(p[0] for p in pairs); b = min(p[1] for p in pairs)
    g = math.exp(sum(math.log(y / x) for x, y in pairs) / len(pairs))
    every += [y / x for x, y in pairs]
    lines.append(f"| {shape} | {a:.4f} | {b:.4f} | {b / a:.3f} | {g:.3f} |")
if every:
    lines.append(f"\nEvery pair: {len(every)}, B / A geometric mean {math.exp(sum(map(math.log, every)) / len(every)):.3f}")
open(f"{out}/ab.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
