#!/usr/bin/env bash
# Session 84's GPU calls (H200): LIMIT=N OUT=$OUT bash results/h200/20261204c/calls.sh K, from
# the checkout root, with `. .whl/env.sh &&` before it and carry [".whl", ".dbcarry"] (`.whl`
# from ../../../shared/device/wheels.sh; `.dbcarry/autotune.db.gz` the tables' store as session
# 83 left it: ../20261204b/calls.sh's store with its call1/s83_tables_1.db.gz,
# call2/s83_tables_1.db.gz and call3/s83_tables_2.db.gz merged in). A call on a fresh machine
# merges the deltas of this session's earlier calls, carried as .dbcarry/s84_tables_*.db.gz.
# Sent with the tracked results files over 250 KB moved out of the checkout, which is
# otherwise larger than one call carries. The calls' outputs are in call1/ ... call6/ (K = 1 ... 6);
# each call's s84_tables_K.db.gz is kept as callK/store_delta.db.gz.
set -u
. "$(dirname "$0")/../calls_lib.sh"
HERE=results/h200/20261204c
DELTA=results/h200/20261203/store_delta.py
BOTH=results/h200/20261202e/both_sides_best.py  # ours (the store's pick) and cuDNN, in turns
TABLE=results/h200/20261201i/call6/tc_targets.md  # the tables' layers
GAPS=results/h200/20261204/gaps_best.py
clocks() { nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader >> "$OUT/summary.txt"; }
fresh() {  # the carried store with this session's deltas, where this machine has none yet
    [ -f "$AUTOTUNE_DB" ] && return 0
    gunzip -c .dbcarry/autotune.db.gz > "$AUTOTUNE_DB"
    for d in .dbcarry/s84_tables_*.db.gz; do
        [ -f "$d" ] && python3 -m autotune merge --storage "$AUTOTUNE_DB" "$d" | sed "s/^/fresh: /" | tee -a "$OUT/summary.txt"
    done
}
delta() {  # NAME: this call's evaluations as a store of their own, for the next machine
    python3 $DELTA cut "$AUTOTUNE_DB" /tmp/marks.json /tmp/delta.db | sed "s/^/delta /" | tee -a "$OUT/summary.txt"
    gzip -c /tmp/delta.db > "$OUT/s84_tables_$1.db.gz"
}
gaps() {  # NAME DTYPE REPEATS SHAPE-ARGS...: both sides under CUPTI (ours the store's pick),
    # each sample split into the gap after the flush and the kernels' own time
    local n=$1 d=$2 r=$3 s=$SECONDS; shift 3
    timeout -k 5 $(( $(left) - 20 )) python3 $GAPS "$AUTOTUNE_DB" /tmp/trace_$n.csv --dtype $d --repeats $r "$@" > "$OUT/sides_$n.md" 2> "$OUT/sides_$n.log"
    say "gaps $n x$r: rc=$? $((SECONDS - s)) s"
    python3 results/h200/20261202b/sample_runs.py /tmp/trace_$n.csv "$OUT/sides_$n.md" > "$OUT/runs_$n.md" 2>> "$OUT/sides_$n.log"
    sed -n '/ours kernel us/,$p' "$OUT/runs_$n.md" >> "$OUT/summary.txt"
}
sweep() {  # NAME TOML DTYPE BUDGET SECONDS SHAPE-ARGS...: the subspace by the default search,
    # BUDGET evaluations a layer, the picks' rows kept
    local name=$1 toml=$2 d=$3 b=$4 t=$5 s=$SECONDS; shift 5
    [ "$t" -gt $(( $(left) - 30 )) ] && t=$(( $(left) - 30 ))
    [ "$t" -lt 20 ] && { say "sweep $name $d: not run (time)"; return; }
    timeout -k 5 $(( t + 40 )) python3 -m autotune run --family tc_wgmma "$@" --layout NHWC --dtype $d --subspace $toml --budget $b --no-baseline --time-limit $t > "$OUT/sweep_${name}_$d.log" 2>&1
    say "sweep $name $d budget $b: rc=$? $((SECONDS - s)) s: $(grep 'new evaluations' "$OUT/sweep_${name}_$d.log")"
    grep -E "^\| tc_wgmma" "$OUT/sweep_${name}_$d.log" | cut -c1-330 >> "$OUT/summary.txt"
}
both() {  # NAME DTYPE REPEATS SHAPE-ARGS...: ours (the store's pick) and cuDNN in turns
    local n=$1 d=$2 r=$3 s=$SECONDS; shift 3
    timeout -k 5 $(( $(left) - 10 )) python3 $BOTH "$AUTOTUNE_DB" --dtype $d --repeats $r "$@" > "$OUT/both_$n.md" 2> "$OUT/both_$n.log"
    say "both sides $n x$r: rc=$? $((SECONDS - s)) s"; grep -E "geometric|C > 3 at|^\| N=.*\| [0-9.]+ \|$" "$OUT/both_$n.md" | tail -12 >> "$OUT/summary.txt"
}
# Nsight Compute after protocol 2's flush, application replay (each pass a fresh process, the
# flush before the profiled kernel every pass), its own cache control off, clocks left alone;
# session 82's metrics with L2's and the SMs' throughput and the bytes L2 served.
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
METRICS="gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,lts__t_bytes.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg,sm__cycles_elapsed.avg,launch__grid_size,launch__block_size,launch__cluster_dim_x,launch__cluster_dim_y,launch__shared_mem_per_block_dynamic,launch__registers_per_thread"
lines() { grep -E "gpu__time|per_second|dram__|lts__|sm__throughput|pipe_tensor|sm__cycles|launch__|Error|ERR|nvjet|sm90|tc_wgmma \(" "$1" | sed 's/  */ /g' | tr '\n' ';'; }
ours() {  # NAME SHAPE DTYPE CONFIG: the fourth launch of placement.py (each flushed)
    timeout -k 5 $(( $(left) - 10 )) "$NCU" --replay-mode application --target-processes all --kernel-name regex:^tc_wgmma\$ --launch-skip 3 --launch-count 1 --cache-control none --clock-control none --metrics $METRICS \
        python3 results/h200/20261201/placement.py --shape "$2" --dtype "$3" --config "$4" --repeats 5 > "$OUT/ncu_ours_$1.txt" 2>&1
    say "ncu ours $1: rc=$? $(lines "$OUT/ncu_ours_$1.txt")"
}
cudnn() {  # NAME DTYPE N K C F B STRIDE: cuDNN's kernels of the last flushed round, its algorithm
    # chosen by timing (benchmark mode, as the tables run it)
    local name=$1 d=$2; shift 2
    timeout -k 5 $(( $(left) - 10 )) "$NCU" --replay-mode application --target-processes all --profile-from-start off --cache-control none --clock-control none --metrics $METRICS \
        python3 results/h200/20261202c/cudnn_app.py "$@" "$d" benchmark > "$OUT/ncu_cudnn_$name.txt" 2>&1
    say "ncu cudnn $name: rc=$? $(lines "$OUT/ncu_cudnn_$name.txt")"
}
L7="--shape N=7,K=1,C=2048,F=512,B=32"
# The store's pick on tf32's 7x7 C = 2048 F = 512 (session 83: 0.953x cuDNN) and the runner-up,
# pairs of 128 x 64 tiles sharing the input by multicast.
P7='{"BM":64,"BN":112,"C_OUTER":1,"FILTERS_M":0,"GEMM_1X1":1,"L1_CACHE":0,"MULTICAST":0,"MULTICAST_BLOCKS":2,"PERSISTENT":0,"PINGPONG":0,"PRODUCER":1,"SPLIT_CLUSTER":0,"SPLIT_K":1,"STAGES":8,"STAGING":1,"STEP_BYTES":128,"STORE_TMA":1,"STREAM_K":0,"TILES_PER_BLOCK":1,"TMA":1,"WG":1}'
P7M='{"BM":128,"BN":64,"C_OUTER":1,"FILTERS_M":0,"GEMM_1X1":1,"L1_CACHE":0,"MULTICAST":1,"MULTICAST_BLOCKS":2,"PERSISTENT":0,"PINGPONG":0,"PRODUCER":1,"SPLIT_CLUSTER":0,"SPLIT_K":1,"STAGES":7,"STAGING":1,"STEP_BYTES":128,"STORE_TMA":0,"STREAM_K":0,"TILES_PER_BLOCK":1,"TMA":1,"WG":2}'
# tf32's 28x28 3x3 C = 512 F = 512 pick (the tables' store): 128 x 128 tiles in turn, persistent,
# pairs sharing the input.
P28='{"BM":128,"BN":128,"C_OUTER":1,"FILTERS_M":0,"GEMM_1X1":0,"L1_CACHE":0,"MULTICAST":1,"MULTICAST_BLOCKS":2,"PERSISTENT":1,"PINGPONG":1,"PRODUCER":1,"SPLIT_CLUSTER":0,"SPLIT_K":1,"STAGES":7,"STAGING":1,"STEP_BYTES":128,"STORE_TMA":0,"STREAM_K":0,"TILES_PER_BLOCK":1,"TMA":1,"WG":2}'
case "${1:?1}" in
1)  # What holds tf32's 7x7 C = 2048 F = 512 at 0.953x cuDNN (session 83's tables: cuDNN 0.0195
    # ms there, 0.0238 in session 82's, ours 0.0205 on both)? Each side's samples under CUPTI in
    # two processes (cuDNN's algorithm chosen by timing in each), each side's kernel under Nsight
    # Compute after the flush (ours: the pick and the runner-up), then two subspaces never
    # measured on this layer: stream-K (stream_k.toml) and the filters as wgmma's M
    # (../20261204b/filters_m_all.toml), then both sides five times with the store's pick.
    # Predicted: the gap after the flush 3.0-3.5 us on both sides; the kernels 5% apart as the
    # events are. Our 125 blocks of 64 x 112 read about 176 MB from L2 (each its 64 pixels' and
    # 112 filters' 2,048 channels in FP32) in ~16 us, so L2's throughput near its peak (70% or
    # more) and the tensor pipe near half busy; DRAM under 30% (20 MB). cuDNN's kernel a
    # 64 x 64 tile (its stored name on another machine) in clusters sharing one operand, fewer
    # bytes from L2 per product. Stream-K (each multiprocessor an even share of the 125-200
    # tiles' steps, where 125 tiles leave 7 idle and the tiles are uneven) within 5% of the
    # pick either way; FILTERS_M (64 filters x 112-128 pixels: 104-112 tiles) slower.
    install || exit 1
    fresh
    python3 $DELTA mark "$AUTOTUNE_DB" > /tmp/marks.json
    clocks
    gaps tf32_7a tf32 3 $L7
    gaps tf32_7b tf32 3 $L7
    ours tf32_7 N=7,K=1,C=2048,F=512,B=32 tf32 "$P7"
    cudnn tf32_7 tf32 7 1 2048 512 32 1
    ours tf32_7m N=7,K=1,C=2048,F=512,B=32 tf32 "$P7M"
    clocks
    (cd "$OUT" && tar -czf ncu.tgz ncu_*.txt && rm -f ncu_*.txt)
    sweep stream_k $HERE/stream_k.toml tf32 60 150 $L7
    sweep filters_m results/h200/20261204b/filters_m_all.toml tf32 30 60 $L7
    delta 1
    both tf32_7 tf32 5 $L7
    clocks; pack ;;
