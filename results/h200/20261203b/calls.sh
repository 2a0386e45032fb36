#!/usr/bin/env bash
# Session 79's GPU calls (H200): LIMIT=N OUT=$OUT bash results/h200/20261203b/calls.sh K, from
# the checkout root, with `( [ -d .whlmin ] && rm -rf .whl && mv .whlmin .whl ); . .whl/env.sh &&`
# before it and carry [".whlmin"] (`.whl` less Kernel Tuner's wheels; ../20261203/calls.sh
# says how the tables' store travels where a call needs it).
set -u
. "$(dirname "$0")/../calls_lib.sh"
HERE=results/h200/20261203b
BOTH=results/h200/20261202e/both_sides_best.py  # ours (the store's pick) and cuDNN, in turns
TABLE=results/h200/20261201i/call6/tc_targets.md  # the tables' layers
NETS="--shapes alexnet --shapes overfeat --shapes vgg16 --shapes resnet50"
ONES="--shape N=7,K=1,C=512,F=2048,B=32 --shape N=14,K=1,C=1024,F=512,B=32 --shape N=14,K=1,C=1024,F=256,B=32 --shape N=28,K=1,C=512,F=256,B=32"
PEAKS="--shape N=12,K=3,C=1024,F=1024,B=128 --shape N=28,K=3,C=512,F=512,B=32 --shape N=12,K=3,C=512,F=1024,B=128"
mark() { python3 results/h200/20261203/store_delta.py mark "$AUTOTUNE_DB" > /tmp/marks.json; }
delta() { python3 results/h200/20261203/store_delta.py cut "$AUTOTUNE_DB" /tmp/marks.json /tmp/delta.db | tee -a "$OUT/summary.txt" && gzip -c /tmp/delta.db > "$OUT/delta.db.gz"; }
remeasure() {  # DTYPE TOP SECONDS SHAPE-ARGS...: the previous code's top configurations, now
    local d=$1 top=$2 t=$3 s=$SECONDS; shift 3
    [ "$t" -gt $(( $(left) - 20 )) ] && t=$(( $(left) - 20 ))
    [ "$t" -lt 20 ] && { say "remeasure $d: not run (time)"; return; }
    timeout -k 5 $(( t + 30 )) python3 -m autotune remeasure --top $top --no-baseline --family tc_wgmma "$@" --dtype $d --layout NHWC --time-limit $t > "$OUT/remeasure_${d}_$top.md" 2> "$OUT/remeasure_${d}_$top.log"
    say "remeasure $d top $top: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/remeasure_${d}_$top.log")"
}
both_sides() {  # DTYPE REPEATS SHAPE-ARGS...: ours (the store's best) and cuDNN, order alternating
    local d=$1 r=$2 s=$SECONDS t=$(( $(left) - 15 )); shift 2
    [ "$t" -lt 30 ] && { say "both_sides $d: not run (time)"; return; }
    timeout -k 5 $t python3 $BOTH "$AUTOTUNE_DB" --dtype $d --repeats $r "$@" > "$OUT/both_sides_$d.md" 2> "$OUT/both_sides_$d.log"
    say "both_sides $d x$r: rc=$? $((SECONDS - s)) s"; grep -E "geometric|C > 3 at" "$OUT/both_sides_$d.md" >> "$OUT/summary.txt"
}
peaks() {
    s=$SECONDS; timeout -k 5 90 python3 -m autotune device --remeasure --ceiling tc_peak_tf32 --ceiling tc_peak_bf16 --ceiling tc_peak_fp16 > "$OUT/device.log" 2>&1
    say "peaks: rc=$? $((SECONDS - s)) s"
}
clocks() { nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader >> "$OUT/summary.txt"; }
# Configurations (the stored picks of session 78's store, and the tiles it compared them with).
C='"C_OUTER":1,"L1_CACHE":0,"PINGPONG":0,"PRODUCER":1,"SPLIT_CLUSTER":0,"SPLIT_K":1,"STAGING":1,"STORE_TMA":1,"STREAM_K":0,"TILES_PER_BLOCK":1,"TMA":1'
PICK7='{"BM":128,"BN":112,"GEMM_1X1":1,"MULTICAST":0,"MULTICAST_BLOCKS":2,"PERSISTENT":1,"STAGES":6,"WG":2,'$C'}'
W224='{"BM":128,"BN":224,"GEMM_1X1":1,"MULTICAST":0,"MULTICAST_BLOCKS":2,"PERSISTENT":0,"STAGES":3,"WG":2,'$C'}'
W256C4='{"BM":256,"BN":128,"GEMM_1X1":1,"MULTICAST":1,"MULTICAST_BLOCKS":4,"PERSISTENT":0,"STAGES":3,"WG":2,'$C'}'
W256='{"BM":256,"BN":128,"GEMM_1X1":1,"MULTICAST":0,"MULTICAST_BLOCKS":2,"PERSISTENT":0,"STAGES":3,"WG":2,'$C'}'
PICK14='{"BM":192,"BN":64,"GEMM_1X1":1,"MULTICAST":0,"MULTICAST_BLOCKS":2,"PERSISTENT":0,"STAGES":6,"WG":3,'$C'}'
PICK28='{"BM":128,"BN":128,"GEMM_1X1":1,"MULTICAST":1,"MULTICAST_BLOCKS":2,"PERSISTENT":1,"STAGES":6,"WG":2,'$C'}'
timeline() {  # NAME SHAPE CONFIG...: one block's time split by clock stamps (timeline.py), and
    # with BEFORE set, the configurations timed without stamps in that kernel text too
    local name=$1 shape=$2 s=$SECONDS; shift 2; local args=(${BEFORE:+--baseline-source $BEFORE})
    for c in "$@"; do args+=(--config "$c"); done
    timeout -k 5 $(( $(left) - 10 )) python3 $HERE/timeline.py --shape $shape --dtype bf16 "${args[@]}" --output "$OUT/$name.json" > "$OUT/$name.md" 2> "$OUT/$name.log"
    say "timeline $name: rc=$? $((SECONDS - s)) s"
}
case "${1:?1}" in
1)  # Session 78's queued step: split one block's time on the 16-bit 1x1 layers below cuDNN
    # (bf16 7x7 C = 512 F = 2048 at 0.946x: ours 12.4 us, cuDNN 11.8, protocol 2) with clock
    # stamps, the pick beside the tiles that make cuDNN's one wave (128 x 224; 256 x 128 alone
    # and in clusters of four sharing the input), and the picks of 14x14 C = 1024 F = 256 and
    # 28x28 C = 512 F = 256.
    # Predicted (7x7 pick, 128 x 112, two tiles a block on most): the blocks enter within
    # 1 us of each other; the first data lands 1.5-2.5 us after the producer's first copy
    # (DRAM, cold); a step's data every 0.4-0.7 us after (30 KB a step from L2 is ~0.7 us at
    # a 132th of 5.5 TB/s, the multiply 0.22 us), so the loads bound the main loop; staging
    # 0.2-0.4 us; the last stores' reads 0.3-0.6 us. 256 x 128 in clusters of four: steps
    # no faster than alone (0.5 us of multiply a step), the first data later (the cluster's
    # blocks start together).
    install || exit 1
    clocks
    timeline t7 N=7,K=1,C=512,F=2048,B=32 "$PICK7" "$W224" "$W256" "$W256C4"
    timeline t14 N=14,K=1,C=1024,F=256,B=32 "$PICK14"
    timeline t28 N=28,K=1,C=512,F=256,B=32 "$PICK28"
    clocks
    pack ;;
