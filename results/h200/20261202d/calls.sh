#!/usr/bin/env bash
# Session 72's GPU calls (H200): LIMIT=N OUT=$OUT bash results/h200/20261202d/calls.sh K, from
# the checkout root, with `( [ -d .whlmin ] && rm -rf .whl && mv .whlmin .whl ); . .whl/env.sh &&`
# before it and carry [".whlmin", ".dbcarry"] (`.whl` less Kernel Tuner's wheels; as
# .dbcarry/autotune.db.gz the store the call before returned, session 71's call 5's for call 1;
# call 5 also .dbcarry/old_fp16.db, the evaluations table of session 71's call 5's store cut to
# fp16's evaluations of this kernel digest). Sent with
# results/campaigns/20261129-h100.db.gz, results/recordings/h100.db.gz and
# ../20261201k/call3/store.db.gz moved out of the checkout, which is otherwise larger than one
# call carries.
set -u
. "$(dirname "$0")/../calls_lib.sh"
HERE=results/h200/20261202d
clocks() { nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader >> "$OUT/summary.txt"; }
sweep() {  # NAME DTYPE SUBSPACE SHAPE-ARGS...: a subspace exhaustively, no baseline
    local name=$1 d=$2 sub=$3 s=$SECONDS t=$(( $(left) - 60 )); shift 3
    [ "$t" -lt 20 ] && { say "sweep $name: not run (time)"; return; }
    timeout -k 5 "$t" python3 -m autotune run --family tc_wgmma "$@" --layout NHWC --dtype "$d" --subspace "$sub" --exhaustive --no-baseline --time-limit $(( t - 10 )) > "$OUT/sweep_$name.log" 2>&1
    say "sweep $name: rc=$? $((SECONDS - s)) s: $(grep -E "new evaluations" "$OUT/sweep_$name.log" | tail -1)"
}
search() {  # NAME DTYPE BUDGET RESERVE SHAPE-ARGS...: the default search to BUDGET evaluations of
    # this code a layer, stopping RESERVE seconds before the call's limit
    local name=$1 d=$2 b=$3 r=$4 s=$SECONDS t; shift 4; t=$(( $(left) - r ))
    [ "$t" -lt 30 ] && { say "search $name: not run (time)"; return; }
    timeout -k 5 "$t" python3 -m autotune run --family tc_wgmma "$@" --layout NHWC --dtype "$d" --budget "$b" --no-baseline --time-limit $(( t - 10 )) > "$OUT/search_$name.log" 2>&1
    say "search $name: rc=$? $((SECONDS - s)) s: $(grep -E "new evaluations" "$OUT/search_$name.log" | tail -1)"
}
both_sides() {  # DTYPE REPEATS SHAPE-ARGS...: ours and cuDNN, order alternating (session 69's)
    local d=$1 r=$2 s=$SECONDS t=$(( $(left) - 15 )); shift 2
    [ "$t" -lt 30 ] && { say "both_sides $d: not run (time)"; return; }
    timeout -k 5 $t python3 results/h200/20261202/both_sides.py "$AUTOTUNE_DB" --dtype $d --repeats $r "$@" > "$OUT/both_sides_$d.md" 2> "$OUT/both_sides_$d.log"
    say "both_sides $d x$r: rc=$? $((SECONDS - s)) s"; grep -E "geometric|C > 3 at" "$OUT/both_sides_$d.md" >> "$OUT/summary.txt"
}
code_ab() {  # DTYPE SHAPE-ARGS...: wait_texts.py's variants against the kernel, each layer's best
    local d=$1 s=$SECONDS; shift
    timeout -k 5 $(( $(left) - 20 )) python3 results/h200/20261201k/code_ab.py "$AUTOTUNE_DB" --text hint=/tmp/var/hint --text sleep=/tmp/var/sleep --dtype $d --repeats 3 "$@" > "$OUT/code_ab_$d.md" 2> "$OUT/code_ab_$d.log"
    say "code_ab $d: rc=$? $((SECONDS - s)) s"; cat "$OUT/code_ab_$d.md" >> "$OUT/summary.txt"
}
packall() {  # everything but the summary and the store in one archive (8 files come back at most)
    (cd "$OUT" && set -- $(ls | grep -v -e '^summary.txt$' -e '^autotune.db.gz$' -e '^results.tgz$') && [ $# -gt 0 ] && tar -czf results.tgz "$@" && rm -rf "$@")
}
TABLE=results/h200/20261201i/call6/tc_targets.md  # the tables' layers
SEVEN_F2048="--shape N=7,K=1,C=512,F=2048,B=32"
case "${1:?1}" in
1)  # How the kernel waits on its mbarriers: a failed try-wait tried again at once, where cuDNN's
    # kernels sleep on the barrier (NANOSLEEP.SYNCS, a 50 us suspend-time hint). wait_texts.py's
    # two variants (hint: cuDNN's way; sleep: a 20 ns nanosleep between tries) against the kernel
    # on each dtype's weak layers' bests and one strong layer, rounds rotated (code_ab.py). Then
    # cuDNN's tile on 7x7 C = 512 F = 2048, 128 x 224 (130 tiles, one wave), which session 71's
    # subspace left out in 16 bits (it fits 2-3 stages stored by TMA): wide224.toml exhaustively
    # in every dtype.
    # Predicted: hint within 2% of the kernel everywhere, 1-3% faster on the 16-bit 7x7 1x1 layers
    # (the consumers' polling no longer competes with the producer's issue); sleep 0-2% slower
    # (a woken waiter is up to 20 ns late). 16-bit 128 x 224 with 3 stages stored by TMA within
    # 3% of the best of the rest on 7x7 C = 512 F = 2048 (one wave where 128 x 128 takes 1.6, but
    # three stages for 8 steps and a 57 KB store after the last).
    install || exit 1
    restore_db
    clocks
    python3 $HERE/wait_texts.py /tmp/var > /dev/null || exit 1
    T1=$(date -u '+%Y-%m-%d %H:%M:%S')
    for d in fp16 bf16 tf32; do  # the layer's 3 best again on this machine, then the 224s
        s=$SECONDS; timeout -k 5 60 python3 -m autotune remeasure --family tc_wgmma $SEVEN_F2048 --layout NHWC --dtype $d --top 3 --no-baseline > "$OUT/remeasure_$d.log" 2>&1
        say "remeasure $d: rc=$? $((SECONDS - s)) s"
        sweep wide224_$d $d $HERE/wide224.toml $SEVEN_F2048
    done
    python3 results/h200/20261202/kind_vs_rest.py "$AUTOTUNE_DB" --kind BN=224 --since "$T1" > "$OUT/bn224_vs_rest.md"; cat "$OUT/bn224_vs_rest.md" >> "$OUT/summary.txt"
    code_ab fp16 $SEVEN_F2048 --shape N=7,K=1,C=2048,F=512,B=32 --shape N=28,K=1,C=512,F=256,B=32 --shape N=20,K=5,C=96,F=256,B=128 --shape N=12,K=3,C=1024,F=1024,B=128
    code_ab bf16 $SEVEN_F2048 --shape N=14,K=1,C=1024,F=512,B=32 --shape N=14,K=1,C=1024,F=256,B=32 --shape N=28,K=1,C=512,F=256,B=32
    code_ab tf32 --shape N=28,K=1,C=256,F=512,B=32,stride=2 --shape N=28,K=1,C=512,F=256,B=32 --shape N=7,K=1,C=2048,F=512,B=32 --shape N=12,K=3,C=512,F=1024,B=128
    clocks
    save_db; packall ;;
2)  # Call 1: neither wait helped (hint / kernel 0.998-1.006 as geometric means a dtype, sleep
    # 1.008-1.025), and 128 x 224 lost on 7x7 C = 512 F = 2048 in 16 bits (0.0128 ms fp16 and
    # 0.0134 bf16 against stored bests of 0.0124 and 0.0123). What share of that layer's time do
    # its output's stores take? Its best, and 28x28 C = 512 F = 256's and 14x14 C = 1024
    # F = 512's, from the kernel, with its TMA stores commented out (no_store) and with its
    # multiplies commented out (no_mma), cold and warm (variant_time.py). Then the default
    # search to 150 evaluations of this code a layer on the layers below or near 1.0x cuDNN that
    # the store holds few configurations of (ResNet-50's 1x1 layers: 21 distinct configurations
    # in 16 bits, 44-93 in tf32), and both sides again on those layers.
    # Predicted: no_store 15-25% faster than the kernel on 7x7 C = 512 F = 2048 (6.4 MB written
    # against 3.6 MB read), 5-10% on the other two; the search moves 3-5 of these layers by
    # 2% or more, tf32's 28x28 C = 256 F = 512 stride 2 among them.
    install || exit 1
    restore_db
    clocks
    mkdir -p /tmp/no_store /tmp/no_mma
    sed -e 's/"cp.async.bulk.tensor.2d.global.shared::cta/"\/\/ cp.async.bulk.tensor.2d.global.shared::cta/' kernels/tc_wgmma.cu > /tmp/no_store/tc_wgmma.cu
    sed -e 's/"wgmma.mma_async.sync.aligned/"\/\/ wgmma.mma_async.sync.aligned/' kernels/tc_wgmma.cu > /tmp/no_mma/tc_wgmma.cu
    say "no_store: $(diff kernels/tc_wgmma.cu /tmp/no_store/tc_wgmma.cu | grep -c '^>') lines changed; no_mma: $(diff kernels/tc_wgmma.cu /tmp/no_mma/tc_wgmma.cu | grep -c '^>')"
    for d in fp16 bf16; do
        if [ $d = fp16 ]; then shapes="$SEVEN_F2048 --shape N=28,K=1,C=512,F=256,B=32"; else shapes="$SEVEN_F2048 --shape N=14,K=1,C=1024,F=512,B=32"; fi
        s=$SECONDS; timeout -k 5 120 python3 results/h200/20261202/variant_time.py "$AUTOTUNE_DB" --text no_store=/tmp/no_store --text no_mma=/tmp/no_mma --dtype $d $shapes > "$OUT/variant_$d.md" 2> "$OUT/variant_$d.log"
        say "variant_time $d: rc=$? $((SECONDS - s)) s"; cat "$OUT/variant_$d.md" >> "$OUT/summary.txt"
    done
    FEW="--shape N=56,K=1,C=256,F=64,B=32 --shape N=14,K=1,C=256,F=1024,B=32 --shape N=28,K=1,C=512,F=128,B=32 --shape N=28,K=1,C=128,F=512,B=32 --shape N=56,K=1,C=64,F=64,B=32 --shape N=28,K=1,C=256,F=512,B=32,stride=2"
    FEW_TF32="$FEW --shape N=28,K=1,C=512,F=256,B=32"
    search few_tf32 tf32 150 360 $FEW_TF32
    search few_bf16 bf16 150 250 $FEW
    search few_fp16 fp16 150 140 $FEW
    both_sides tf32 3 $FEW_TF32
    both_sides bf16 3 $FEW
    both_sides fp16 3 $FEW
    clocks
    save_db; packall ;;
