#!/usr/bin/env bash
# Session 69's GPU calls (H200): LIMIT=540 OUT=$OUT bash results/h200/20261202/calls.sh N, from
# the checkout root, with `( [ -d .whlmin ] && rm -rf .whl && mv .whlmin .whl ); . .whl/env.sh &&`
# before it and carry [".whlmin"] (`.whl` less Kernel Tuner's wheels). Calls 1-5 began with
# `mkdir -p .dbcarry && cp results/h200/20261201k/call3/store.db.gz .dbcarry/autotune.db.gz`
# (session 68's tables' store; restore_db reads .dbcarry), call 6 carried call 5's store as
# .dbcarry too; each was sent with results/campaigns/20261129-h100.db.gz and
# results/recordings/h100.db.gz (call 6: and ../20261201k/call3/store.db.gz) moved out of the
# checkout, which is otherwise larger than one call carries.
set -u
. "$(dirname "$0")/../calls_lib.sh"
HERE=results/h200/20261202
TABLE=results/h200/20261201i/call6/tc_targets.md
clocks() { nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader >> "$OUT/summary.txt"; }
both_sides() {  # DTYPE REPEATS SHAPE-ARGS...: ours and cuDNN, order alternating (both_sides.py)
    local d=$1 r=$2 s=$SECONDS t=$(( $(left) - 15 )); shift 2
    [ "$t" -lt 30 ] && { say "both_sides $d: not run (time)"; return; }
    timeout -k 5 $t python3 $HERE/both_sides.py "$AUTOTUNE_DB" --dtype $d --repeats $r "$@" > "$OUT/both_sides_$d.md" 2> "$OUT/both_sides_$d.log"
    say "both_sides $d x$r: rc=$? $((SECONDS - s)) s"; grep -E "geometric|C > 3 at" "$OUT/both_sides_$d.md" >> "$OUT/summary.txt"
}
# bf16's layers below cuDNN in session 68's call 3 (ResNet-50's 1x1 layers with long
# reductions), then four where ours led (short and long).
WEAK_1X1="--shape N=28,K=1,C=512,F=256,B=32 --shape N=14,K=1,C=1024,F=256,B=32 --shape N=14,K=1,C=1024,F=512,B=32 --shape N=7,K=1,C=512,F=2048,B=32 --shape N=7,K=1,C=2048,F=512,B=32"
LEADS="--shape N=14,K=3,C=512,F=512,B=32 --shape N=56,K=1,C=64,F=256,B=32 --shape N=28,K=3,C=128,F=128,B=32 --shape N=12,K=3,C=1024,F=1024,B=128"
case "${1:?1}" in
1)  # Under Nsight Compute (L2 invalidated, session 68's call 3) ours ran bf16's 7x7 C = 2048 in
    # 10.37 us at 1.75 GHz and cuDNN's nvjet kernel in 11.01 us at 1.78 GHz; under protocol 2
    # (a 256 MiB memset before each sample, CUDA events, 1.98 GHz) ours took 13.6 us and cuDNN
    # 12.7. Where does a sample's time go? Nsight Systems over both sides' measurements
    # (both_sides.py) on the weak 1x1 layers and four where ours leads; flush_gaps.py splits
    # each sample into the gap from the flush's end to the kernel's start and the kernels' own
    # time. Then every table layer, ours and cuDNN, three times each in alternating order, in
    # every dtype: the tables' figures with repeats (rest_ab.py measured each side once, ours
    # first).
    # Predicted: the gap after the flush within 0.5 us between the sides; ours' kernel 2-3 us
    # longer than Nsight Compute's clean-L2 figure scaled to 1.98 GHz (9.2 us), cuDNN's less
    # (the dirty L2 the memset leaves costs ours more); the means with repeats within 2% of
    # call 3's (tf32 1.193, bf16 1.173, fp16 1.124).
    install || exit 1
    restore_db
    clocks
    NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda/nsight-systems*/bin/nsys 2>/dev/null | head -1)
    say "nsys: ${NSYS:-none}"
    if [ -n "$NSYS" ]; then
        s=$SECONDS
        timeout -k 5 200 "$NSYS" profile -t cuda --force-overwrite true -o /tmp/trace \
            python3 $HERE/both_sides.py "$AUTOTUNE_DB" --dtype bf16 --repeats 2 $WEAK_1X1 $LEADS > "$OUT/nsys_sides_bf16.md" 2> "$OUT/nsys.log"
        say "nsys both_sides bf16: rc=$? $((SECONDS - s)) s"
        timeout -k 5 120 "$NSYS" stats -r cuda_gpu_trace -f csv -o /tmp/trace --force-export true /tmp/trace.nsys-rep >> "$OUT/nsys.log" 2>&1
        python3 $HERE/flush_gaps.py /tmp/trace_cuda_gpu_trace.csv > "$OUT/gaps_bf16.md" 2>> "$OUT/nsys.log"
        cat "$OUT/gaps_bf16.md" >> "$OUT/summary.txt"
        gzip -c /tmp/trace_cuda_gpu_trace.csv > "$OUT/trace_bf16.csv.gz"
    fi
    for d in fp16 bf16 tf32; do both_sides $d 3 $(table_layers $TABLE $d all) $(table_layers $TABLE $d first); done
    clocks
    pack ;;