2)  # Call 1 again with stamps that only write (call 1's read each stamp's slot first, a global
    # load that stalled the stamping thread and its warpgroup's barrier), each beside its
    # event time without stamps. Then stream-K at 192 x 128 (three consumer warpgroups), which
    # no store had measured, beside the persistent and one-tile schedules of the same tile, on
    # the three 16-bit layers nearest the peak (peak_sk.toml, 13 configurations a layer,
    # exhaustive, into a fresh store returned whole).
    # Predicted: the stamps' cost under 2% of the event time; the phases as call 1's less about
    # 0.25 us each where a read stamp stood. Stream-K on the 12x12 layers (5.82 waves of 192 x
    # 128) within 1% of the pick (multicast pairs, persistent), either way: its last wave's
    # 3% against its cost (2.5% at 128 x 128, where it cannot multicast either); on 28x28
    # (3.97 waves) slower.
    install || exit 1
    clocks
    timeline t7 N=7,K=1,C=512,F=2048,B=32 "$PICK7" "$W224" "$W256" "$W256C4"
    timeline t14 N=14,K=1,C=1024,F=256,B=32 "$PICK14"
    timeline t28 N=28,K=1,C=512,F=256,B=32 "$PICK28"
    clocks
    for d in bf16 fp16; do
        s=$SECONDS; timeout -k 5 $(( $(left) / 2 - 10 )) python3 -m autotune run --family tc_wgmma --shape N=12,K=3,C=1024,F=1024,B=128 --shape N=12,K=3,C=512,F=1024,B=128 --shape N=28,K=3,C=512,F=512,B=32 --layout NHWC --dtype $d --subspace $HERE/peak_sk.toml --exhaustive --no-baseline > "$OUT/peak_sk_$d.log" 2>&1
        say "peak_sk $d: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/peak_sk_$d.log")"
    done
    clocks
    save_db
    pack ;;