3)  # Call 2: the search to 150 evaluations of this code a layer moved tf32's 28x28 C = 256
    # F = 512 stride 2 from 0.93x cuDNN to 1.19x and 28x28 C = 512 F = 256 from 0.94x to 1.20x
    # (persistent 128 x 128 tiles in turn, stored from registers), and bf16's 56x56 C = 256 F = 64
    # from 0.99x to 1.01x. Every other table layer has 3 evaluations of this code (the
    # remeasured bests; earlier searches ran on older texts). The same search on the table's
    # other layers below or near 1.0x cuDNN: tf32's 12x12 C = 512 and C = 1024, 7x7 C = 2048,
    # OverFeat's C = 96 and VGG-16's 28x28 C = 512; OverFeat's C = 96 and VGG-16's 224x224
    # C = 64 in 16 bits; then both sides on them.
    # Predicted: tf32's 12x12 layers to 1.0x or more (2-5% faster), the others within 2%.
    install || exit 1
    restore_db
    clocks
    MORE_TF32="--shape N=12,K=3,C=512,F=1024,B=128 --shape N=12,K=3,C=1024,F=1024,B=128 --shape N=7,K=1,C=2048,F=512,B=32 --shape N=20,K=5,C=96,F=256,B=128 --shape N=28,K=3,C=512,F=512,B=32"
    MORE_16="--shape N=20,K=5,C=96,F=256,B=128 --shape N=224,K=3,C=64,F=64,B=32"
    search more_tf32 tf32 150 260 $MORE_TF32
    search more_bf16 bf16 150 160 $MORE_16
    search more_fp16 fp16 150 70 $MORE_16
    both_sides tf32 3 $MORE_TF32
    both_sides bf16 3 $MORE_16
    both_sides fp16 3 $MORE_16
    clocks
    save_db; packall ;;