2)  # The kernel's GPU tests session 83 left: the half-width test as corrected in 0a8bac6 (a new
    # draw) and the last three tests (three consumer warpgroups, space-to-depth, FILTERS_M) in
    # the three dtypes; cuDNN's kernel on tf32's 7x7 C = 2048 F = 512 under Nsight Compute with
    # its algorithm chosen by heuristics (call 1: benchmark mode chose a GEMM kernel in one
    # pass and an implicit-GEMM one in another, so application replay could not match them),
    # then FILTERS_M on tf32's other 1x1 layers (16 evaluations a layer).
    # Predicted: 12 passed; cuDNN's heuristic kernel one of call 1's two; FILTERS_M the pick on
    # none of tf32's 1x1 layers (FP32 accumulators staged transposed a value at a time).
    install || exit 1
    fresh
    python3 $DELTA mark "$AUTOTUNE_DB" > /tmp/marks.json
    clocks
    s=$SECONDS
    timeout -k 5 300 python3 -m pytest -q -m gpu -p no:cacheprovider --durations=5 tests/gpu/test_gpu_tc_wgmma.py -k "half_full or three_consumer or space_to_depth or filters_on" > "$OUT/gpu_tests_half.log" 2>&1
    say "test_gpu_tc_wgmma (4 of 14 tests, 3 dtypes): rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/gpu_tests_half.log")"
    timeout -k 5 $(( $(left) - 10 )) "$NCU" --replay-mode application --target-processes all --profile-from-start off --cache-control none --clock-control none --metrics $METRICS \
        python3 results/h200/20261202c/cudnn_app.py 7 1 2048 512 32 1 tf32 > "$OUT/ncu_cudnn_tf32_7h.txt" 2>&1
    say "ncu cudnn tf32_7 heuristics: rc=$? $(lines "$OUT/ncu_cudnn_tf32_7h.txt")"
    (cd "$OUT" && tar -czf ncu2.tgz ncu_*.txt && rm -f ncu_*.txt)
    sweep filters_m results/h200/20261204b/filters_m_all.toml tf32 16 120 $(table_layers $TABLE tf32 all | grep -- "K=1," | grep -v "N=7,K=1,C=2048,F=512" | tr '\n' ' ')
    delta 2
    clocks; pack ;;