3)  # 16-bit outputs without an epilogue staged by stmatrix (four 8 x 8 matrices a warp's
    # instruction) instead of a st.shared a thread and column pair, with the bounds checks the
    # map's clipping makes needless dropped. Calls 1-2: staging a 16-bit 128 x 224 tile took
    # 0.97 us and a 128 x 112 tile 0.36 us, issue-bound (8 consumer warps, ~8 instructions a
    # pair). The GPU tests of the kernel, then call 2's timelines, each configuration timed
    # without stamps in this text and in the text before (BEFORE, carried as .before/), in turns.
    # Predicted: staging 0.25-0.35 us (128 x 224) and 0.10-0.15 (128 x 112); event times
    # 2-3% less for the 7x7 pick and 28x28's, ~5% for 128 x 224, ~1% for 14x14's 192 x 64.
    install || exit 1
    clocks
    CAP=260 gpu_tests test_gpu_tc_wgmma
    export BEFORE=.before/tc_wgmma.cu
    timeline t7 N=7,K=1,C=512,F=2048,B=32 "$PICK7" "$W224" "$W256" "$W256C4"
    timeline t14 N=14,K=1,C=1024,F=256,B=32 "$PICK14"
    timeline t28 N=28,K=1,C=512,F=256,B=32 "$PICK28"
    clocks
    grep -h "text:" "$OUT"/t*.md >> "$OUT/summary.txt"
    (cd "$OUT" && tar -czf stamps.tgz t*.json && rm t*.json)
    pack ;;
4)  # Call 3: staging by stmatrix passed the kernel's GPU tests and took the 7x7 pick 11.62 ->
    # 11.10 us, 128 x 224 12.06 -> 11.33, 28x28's pick 17.31 -> 17.06, 14x14's unchanged. The
    # kernel's text is new (b42e070), so every stored evaluation of tc_wgmma is of older code:
    # the tables' store (.dbcarry) brought to it by `autotune remeasure`, each table layer's
    # five fastest configurations of the older code checked and timed now (tf32, whose path did
    # not change, its three fastest), and on the four
    # 16-bit 1x1 layers below cuDNN the twelve fastest (128 x 224 ranked 11th on 7x7 C = 512
    # F = 2048 in bf16). The store comes back whole (call 5 needs it if this machine goes).
    # Predicted: 150-210 configurations a dtype, 60-110 s each; on the 16-bit 1x1 layers the
    # picks 2-5% faster than their old figures; elsewhere within 1% (long reductions: the
    # epilogue is a small part).
    install || exit 1
    restore_db
    mark
    clocks
    for d in bf16 fp16; do remeasure $d 5 110 $NETS; done
    remeasure tf32 3 80 $NETS  # its code path is the same text as before: the top three
    for d in bf16 fp16; do remeasure $d 12 45 $ONES; done
    clocks
    delta; save_db; pack ;;