4)  # The tables with the searches' bests (calls 2-3 into the carried store): the tensor-core
    # peaks measured again, then ours beside cuDNN on every table layer, three times each, the
    # order alternating, in every dtype.
    # Predicted: tf32 1.20-1.23 over the 42 layers (two 28x28 1x1 layers up by a fifth), 36 of 38
    # with C > 3 at 1.0x or more; bf16 and fp16 within 2% of session 71's (1.19, 1.17).
    install || exit 1
    restore_db
    clocks
    s=$SECONDS; timeout -k 5 90 python3 -m autotune device --remeasure --ceiling tc_peak_tf32 --ceiling tc_peak_bf16 --ceiling tc_peak_fp16 > "$OUT/device.log" 2>&1
    say "device peaks: rc=$? $((SECONDS - s)) s"
    python3 -c "import sqlite3, sys; [print(*r) for r in sqlite3.connect(sys.argv[1]).execute(\"select name, value, unit, created_at from ceilings where name like 'tc_peak%' order by id desc limit 3\")]" "$AUTOTUNE_DB" >> "$OUT/summary.txt"
    for d in tf32 fp16 bf16; do both_sides $d 3 $(table_layers $TABLE $d all) $(table_layers $TABLE $d first); done
    clocks
    save_db; packall ;;
