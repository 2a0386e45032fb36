#!/usr/bin/env bash
# Session 83's GPU calls (H200): LIMIT=N OUT=$OUT bash results/h200/20261204b/calls.sh K, from
# the checkout root, with `. .whl/env.sh &&` before it and carry [".whl", ".dbcarry"] (`.whl`
# from ../../../shared/device/wheels.sh; `.dbcarry/autotune.db.gz` the tables' store: the one
# session 82 carried, ../20261201k/call3/store.db.gz with the store deltas of 20261202 through
# 20261203d, and ../20261204/call8/store_delta.db.gz merged in; `.dbcarry/models.db.gz` the
# models' store, ../20261202g/call2/store.db.gz with ../20261203c/call3/models_delta.db.gz and
# ../20261203d/call1/models_delta.db.gz merged in). A call on a fresh machine merges the
# deltas of this session's earlier calls, carried as .dbcarry/s83_{tables,models}_*.db.gz.
# Sent with the tracked results files over 250 KB moved out of the checkout, which is
# otherwise larger than one call carries. The session's calls (README.md): call1/ is K = 1 as
# first sent, when remeasure took call 8's version as every study's previous code and measured
# 3 studies a 16-bit dtype (aedb656 fixed it); call2/ is K = 1 again, call3/ K = 2, call4/ K = 3.
set -u
. "$(dirname "$0")/../calls_lib.sh"
HERE=results/h200/20261204b
MODELS_DB=/tmp/home/models.db
DELTA=results/h200/20261203/store_delta.py
BOTH=results/h200/20261202e/both_sides_best.py  # ours (the store's pick) and cuDNN, in turns
TABLE=results/h200/20261201i/call6/tc_targets.md  # the tables' layers
clocks() { nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader >> "$OUT/summary.txt"; }
fresh() {  # STORE GZ WHICH: the carried store, with this session's deltas, where this machine
    # has none yet
    [ -f "$1" ] && return 0
    gunzip -c "$2" > "$1"
    for d in .dbcarry/s83_$3_*.db.gz; do
        [ -f "$d" ] && python3 -m autotune merge --storage "$1" "$d" | sed "s/^/fresh $3: /" | tee -a "$OUT/summary.txt"
    done
}
layers() {  # DTYPE: the tables' layers, as --shape args (C > 3, then the first layers)
    echo $(table_layers $TABLE $1 all) $(table_layers $TABLE $1 first)
}
near() {  # DTYPE: the layers with C > 3 under 1.03x cuDNN in session 82's tables (call 3)
    awk -F'|' '/^\| N=/ && NF == 6 && $5 + 0 < 1.03 { gsub(/ /, "", $2); if ($2 !~ /C=3,/) print "--shape", $2 }' results/h200/20261204/call3/tables_$1.md
}
sweep() {  # DTYPE BUDGET SECONDS NAME SHAPE-ARGS...: FILTERS_M (filters_m_all.toml) by the
    # default search, BUDGET evaluations of the subspace a layer, the picks' rows kept
    local d=$1 b=$2 t=$3 name=$4 s=$SECONDS; shift 4
    [ "$t" -gt $(( $(left) - 30 )) ] && t=$(( $(left) - 30 ))
    [ "$t" -lt 20 ] && { say "sweep $name $d: not run (time)"; return; }
    timeout -k 5 $(( t + 40 )) python3 -m autotune run --family tc_wgmma "$@" --layout NHWC --dtype $d --subspace $HERE/filters_m_all.toml --budget $b --no-baseline --time-limit $t > "$OUT/sweep_${name}_$d.log" 2>&1
    say "sweep $name $d budget $b: rc=$? $((SECONDS - s)) s: $(grep 'new evaluations' "$OUT/sweep_${name}_$d.log")"
    grep -E "^\| tc_wgmma" "$OUT/sweep_${name}_$d.log" | cut -c1-330 >> "$OUT/summary.txt"
}
case "${1:?1}" in
1)  # Session 82 changed the kernel's text (FILTERS_M), so every stored evaluation is of the
    # previous code (54a054d3b79243d3) but call 8's 238. The tables' three best of every layer
    # in each dtype measured with this text (remeasure --top 3), then FILTERS_M searched on
    # the layers under 1.03x cuDNN in session 82's tables (40 evaluations a layer of
    # filters_m_all.toml: 64-192 filters of 64-256 pixels).
    # Predicted: every remeasured best within 2% of its stored figure (the configurations
    # without FILTERS_M compile to the same cubins, 226 of 226 in session 82); the FILTERS_M
    # search beats the stored pick by 1% or more on the 14x14 and 7x7 16-bit 1x1 layers (as
    # call 7 of session 82 did: 3-5%), within 1% either way or slower on the rest, the 3x3 and
    # 5x5 tf32 layers slower (FP32 accumulators staged a value at a time).
    install || exit 1
    fresh "$AUTOTUNE_DB" .dbcarry/autotune.db.gz tables
    python3 $DELTA mark "$AUTOTUNE_DB" > /tmp/marks_tables.json
    clocks
    for d in bf16 fp16 tf32; do remeasure $d 3 150 $(layers $d); done
    for d in bf16 fp16 tf32; do sweep $d 40 70 near $(near $d); done
    python3 $DELTA cut "$AUTOTUNE_DB" /tmp/marks_tables.json /tmp/delta_tables.db | sed "s/^/tables delta /" | tee -a "$OUT/summary.txt"
    gzip -c /tmp/delta_tables.db > "$OUT/s83_tables_1.db.gz"
    clocks; pack ;;