3)  # The tables again with call 2's FILTERS_M evaluations in the store: all four networks in
    # the three dtypes, ours (the store's pick) and cuDNN three times each a layer, in turns,
    # on call 2's machine.
    # Predicted: the geometric means within 1.5% of session 83's call 3 (bf16 1.248, fp16 1.180,
    # tf32 1.196); tf32's 7x7 C = 2048 F = 512 at 1.0x or more (call 1: 1.012x on this
    # machine); bf16's 28x28 C = 512 F = 256 and tf32's 12x12 within 1% of cuDNN either way.
    install || exit 1
    fresh
    clocks
    for d in bf16 fp16 tf32; do
        s=$SECONDS; t=$(( $(left) - 10 ))
        timeout -k 5 $t python3 $BOTH "$AUTOTUNE_DB" --dtype $d --repeats 3 $(table_layers $TABLE $d all) $(table_layers $TABLE $d first) > "$OUT/tables_$d.md" 2> "$OUT/tables_$d.log"
        say "tables $d x3: rc=$? $((SECONDS - s)) s"; grep -E "geometric|C > 3 at" "$OUT/tables_$d.md" >> "$OUT/summary.txt"
    done
    clocks; pack ;;
4)  # Call 3's tables put tf32's 28x28 3x3 C = 512 F = 512 at 0.995x cuDNN, the only layer
    # below it without a profile: each side's samples under CUPTI, each side's kernel under
    # Nsight Compute after the flush (cuDNN's algorithm by heuristics: benchmark mode's choice
    # may differ between application replay's passes, call 1). Then GPU test files on the
    # current Python (session 83 split problem.py and tc_wgmma.py after its GPU calls), CAP
    # seconds each.
    # Predicted: both kernels 256 x 128 or 128 x 128 tiles with the tensor pipe 90% busy or
    # more, within 1% of each other; every test passed.
    install || exit 1
    fresh
    clocks
    gaps tf32_28 tf32 3 --shape N=28,K=3,C=512,F=512,B=32
    ours tf32_28 N=28,K=3,C=512,F=512,B=32 tf32 "$P28"
    timeout -k 5 $(( $(left) - 10 )) "$NCU" --replay-mode application --target-processes all --profile-from-start off --cache-control none --clock-control none --metrics $METRICS \
        python3 results/h200/20261202c/cudnn_app.py 28 3 512 512 32 1 tf32 > "$OUT/ncu_cudnn_tf32_28h.txt" 2>&1
    say "ncu cudnn tf32_28 heuristics: rc=$? $(lines "$OUT/ncu_cudnn_tf32_28h.txt")"
    (cd "$OUT" && tar -czf ncu4.tgz ncu_*.txt && rm -f ncu_*.txt)
    clocks
    CAP=110 gpu_tests test_gpu_epilogue test_runtime test_runtime_precision test_gpu test_gpu_precision test_gpu_tune_kernel
    clocks; pack ;;
5)  # Call 4's cap cut test_gpu_epilogue (110 s, its first run compiling cold); it and the two
    # files call 4 left, on call 4's machine (sent as: LIMIT=390, .whl carried only).
    # Predicted: every test passed.
    install || exit 1
    CAP=230 gpu_tests test_gpu_epilogue
    CAP=75 gpu_tests test_gpu_precision test_gpu_tune_kernel
    pack ;;
6)  # test_gpu.py, which call 4's cap cut, on the same machine (sent as: LIMIT=225).
    install || exit 1
    CAP=215 gpu_tests test_gpu
    pack ;;
esac