5)  # Call 4 (another machine than calls 1-2): fp16 1.137 over the 42 layers, where session 71
    # measured 1.175 and 1.172 on two machines; ours slower by 0-5% on most layers, cuDNN faster
    # by 0-5%, searched or not. The searches (calls 2-3, on two machines) picked new bests on
    # eight fp16 layers, the fastest single evaluation each: is any new pick slower here than the
    # one before it? Ours and cuDNN on those layers with the bests before the searches
    # (.dbcarry/old_fp16.db: session 71's fp16 evaluations of this code) and with the new
    # ones, then the whole fp16 table again on this machine.
    # Predicted: old and new picks within 2% of each other on this machine (the searches' gains
    # there were 0-4%); the fp16 table between 1.137 and 1.175.
    install || exit 1
    restore_db
    clocks
    SEARCHED="--shape N=56,K=1,C=256,F=64,B=32 --shape N=14,K=1,C=256,F=1024,B=32 --shape N=28,K=1,C=512,F=128,B=32 --shape N=28,K=1,C=128,F=512,B=32 --shape N=56,K=1,C=64,F=64,B=32 --shape N=28,K=1,C=256,F=512,B=32,stride=2 --shape N=20,K=5,C=96,F=256,B=128 --shape N=224,K=3,C=64,F=64,B=32"
    for store in old new; do
        db=$AUTOTUNE_DB; [ $store = old ] && db=.dbcarry/old_fp16.db
        s=$SECONDS; timeout -k 5 90 python3 results/h200/20261202/both_sides.py "$db" --dtype fp16 --repeats 3 $SEARCHED > "$OUT/searched_$store.md" 2> "$OUT/searched_$store.log"
        say "searched fp16, $store picks: rc=$? $((SECONDS - s)) s"; grep -E "geometric mean, all" "$OUT/searched_$store.md" >> "$OUT/summary.txt"
    done
    both_sides fp16 3 $(table_layers $TABLE fp16 all) $(table_layers $TABLE fp16 first)
    clocks
    packall ;;
esac