2)  # FILTERS_M: call 1's search resumed where its time ran out, then on every other layer
    # with C > 3 (16 evaluations a layer, as far as 50 s a dtype reach), then the tables
    # again, all four networks in the three dtypes, ours (the store's pick) and cuDNN three
    # times each a layer, in turns.
    # Predicted: FILTERS_M the pick on a few 1x1 layers with small images (14x14, 7x7), on
    # none of the 3x3 layers of 56x56 or larger; the geometric means within 1.5% of session
    # 82's call 3 (bf16 1.236, fp16 1.182, tf32 1.224), the 16-bit 14x14 C = 1024 F = 256 and
    # 7x7 C = 512 F = 2048 layers at 1.02x cuDNN or more, the layers within 0.5% of cuDNN
    # there (bf16 OverFeat C = 96, fp16 28x28 C = 512 F = 256, tf32 12x12 C = 512 F = 1024)
    # still within 1% of it, on either side.
    install || exit 1
    fresh "$AUTOTUNE_DB" .dbcarry/autotune.db.gz tables
    python3 $DELTA mark "$AUTOTUNE_DB" > /tmp/marks_tables.json
    clocks
    for d in bf16 fp16 tf32; do
        sweep $d 40 40 near $(near $d)
        sweep $d 16 50 rest $(table_layers $TABLE $d all | grep -vxF -f <(near $d) | tr '\n' ' ')
    done
    python3 $DELTA cut "$AUTOTUNE_DB" /tmp/marks_tables.json /tmp/delta_tables.db | sed "s/^/tables delta /" | tee -a "$OUT/summary.txt"
    gzip -c /tmp/delta_tables.db > "$OUT/s83_tables_2.db.gz"
    clocks
    for d in bf16 fp16 tf32; do
        s=$SECONDS; t=$(( $(left) - 10 ))
        timeout -k 5 $t python3 $BOTH "$AUTOTUNE_DB" --dtype $d --repeats 3 $(layers $d) > "$OUT/tables_$d.md" 2> "$OUT/tables_$d.log"
        say "tables $d x3: rc=$? $((SECONDS - s)) s"; grep -E "geometric|C > 3 at" "$OUT/tables_$d.md" >> "$OUT/summary.txt"
    done
    clocks; pack ;;
3)  # The models' store measured with this text (its 33 fused bf16 studies' three best:
    # FILTERS_M is not offered for fused layers), the kernel's whole GPU test file on its
    # current text (session 82 ran 21 of its 42 tests on it, the other 21 on the text before
    # FILTERS_M), then ResNet-50 and VGG-16 end to end.
    # Predicted: every remeasured best within 2% of its stored figure; 42 passed; every end-to-end target met (ResNet-50 1.25x eager and 1.1x
    # torch.compile or more, VGG-16 1.3x and 1.1x), within 3% of session 82's call 2
    # (ResNet-50 3.05x eager, 1.26x compile; VGG-16 2.16x, 1.18x).
    install || exit 1
    fresh "$MODELS_DB" .dbcarry/models.db.gz models
    python3 $DELTA mark "$MODELS_DB" > /tmp/marks_models.json
    clocks
    s=$SECONDS
    timeout -k 5 100 env AUTOTUNE_DB=$MODELS_DB python3 -m autotune remeasure --top 3 --no-baseline --family tc_wgmma --time-limit 90 > "$OUT/remeasure_models.md" 2> "$OUT/remeasure_models.log"
    say "remeasure models top 3: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/remeasure_models.log")"
    python3 $DELTA cut "$MODELS_DB" /tmp/marks_models.json /tmp/delta_models.db | sed "s/^/models delta /" | tee -a "$OUT/summary.txt"
    gzip -c /tmp/delta_models.db > "$OUT/s83_models_3.db.gz"
    CAP=260 gpu_tests test_gpu_tc_wgmma
    AUTOTUNE_DB=$MODELS_DB bench_model resnet50 32 bf16 --cuda-graphs
    AUTOTUNE_DB=$MODELS_DB bench_model vgg16 32 bf16 --cuda-graphs
    clocks; pack ;;
esac
