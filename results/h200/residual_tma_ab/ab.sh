#!/usr/bin/env bash
# A/B of tc_wgmma's fused residual add (branch next/residual-tma): every configuration of
# subspace.toml on ResNet-50's four bottleneck conv3 shapes at batch 32 in bf16 (NHWC), each with
# its BatchNorm folded, the residual added and ReLU (epilogue bias_add_relu), timed in tree A
# (MAIN: the residual loaded output by output from global memory) and in this tree B (with TMA
# stores, the residual loaded into the staging tile by tensor-memory copies), in one GPU
# session, protocol 2. STORE_TMA = 0 runs the same code in both trees: the control.
# From the checkout root of the branch, on the GPU machine:
#   MAIN=dir-of-main's-tree OUT=dir bash results/h200/residual_tma_ab/ab.sh
# Later A/Bs of the epilogue reuse it: EPILOGUE_SHAPES (space-separated shape keys, each run in
# bf16 NHWC at batch 32) and SUBSPACE replace the four conv3 shapes and subspace.toml. A tunable
# that tree A lacks (LATER, GEMM_1X1 unless named; LATER_DEFAULT, 0 unless named, its value in A)
# pairs B's configurations of another value with B's own of that value.
# Writes $OUT/a.db and $OUT/b.db (the runs) and $OUT/ab.md (per shape and store: the best of each
# tree, B over A, and the geometric mean of B over A over every configuration pair).
set -eu
OUT=${OUT:-/tmp/residual_ab}; mkdir -p "$OUT"
HERE=$(cd "$(dirname "$0")" && pwd)
B_TREE=$PWD
SHAPES=()
CONV3="N=56,K=1,C=64,F=256 N=28,K=1,C=128,F=512 N=14,K=1,C=256,F=1024 N=7,K=1,C=512,F=2048"
for s in ${EPILOGUE_SHAPES:-$CONV3}; do
  case $s in *epilogue=*) ;; *) s="$s,epilogue=bias_add_relu" ;; esac
  SHAPES+=(--shape "$s,B=32,dtype=bf16,layout=NHWC")
done
for side in a b; do
  tree=$MAIN; [ "$side" = b ] && tree=$B_TREE
  (cd "$tree" && PYTHONPATH="$tree:${PYTHONPATH:-}" python3 -m autotune run --family tc_wgmma "${SHAPES[@]}" \
    --subspace "${SUBSPACE:-$HERE/subspace.toml}" --strategy brute_force --exhaustive --no-baseline \
    --storage "$OUT/$side.db") > "$OUT/run_$side.log" 2>&1 || echo "run $side: rc=$?"
done
python3 - "$OUT" <<'PY'
import json, math, os, sqlite3, sys
out = sys.argv[1]
# A tunable tree A may lack (LATER_DEFAULT there): B's configs with another value pair in B.
LATER = os.environ.get("LATER", "GEMM_1X1")
DEFAULT = int(os.environ.get("LATER_DEFAULT", "0"))
runs = {}
for side in "ab":
    for key, config, ms in sqlite3.connect(f"{out}/{side}.db").execute(
        "select problem_key, config, time_ms from evaluations where family = 'tc_wgmma' and status = 'OK'"
    ):
        c = json.loads(config)
        later = int(c.pop(LATER, DEFAULT)) != DEFAULT
        runs.setdefault((key, json.dumps(c, sort_keys=True)), {})[side + "1" * later] = ms
def geomean(pairs):
    return math.exp(sum(math.log(y / x) for x, y in pairs) / len(pairs))
lines = [
    "| shape | store | best A ms | best B ms | B / A best | B / A, geomean of pairs | pairs |",
    "|---|---|--:|--:|--:|--:|--:|",
]
groups, later_pairs = {}, {}
for (key, config), t in runs.items():
    store = "TMA" if int(json.loads(config).get("STORE_TMA", 0)) else "direct"
    if "a" in t and "b" in t:
        groups.setdefault((key, store), []).append((t["a"], t["b"]))
    if "b" in t and "b1" in t:
        later_pairs.setdefault((key, store), []).append((t["b"], t["b1"]))
for (key, store), pairs in sorted(groups.items()):
    a, b = min(p[0] for p in pairs), min(p[1] for p in pairs)
    lines.append(f"| {key} | {store} | {a:.4f} | {b:.4f} | {b / a:.3f} | {geomean(pairs):.3f} | {len(pairs)} |")
if later_pairs:
    lines += [
        "",
        f"In B, {LATER} other than {DEFAULT} against the same configuration with {LATER} = {DEFAULT}:",
        "",
        f"| shape | store | best {LATER}={DEFAULT} ms | best other ms | other / {DEFAULT} best | other / {DEFAULT}, geomean of pairs | pairs |",
        "|---|---|--:|--:|--:|--:|--:|",
    ]
    for (key, store), pairs in sorted(later_pairs.items()):
        z, o = min(p[0] for p in pairs), min(p[1] for p in pairs)
        lines.append(f"| {key} | {store} | {z:.4f} | {o:.4f} | {o / z:.3f} | {geomean(pairs):.3f} | {len(pairs)} |")
open(f"{out}/ab.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
