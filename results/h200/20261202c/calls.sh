#!/usr/bin/env bash
# Session 71's GPU calls (H200): LIMIT=N OUT=$OUT bash results/h200/20261202c/calls.sh K, from
# the checkout root, with `( [ -d .whlmin ] && rm -rf .whl && mv .whlmin .whl ); . .whl/env.sh &&`
# before it and carry [".whlmin"] (`.whl` less Kernel Tuner's wheels), and with ".dbcarry" too
# where a call reads the tables' store (../20261201k/call3/store.db.gz with
# ../20261202/store_delta.db.gz and ../20261202b/store_delta.db.gz merged in, as
# autotune.db.gz). Sent with results/campaigns/20261129-h100.db.gz,
# results/recordings/h100.db.gz and ../20261201k/call3/store.db.gz moved out of the checkout,
# which is otherwise larger than one call carries.
set -u
. "$(dirname "$0")/../calls_lib.sh"
HERE=results/h200/20261202c
clocks() { nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader >> "$OUT/summary.txt"; }
TAIL='"C_OUTER":1,"L1_CACHE":0,"PINGPONG":0,"PRODUCER":1,"SPLIT_CLUSTER":0,"SPLIT_K":1,"STAGING":1,"STORE_TMA":1,"STREAM_K":0,"TILES_PER_BLOCK":1,"TMA":1'
C2048="{\"BM\":128,\"BN\":64,\"GEMM_1X1\":1,\"MULTICAST\":1,\"MULTICAST_BLOCKS\":4,\"PERSISTENT\":0,\"STAGES\":7,\"WG\":2,$TAIL}"
C1024="{\"BM\":192,\"BN\":64,\"GEMM_1X1\":0,\"MULTICAST\":0,\"MULTICAST_BLOCKS\":2,\"PERSISTENT\":0,\"STAGES\":6,\"WG\":3,$TAIL}"
METRICS="gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,sm__cycles_elapsed.avg.per_second"
lines() { grep -E "gpu__time|dram__bytes|lts__t_sectors|per_second|==PROF==.*passes|Error|ERR|nvjet|tc_wgmma \(" "$1" | sed 's/  */ /g' | tr '\n' ';'; }
ours() {  # NAME REPLAY CACHE SHAPE DTYPE CONFIG: the fourth launch of placement.py (each flushed)
    timeout -k 5 150 "$NCU" --replay-mode $2 --target-processes all --kernel-name regex:^tc_wgmma\$ --launch-skip 3 --launch-count 1 --cache-control $3 --clock-control none --metrics $METRICS \
        python3 results/h200/20261201/placement.py --shape "$4" --dtype "$5" --config "$6" --repeats 5 > "$OUT/ours_$1.txt" 2>&1
    say "ours $1 ($2, cache $3): rc=$? $(lines "$OUT/ours_$1.txt")"
}
cudnn() {  # NAME REPLAY CACHE DTYPE N K C F B STRIDE [benchmark]: the last flushed round's kernels
    local name=$1 replay=$2 cache=$3 d=$4; shift 4
    timeout -k 5 150 "$NCU" --replay-mode $replay --target-processes all --profile-from-start off --cache-control $cache --clock-control none --metrics $METRICS \
        python3 $HERE/cudnn_app.py "${@:1:6}" "$d" "${@:7}" > "$OUT/cudnn_$name.txt" 2>&1
    say "cudnn $name ($replay, cache $cache): rc=$? $(lines "$OUT/cudnn_$name.txt")"
}
sweep() {  # NAME DTYPE SUBSPACE SHAPE-ARGS...: a subspace exhaustively, no baseline
    local name=$1 d=$2 sub=$3 s=$SECONDS t=$(( $(left) - 120 )); shift 3
    [ "$t" -lt 20 ] && { say "sweep $name: not run (time)"; return; }
    timeout -k 5 "$t" python3 -m autotune run --family tc_wgmma "$@" --layout NHWC --dtype "$d" --subspace "$sub" --exhaustive --no-baseline --time-limit $(( t - 10 )) > "$OUT/sweep_$name.log" 2>&1
    say "sweep $name: rc=$? $((SECONDS - s)) s: $(grep -E "new evaluations" "$OUT/sweep_$name.log" | tail -1)"
}
both_sides() {  # DTYPE REPEATS SHAPE-ARGS...: ours and cuDNN, order alternating (session 69's)
    local d=$1 r=$2 s=$SECONDS t=$(( $(left) - 15 )); shift 2
    [ "$t" -lt 30 ] && { say "both_sides $d: not run (time)"; return; }
    timeout -k 5 $t python3 results/h200/20261202/both_sides.py "$AUTOTUNE_DB" --dtype $d --repeats $r "$@" > "$OUT/both_sides_$d.md" 2> "$OUT/both_sides_$d.log"
    say "both_sides $d x$r: rc=$? $((SECONDS - s)) s"; grep -E "geometric|C > 3 at" "$OUT/both_sides_$d.md" >> "$OUT/summary.txt"
}
remeasure() {  # DTYPE: every table layer's 3 best stored configurations with this code
    local d=$1 s=$SECONDS
    timeout -k 5 $(( $(left) - 20 )) python3 -m autotune remeasure --family tc_wgmma --shapes alexnet --shapes overfeat --shapes vgg16 --shapes resnet50 --layout NHWC --dtype $d --top 3 --no-baseline > "$OUT/remeasure_$d.log" 2>&1
    say "remeasure $d: rc=$? $((SECONDS - s)) s"
}
TABLE=results/h200/20261201i/call6/tc_targets.md  # the tables' layers
packall() {  # everything but the summary and the store in one archive (8 files come back at most)
    (cd "$OUT" && set -- $(ls | grep -v -e '^summary.txt$' -e '^autotune.db.gz$' -e '^results.tgz$') && [ $# -gt 0 ] && tar -czf results.tgz "$@" && rm -rf "$@")
}
case "${1:?1}" in
1)  # Session 70: under Nsight Compute without its own cache control after protocol 2's flush,
    # cuDNN's kernel on fp16's 7x7 C = 2048 read 1.57 MB of the layer's 8.5 MB from DRAM with
    # every L2 lookup a hit, ours all 8.5 MB; yet neither a persisting-L2 reset nor a kernel's
    # flush changed the kernel times under CUPTI. With kernel replay Nsight Compute saves the
    # memory a kernel may write before its first pass and restores it before the others, through
    # L2: which state each metric met is not known. Application replay runs the whole process
    # again for each pass, the flush before the kernel each time, nothing saved or restored.
    # Predicted: under application replay cuDNN's kernel reads about the whole 8.5 MB from DRAM,
    # as ours does: kernel replay's save and restore left cuDNN's operands in L2, and protocol 2's
    # samples start cold on both sides. Kernel replay again on this machine for the contrast,
    # then cache control all (L2 invalidated) with application replay, both sides.
    install || exit 1
    clocks
    NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
    cudnn c2048_kernel kernel none fp16 7 1 2048 512 32 1
    cudnn c2048_app application none fp16 7 1 2048 512 32 1
    cudnn c2048_app_bench application none fp16 7 1 2048 512 32 1 benchmark
    ours c2048_kernel kernel none N=7,K=1,C=2048,F=512,B=32 fp16 "$C2048"
    ours c2048_app application none N=7,K=1,C=2048,F=512,B=32 fp16 "$C2048"
    cudnn c1024_app application none fp16 14 1 1024 256 32 1
    ours c1024_app application none N=14,K=1,C=1024,F=256,B=32 fp16 "$C1024"
    cudnn c2048_app_all application all fp16 7 1 2048 512 32 1
    ours c2048_app_all application all N=7,K=1,C=2048,F=512,B=32 fp16 "$C2048"
    clocks
    packall ;;
2)  # Call 1: under application replay cuDNN's kernel reads the whole 8.54 MB from DRAM after
    # the flush (56% of its L2 lookups hits), as ours does: kernel replay's 1.57 MB was Nsight
    # Compute's, and protocol 2's samples start cold on both sides. cuDNN's kernel is the faster
    # there too (9.66 against 10.46 us at 1.76 GHz). New: TMA stores for rows of outputs that are
    # not whole 128-byte panels (16-bit BN = 96, 112, 224; FP32 112), a tail panel of dense rows
    # through a map of its own. The kernel's whole GPU test file (with the new tail test), then on
    # ResNet-50's 7x7 1x1 layers in every dtype: the stored 3 best again with this code,
    # tail_panels.toml exhaustively, the wide tiles against the rest, both sides with repeats.
    # Predicted: 16-bit 64 x 112 stored by TMA 5-10% faster than from registers on 7x7 C = 2048,
    # so 1.03-1.05x the best of the rest (fp16 from 0.91x cuDNN to 0.93-0.95x); 16-bit 128 x 224
    # on 7x7 C = 512 F = 2048 from 0.84-0.86x the best of the rest to 0.93-0.97x: still a loss
    # there (57 KB of output a block after 8 steps).
    install || exit 1
    restore_db
    clocks
    T1=$(date -u '+%Y-%m-%d %H:%M:%S')
    s=$SECONDS; timeout -k 5 330 python3 -m pytest -q -m gpu -p no:cacheprovider --durations=5 tests/gpu/test_gpu_tc_wgmma.py > "$OUT/test_gpu_tc_wgmma.log" 2>&1
    rc=$?; say "test_gpu_tc_wgmma: rc=$rc $((SECONDS - s)) s: $(tail -1 "$OUT/test_gpu_tc_wgmma.log")"
    [ $rc -eq 0 ] || { packall; exit 1; }
    SEVEN="--shape N=7,K=1,C=2048,F=512,B=32 --shape N=7,K=1,C=512,F=2048,B=32"
    for d in fp16 bf16 tf32; do
        s=$SECONDS; timeout -k 5 60 python3 -m autotune remeasure --family tc_wgmma $SEVEN --layout NHWC --dtype $d --top 3 --no-baseline > "$OUT/remeasure_$d.log" 2>&1
        say "remeasure $d: rc=$? $((SECONDS - s)) s"
    done
    for d in fp16 bf16 tf32; do sweep tail_$d $d $HERE/tail_panels.toml $SEVEN; done
    for w in 112 224; do
        python3 results/h200/20261202/kind_vs_rest.py "$AUTOTUNE_DB" --kind BN=$w --since "$T1" > "$OUT/bn${w}_vs_rest.md"; cat "$OUT/bn${w}_vs_rest.md" >> "$OUT/summary.txt"
    done
    for d in fp16 bf16 tf32; do both_sides $d 3 $SEVEN; done
    clocks
    save_db; packall ;;
