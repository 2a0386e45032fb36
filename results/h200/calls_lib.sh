#!/usr/bin/env bash
# The helpers of a session's GPU calls (sourced by its calls.sh, from the checkout root on the
# GPU machine, with LIMIT and OUT set): the time left of the call's LIMIT seconds, the summary
# line (`say`), the wheels installed into /tmp/site (`install`), GPU test files run under a cap
# (`gpu_tests`, CAP seconds each), the store carried between calls (`restore_db`, `save_db`), the
# previous code's best configurations measured again (`remeasure`),
# a model tuned and benched (`tune`, `bench_model`), Kernel Tuner's examples beside Kernel
# Tuner (`kt_suite`), a table's layers as shape options (`table_layers`) and the logs packed
# (`pack`). The calls of earlier sessions (results/h200/2026*/calls.sh) keep their own copy,
# as they ran.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
T0=$SECONDS
left() { echo $(( ${LIMIT:-580} - (SECONDS - T0) )); }
export HOME=/tmp/home PYTHONUNBUFFERED=1 AUTOTUNE_DB=/tmp/home/autotune.db; mkdir -p "$HOME"
export PYTHONPATH="/tmp/site:$PWD"
say() { echo "$*" | tee -a "$OUT/summary.txt"; }
gpu_tests() {
    for f in "$@"; do
        t=$(left); [ "$t" -lt 30 ] && { say "$f: not run (time)"; continue; }
        s=$SECONDS
        [ "$t" -gt "${CAP:-160}" ] && t=${CAP:-160}
        timeout -k 5 "$t" python3 -m pytest -q -m gpu -p no:cacheprovider --durations=5 "tests/gpu/$f.py" > "$OUT/$f.log" 2>&1
        say "$f: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/$f.log")"
    done
}
install() {
    [ -d /tmp/site/optuna ] && return 0
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
}
restore_db() {
    [ -f "$AUTOTUNE_DB" ] || { [ -f .dbcarry/autotune.db.gz ] && gunzip -c .dbcarry/autotune.db.gz > "$AUTOTUNE_DB"; }
}
save_db() {
    python3 -c "import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute('PRAGMA wal_checkpoint(TRUNCATE)')" "$AUTOTUNE_DB"
    gzip -c "$AUTOTUNE_DB" > "$OUT/autotune.db.gz"
}
remeasure() {  # DTYPE TOP SECONDS SHAPE-ARGS...: the previous code's top configurations of
    # tc_wgmma in $AUTOTUNE_DB measured with the current code
    local d=$1 top=$2 t=$3 s=$SECONDS; shift 3
    [ "$t" -gt $(( $(left) - 20 )) ] && t=$(( $(left) - 20 ))
    [ "$t" -lt 20 ] && { say "remeasure $d: not run (time)"; return; }
    timeout -k 5 $(( t + 30 )) python3 -m autotune remeasure --top $top --no-baseline --family tc_wgmma "$@" --dtype $d --layout NHWC --time-limit $t > "$OUT/remeasure_${d}_$top.md" 2> "$OUT/remeasure_${d}_$top.log"
    say "remeasure $d top $top: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/remeasure_${d}_$top.log")"
}
tune() {  # model dtype [more options]
    local m=$1 d=$2; shift 2
    t=$(( $(left) - 70 )); [ "$t" -lt 60 ] && { say "tune $m $d: not run (time)"; return; }
    s=$SECONDS; timeout -k 5 "$t" python3 -m autotune tune-model --model "$m" --batch 32 --dtype "$d" "$@" > "$OUT/tune_${m}_$d.log" 2>&1
    say "tune-model $m $d $*: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/tune_${m}_$d.log")"
}
bench_model() {  # model batch precision [more options]
    local m=$1 b=$2 p=$3; shift 3
    s=$SECONDS; timeout -k 5 $(( $(left) - 10 )) python3 -m autotune bench model --model "$m" --batch "$b" --precision "$p" --output "$OUT/model_${m}_$p" "$@" > "$OUT/bench_${m}_$p.log" 2>&1
    say "bench model $m $b $p $*: rc=$? $((SECONDS - s)) s"; cat "$OUT/model_${m}_$p/model.md" >> "$OUT/summary.txt" 2>/dev/null
    grep -h "^Our convolutions" "$OUT/model_${m}_$p"/layers_*.md >> "$OUT/summary.txt" 2>/dev/null
}
table_layers() {  # TABLE DTYPE WHICH: the layers of a tc_targets.py table's dtype, as --shape
    # args: weak (C > 3, below 1.0x cuDNN), rest (C > 3, at or above), all (C > 3) or first
    # (C = 3)
    python3 - "$@" <<'PY'
import re, sys
table, dtype, which = sys.argv[1:4]
cur, speedup_at = None, 5  # the speedup's column: found by the header (tables since session
# 65 have a measurements column before it)
for line in open(table):
    m = re.match(r"## (\w+)", line)
    if m:
        cur = m.group(1)
    elif line.startswith("| set |"):
        speedup_at = [c.strip() for c in line.strip().strip("|").split("|")].index("speedup")
    elif cur == dtype and line.startswith("| ") and "tc_" in line:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        c, speedup = int(re.search(r"C=(\d+)", cells[1]).group(1)), float(cells[speedup_at])
        kind = "first" if c <= 3 else "weak" if speedup < 1.0 else "rest"
        if kind == which or (which == "all" and kind != "first"):
            print("--shape", cells[1])
PY
}
pack() {  # the logs and bench folders there are (a call without a model bench has none)
    (cd "$OUT" && set -- $(ls -d ./*.log ./model_* 2>/dev/null) && [ $# -gt 0 ] && tar -czf logs_models.tgz "$@" && rm -rf "$@")
}
kt_suite() {  # NAME EXAMPLE...: Kernel Tuner's examples beside Kernel Tuner 1.5.0 on CuPy,
    # max_fevals 20, 150 s a run, into $OUT/NAME, packed as NAME.tgz
    local name=$1 e; shift; local args=()
    for e in "$@"; do args+=(--only "$e"); done
    timeout -k 5 $(( $(left) - 5 )) python3 -m autotune bench kt-examples --examples .kt_examples/cuda --kernel-tuner --kt-lang cupy --max-fevals 20 --timeout 150 "${args[@]}" --output "$OUT/$name" > "$OUT/$name.log" 2>&1
    say "kt-examples $name: rc=$?"; cat "$OUT/$name"/*.md >> "$OUT/summary.txt" 2>/dev/null
    (cd "$OUT" && tar -czf "$name.tgz" "$name" "$name.log" && rm -rf "$name" "$name.log")
}