5)  # The tables with call 4's picks: ours (the store's pick) and cuDNN, three times each a
    # layer, the order alternating, then the peaks and each 16-bit dtype's peak share.
    # Predicted: bf16 7x7 C = 512 F = 2048 0.946 -> 0.98-1.00x, the other 16-bit 1x1 layers
    # below cuDNN up by 1-3%; geometric means up 0.3-0.8% in 16 bits, tf32 within 0.5%.
    install || exit 1
    restore_db
    clocks
    for d in bf16 fp16 tf32; do both_sides $d 3 $(table_layers $TABLE $d all) $(table_layers $TABLE $d first); done
    peaks
    python3 results/h200/20261202c/peak_share.py "$AUTOTUNE_DB" "$OUT"/both_sides_bf16.md "$OUT"/both_sides_fp16.md > "$OUT/peak_share.md" 2>&1
    cat "$OUT/peak_share.md" >> "$OUT/summary.txt"
    clocks
    pack ;;
6)  # Call 5: 34 (bf16), 33 (fp16) and 35 (tf32) of 38 layers with C > 3 at 1.0x cuDNN or more
    # (32, 32, 36 in session 74); bf16 7x7 C = 512 F = 2048 0.946 -> 0.976. The 16-bit 1x1
    # layers still below cuDNN hold only their remeasured top 12 of the new code: the default
    # search on them to 40 evaluations, then both sides on them again. (Run on call 5's
    # machine, whose store holds calls 4's evaluations.)
    # Predicted: the pick moves on 3-5 of the 7 studies, by 1-3%; bf16 7x7 C = 512 F = 2048
    # to 0.99-1.0x; the others within 1% of 1.0x.
    install || exit 1
    restore_db
    mark
    clocks
    s=$SECONDS; timeout -k 5 120 python3 -m autotune run --family tc_wgmma --shape N=7,K=1,C=512,F=2048,B=32 --shape N=14,K=1,C=1024,F=256,B=32 --shape N=28,K=1,C=512,F=256,B=32 --layout NHWC --dtype bf16 --budget 40 --no-baseline --time-limit 100 > "$OUT/search_bf16.log" 2>&1
    say "search bf16 to 40: rc=$? $((SECONDS - s)) s: $(grep 'new evaluations' "$OUT/search_bf16.log")"
    s=$SECONDS; timeout -k 5 120 python3 -m autotune run --family tc_wgmma --shape N=7,K=1,C=512,F=2048,B=32 --shape N=7,K=1,C=2048,F=512,B=32 --shape N=14,K=1,C=1024,F=256,B=32 --shape N=28,K=1,C=512,F=256,B=32 --layout NHWC --dtype fp16 --budget 40 --no-baseline --time-limit 100 > "$OUT/search_fp16.log" 2>&1
    say "search fp16 to 40: rc=$? $((SECONDS - s)) s: $(grep 'new evaluations' "$OUT/search_fp16.log")"
    both_sides bf16 3 --shape N=7,K=1,C=512,F=2048,B=32 --shape N=14,K=1,C=1024,F=256,B=32 --shape N=28,K=1,C=512,F=256,B=32
    both_sides fp16 3 --shape N=7,K=1,C=512,F=2048,B=32 --shape N=7,K=1,C=2048,F=512,B=32 --shape N=14,K=1,C=1024,F=256,B=32 --shape N=28,K=1,C=512,F=256,B=32
    clocks
    delta; pack ;;
7)  # Call 6: after the search those layers stand at 0.995-1.016x cuDNN. The 16-bit tables
    # whole again with the picks as they now are (call 5's machine and store, call 6's
    # evaluations in it), and each 16-bit dtype's peak share against call 5's peaks.
    # Predicted: bf16 36 and fp16 35 of 38 layers with C > 3 at 1.0x or more, OverFeat's
    # C = 96 still below in both (0.96x, a 5x5 layer whose last channel block is half full).
    install || exit 1
    restore_db
    clocks
    for d in bf16 fp16; do both_sides $d 3 $(table_layers $TABLE $d all) $(table_layers $TABLE $d first); done
    python3 results/h200/20261202c/peak_share.py "$AUTOTUNE_DB" "$OUT"/both_sides_bf16.md "$OUT"/both_sides_fp16.md > "$OUT/peak_share.md" 2>&1
    cat "$OUT/peak_share.md" >> "$OUT/summary.txt"
    clocks
    pack ;;
esac