3)  # The tables with this kernel text (digest changed: every stored evaluation but call 2's is of
    # the text before). Carried: call 2's store. Each table layer's 3 best again with this code,
    # the tensor-core peaks measured again, then ours beside cuDNN on every table layer, three
    # times each, the order alternating.
    # Predicted: the means as in session 69 (tf32 1.17-1.20, bf16 1.19-1.23, fp16 1.14-1.17) within
    # the +-2% that machines move them; fp16's two 7x7 1x1 layers 1-3% nearer cuDNN than in
    # session 70 (0.906, 0.866); the best layer 85-88% of its peak.
    install || exit 1
    restore_db
    clocks
    for d in bf16 fp16 tf32; do remeasure $d; done
    s=$SECONDS; timeout -k 5 90 python3 -m autotune device --remeasure --ceiling tc_peak_tf32 --ceiling tc_peak_bf16 --ceiling tc_peak_fp16 > "$OUT/device.log" 2>&1
    say "device peaks: rc=$? $((SECONDS - s)) s"
    python3 -c "import sqlite3, sys; [print(*r) for r in sqlite3.connect(sys.argv[1]).execute(\"select name, value, unit, created_at from ceilings where name like 'tc_peak%' order by id desc limit 3\")]" "$AUTOTUNE_DB" >> "$OUT/summary.txt"
    for d in fp16 bf16 tf32; do both_sides $d 3 $(table_layers $TABLE $d all) $(table_layers $TABLE $d first); done
    clocks
    save_db; packall ;;