2)  # Call 1: with repeats and the order alternating, all three means are above 1.15 (fp16
    # 1.165, bf16 1.186, tf32 1.195); below 1.0 are still the 16-bit 1x1 layers with C >= 512
    # (0.905-0.998), OverFeat's C = 96 (0.97) and tf32's 28x28 1x1 layers. The machine has no
    # Nsight Systems. How much of those layers' time do their loads take? Each layer's best
    # from the kernel and from the kernel with its wgmma instructions commented out (no_mma:
    # the same loads, barriers and stores), timed cold (protocol 2's flush) and warm (no flush),
    # rounds rotated (variant_time.py); bf16's weak 1x1 layers and four where ours leads, then
    # tf32's 28x28 1x1 layers.
    # Predicted: on the weak 1x1 layers no_mma cold within 20% of the kernel cold (the loads
    # bound them), the kernel warm 15-25% faster than cold; on the 3x3 layers where ours leads
    # no_mma well under half the kernel's time.
    install || exit 1
    restore_db
    clocks
    mkdir -p /tmp/no_mma
    sed -e 's/"wgmma.mma_async.sync.aligned/"\/\/ wgmma.mma_async.sync.aligned/' kernels/tc_wgmma.cu > /tmp/no_mma/tc_wgmma.cu
    say "no_mma: $(diff kernels/tc_wgmma.cu /tmp/no_mma/tc_wgmma.cu | grep -c '^>') lines changed"
    for d in bf16 tf32; do
        if [ $d = bf16 ]; then shapes="$WEAK_1X1 $LEADS"; else shapes="--shape N=28,K=1,C=512,F=256,B=32 --shape N=28,K=1,C=256,F=512,B=32,stride=2 --shape N=7,K=1,C=2048,F=512,B=32 --shape N=14,K=3,C=512,F=512,B=32"; fi
        s=$SECONDS; timeout -k 5 $(( $(left) - 10 )) python3 $HERE/variant_time.py "$AUTOTUNE_DB" --text no_mma=/tmp/no_mma --dtype $d $shapes > "$OUT/variant_$d.md" 2> "$OUT/variant_$d.log"
        say "variant_time $d: rc=$? $((SECONDS - s)) s"; cat "$OUT/variant_$d.md" >> "$OUT/summary.txt"
    done
    clocks
    pack ;;
3)  # Call 2's warm column timed each sample alone, the host waiting after each: the start event
    # ran before the host had submitted the launch, so warm counted the submission and came out
    # slower than cold. variant_time.py now queues the warm samples back to back before it
    # waits. Call 2 again.
    # Predicted: warm 20-35% faster than cold on the 1x1 layers (their 8.5-13 MB come from
    # DRAM cold), no_mma warm within 10% of the kernel warm there.
    install || exit 1
    restore_db
    bash "$0" 2 ;;