4)  # The tail panels through the C++ export (a 64 x 112 fp16 plan stored by TMA, the tail's map
    # unswizzled, encoded by the exported tree's own encoder) and the runtime's GPU tests with
    # this kernel text.
    # Predicted: both files pass.
    install || exit 1
    CAP=200 gpu_tests test_gpu_export test_runtime_precision
    pack ;;
5)  # The 16-bit 1x1 layers still below cuDNN in call 3 store a large output against their
    # reduction (7x7 C = 512 F = 2048: 6.4 MB out, 1.6 MB in, 8 steps) from one staging tile:
    # no stored evaluation on them had two (STAGING = 2, the next tile's output staged while the
    # last one's stores drain). staging2.toml exhaustively on four of them in fp16 and bf16 into
    # call 3's store (carried), two staging tiles against the rest, then the tables' both sides
    # again on this machine (another than call 3's) in every dtype.
    # Predicted: two staging tiles 3-6% faster than the best on 7x7 C = 512 F = 2048 (persistent
    # 128 x 128 or 128 x 112: 208-247 tiles, the second tile's main loop under the first's
    # stores), 0-3% on the 14x14 and 28x28 layers; the means within 2% of call 3's.
    install || exit 1
    restore_db
    clocks
    T1=$(date -u '+%Y-%m-%d %H:%M:%S')
    WEAK="--shape N=7,K=1,C=512,F=2048,B=32 --shape N=28,K=1,C=512,F=256,B=32 --shape N=14,K=1,C=1024,F=512,B=32 --shape N=14,K=1,C=1024,F=256,B=32"
    for d in fp16 bf16; do sweep staging2_$d $d $HERE/staging2.toml $WEAK; done
    python3 results/h200/20261202/kind_vs_rest.py "$AUTOTUNE_DB" --kind STAGING=2 --since "2026-12-02 05:00:00" > "$OUT/staging2_vs_rest.md"; cat "$OUT/staging2_vs_rest.md" >> "$OUT/summary.txt"
    for d in fp16 bf16 tf32; do both_sides $d 3 $(table_layers $TABLE $d all) $(table_layers $TABLE $d first); done
    clocks
    save_db; packall ;;
esac