4)  # Calls 2-3: with its wgmma instructions commented out the kernel takes as long on bf16's
    # weak 1x1 layers, cold or warm (C = 2048: 12.2 against 11.5 us cold, 10.7 and 10.7 warm):
    # the loads bound them. New: clusters of four blocks sharing one operand's tile
    # (MULTICAST_BLOCKS = 4), each copying a quarter, so that L2 serves the shared tile once a
    # step for four. One such configuration alone first (a hang would show here), then the
    # multicast GPU tests (groups of two and four, odd shapes, every dtype) and the half-block
    # ones (which draw clusters too), then groups_of_four.toml on ResNet-50's five 1x1 layers
    # with long reductions in every dtype, beside each layer's stored 3 best measured again
    # with this code (kind_vs_rest.py).
    # Predicted: bf16's 7x7 C = 2048 at 128 x 64 sharing the input in fours reads 96 rows a
    # step from L2 where pairs read 128: 10-15% faster than the best pairs (12.2 -> ~10.7 us),
    # above cuDNN's 12.1; 5-10% on the other four layers.
    install || exit 1
    restore_db
    clocks
    s=$SECONDS; timeout -k 5 60 python3 -m autotune run --family tc_wgmma --shape N=7,K=1,C=2048,F=512,B=32 --layout NHWC --dtype bf16 --subspace $HERE/one_group.toml --exhaustive --no-baseline --storage /tmp/one.db > "$OUT/one_group.log" 2>&1
    say "one group of four: rc=$? $((SECONDS - s)) s: $(grep -E "new evaluations|FAIL|WRONG" "$OUT/one_group.log" | tail -2 | tr '\n' ' ')"
    T1=$(date -u '+%Y-%m-%d %H:%M:%S')
    s=$SECONDS; timeout -k 5 220 python3 -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_gpu_tc_wgmma.py -k "${TESTS:-multicast or half_full}" > "$OUT/test_multicast.log" 2>&1
    rc=$?; say "test_gpu_tc_wgmma -k '${TESTS:-multicast or half_full}': rc=$rc $((SECONDS - s)) s: $(tail -1 "$OUT/test_multicast.log")"
    if [ $rc -eq 0 ]; then
        for d in bf16 fp16 tf32; do
            t=$(( $(left) - 40 )); [ "$t" -lt 30 ] && { say "sweep $d: not run (time)"; continue; }
            s=$SECONDS; timeout -k 5 $t python3 -m autotune run --family tc_wgmma $WEAK_1X1 --layout NHWC --dtype $d --subspace $HERE/groups_of_four.toml --exhaustive --no-baseline --time-limit $(( t - 10 )) > "$OUT/sweep_$d.log" 2>&1
            say "sweep groups of four $d: rc=$? $((SECONDS - s)) s: $(grep -E "new evaluations" "$OUT/sweep_$d.log" | tail -1)"
            t=$(( $(left) - 10 )); [ "$t" -lt 20 ] && continue
            s=$SECONDS; timeout -k 5 $t python3 -m autotune remeasure --family tc_wgmma $WEAK_1X1 --layout NHWC --dtype $d --top 3 --no-baseline > "$OUT/remeasure_$d.log" 2>&1
            say "remeasure $d top 3: rc=$? $((SECONDS - s)) s"
        done
        python3 $HERE/kind_vs_rest.py "$AUTOTUNE_DB" --kind MULTICAST_BLOCKS=4 --since "$T1" > "$OUT/groups_vs_rest.md"; cat "$OUT/groups_vs_rest.md" >> "$OUT/summary.txt"
    fi
    clocks
    save_db; pack ;;
5)  # Call 4: one group of four ran alone (OK); the multicast tests passed in every dtype, but
    # fp16's half-block test failed before it ran anything: a draw of the changed space was
    # stream-K at BN = 256, which keeps the full box, and the test asserted every draw is a
    # half block. The test now leaves such draws out. Call 4 again with fp16's half-block test
    # alone, then the sweeps.
    TESTS="half_full and fp16" bash "$0" 4 ;;
6)  # The kernel's text changed (MULTICAST_BLOCKS; comments): every stored evaluation of it is
    # of its previous code. Every table layer's 3 fastest stored configurations measured again
    # with this code (call 4's evaluations among them), then ours and cuDNN three times each,
    # order alternating, in every dtype (call 1's way).
    # Predicted: the means within 1% of call 1's but for the 1x1 layers call 4 moved.
    install || exit 1
    restore_db
    clocks
    for d in tf32 bf16 fp16; do
        t=$(( $(left) - 280 )); [ "$t" -lt 40 ] && { say "remeasure $d: not run (time)"; continue; }
        s=$SECONDS; timeout -k 5 $t python3 -m autotune remeasure --family tc_wgmma --shapes alexnet --shapes overfeat --shapes vgg16 --shapes resnet50 --layout NHWC --dtype $d --top 3 --no-baseline --time-limit $(( t - 10 )) > "$OUT/remeasure_$d.log" 2>&1
        say "remeasure $d: rc=$? $((SECONDS - s)) s"
    done
    for d in fp16 bf16 tf32; do both_sides $d 3 $(table_layers $TABLE $d all) $(table_layers $TABLE $d first); done
    clocks
    save_db; pack ;;
7)  # The kernel's whole GPU test file with this text (calls 4-5 ran its multicast and half-block
    # tests; every path's text is the same but for the clusters' macros and comments).
    install || exit 1
    clocks
    CAP=280 gpu_tests test_gpu_tc_wgmma
    clocks
    pack ;;
esac
