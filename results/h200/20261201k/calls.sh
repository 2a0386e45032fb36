#!/usr/bin/env bash
# Session 68's GPU calls (H200): LIMIT=570 OUT=$OUT bash results/h200/20261201k/calls.sh N, from
# the checkout root, with `( [ -d .whlmin ] && rm -rf .whl && mv .whlmin .whl ); . .whl/env.sh &&`
# before it and carry [".whlmin", ".dbcarry"] (`.whl` less Kernel Tuner's wheels; `.dbcarry`:
# session 67's last store, ../20261201j/call8, for call 1, then each call's store for the next).
set -u
. "$(dirname "$0")/../calls_lib.sh"
HERE=results/h200/20261201k
TABLE=results/h200/20261201i/call6/tc_targets.md
clocks() { nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader >> "$OUT/summary.txt"; }
sweep() {  # NAME DTYPE SUBSPACE SHAPE-ARGS...: the subspace exhaustively, no baseline
    local name=$1 d=$2 sub=$3 s=$SECONDS t=$(( $(left) - 30 )); shift 3
    [ "$t" -lt 30 ] && { say "sweep $name: not run (time)"; return; }
    timeout -k 5 "$t" python3 -m autotune run --family tc_wgmma "$@" --layout NHWC --dtype "$d" --subspace "$sub" --exhaustive --no-baseline --time-limit $(( t - 15 )) > "$OUT/sweep_$name.log" 2>&1
    say "sweep $name $d: rc=$? $((SECONDS - s)) s: $(grep -E "new evaluations" "$OUT/sweep_$name.log" | tail -1)"
}
remeasure() {  # NAME DTYPE TOP SHAPE-ARGS...: the stored bests again with this code, no baseline
    local name=$1 d=$2 top=$3 s=$SECONDS t=$(( $(left) - 20 )); shift 3
    [ "$t" -lt 30 ] && { say "remeasure $name: not run (time)"; return; }
    timeout -k 5 "$t" python3 -m autotune remeasure --family tc_wgmma "$@" --layout NHWC --dtype "$d" --top "$top" --no-baseline --time-limit $(( t - 10 )) > "$OUT/remeasure_$name.log" 2>&1
    say "remeasure $name $d top $top: rc=$? $((SECONDS - s)) s"
}
rest_ab() {  # DTYPE SHAPE-ARGS...: ours (the fastest stored evaluation of this kernel) measured
    # again beside cuDNN, layer by layer, on this machine (session 64's rest_ab.py)
    local d=$1 s=$SECONDS t=$(( $(left) - 15 )); shift
    [ "$t" -lt 30 ] && { say "rest_ab $d: not run (time)"; return; }
    timeout -k 5 $t python3 results/h200/20261201g/rest_ab.py "$AUTOTUNE_DB" --dtype $d --repeats 1 --now-only "$@" > "$OUT/rest_ab_$d.md" 2> "$OUT/rest_ab_$d.log"
    say "rest_ab $d: rc=$? $((SECONDS - s)) s"; grep -E "geometric|C > 3 at" "$OUT/rest_ab_$d.md" >> "$OUT/summary.txt"
}
PROFILE="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section LaunchStats --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__cycles_active.avg,lts__t_sectors.sum,dram__bytes_read.sum"
key_lines() {  # FILE: the profile's lines worth a summary
    grep -E "Duration|SM Frequency|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|DRAM Throughput|gmma|lts__t_|dram__bytes|sm__cycles_active|Issued Warp Per Scheduler|No Eligible|L2 Hit Rate|Grid Size|Cluster Size" "$1" | sed 's/  */ /g' | cut -c1-120 | tr '\n' ';'
}
ncu_ours() {  # NAME SHAPE DTYPE CONFIG: our kernel's fourth launch under Nsight Compute (session
    # 58's placement.py times it with the L2 flushed before each launch)
    timeout -k 5 120 "$NCU" --target-processes all --kernel-name regex:^tc_wgmma\$ --launch-skip 3 --launch-count 1 $PROFILE --clock-control none \
        python3 results/h200/20261201/placement.py --shape "$2" --dtype "$3" --config "$4" --repeats 5 > "$OUT/ours_$1.txt" 2>&1
    say "ours $1: rc=$? $(key_lines "$OUT/ours_$1.txt")"
}
ncu_cudnn() {  # NAME DTYPE N K C F B STRIDE: cuDNN's kernels for the layer under Nsight Compute
    local name=$1 d=$2; shift 2
    timeout -k 5 120 "$NCU" --target-processes all --profile-from-start off $PROFILE --clock-control none \
        python3 results/h200/20261201/cudnn_conv.py "$@" "$d" > "$OUT/cudnn_$name.txt" 2>&1
    say "cudnn $name: rc=$? $(key_lines "$OUT/cudnn_$name.txt")"
}
code_ab() {  # DTYPE SHAPE-ARGS...: each layer's best from this kernel and from .head's (code_ab.py;
    # call 5: and from the variant, whose order rotates)
    local d=$1 s=$SECONDS; shift
    local texts=(--text old=.head/kernels); [ -d /tmp/variant ] && texts+=(--text variant=/tmp/variant)
    timeout -k 5 $(( $(left) - 20 )) python3 $HERE/code_ab.py "$AUTOTUNE_DB" "${texts[@]}" --dtype $d "$@" --repeats ${REPEATS:-3} > "$OUT/code_ab_$d.md" 2> "$OUT/code_ab_$d.log"
    say "code_ab $d: rc=$? $((SECONDS - s)) s"; cat "$OUT/code_ab_$d.md" >> "$OUT/summary.txt"
}
# ResNet-50's layers of 7x7 and 14x14 outputs whose grids a split can fill (1,568 or 6,272
# pixels), the 1x1 C = 2048 first: the loser in every dtype (0.87-0.89x cuDNN in session 67).
C2048="--shape N=7,K=1,C=2048,F=512,B=32"
SMALL="--shape N=7,K=1,C=512,F=2048,B=32 --shape N=7,K=1,C=1024,F=2048,B=32,stride=2 --shape N=14,K=1,C=1024,F=256,B=32 --shape N=14,K=1,C=1024,F=512,B=32 --shape N=7,K=3,C=512,F=512,B=32 --shape N=7,K=3,C=512,F=512,B=32,stride=2"
split_call() {  # call 1's (and 2's) work
    install || exit 1
    restore_db
    clocks
    T1=$(date -u '+%Y-%m-%d %H:%M:%S')
    s=$SECONDS; timeout -k 5 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_gpu_tc_wgmma.py -k split_tiles > "$OUT/test_split.log" 2>&1
    rc=$?; say "test_gpu_tc_wgmma -k split_tiles: rc=$rc $((SECONDS - s)) s: $(tail -1 "$OUT/test_split.log")"
    if [ $rc -eq 0 ]; then
        for d in bf16 tf32 fp16; do sweep c2048_$d $d $HERE/split_cluster.toml $C2048; done
        for d in bf16 tf32 fp16; do remeasure c2048_$d $d 3 $C2048; done
        python3 $HERE/split_vs_rest.py "$AUTOTUNE_DB" --since "$T1" > "$OUT/split_c2048.md"; cat "$OUT/split_c2048.md" >> "$OUT/summary.txt"
    fi
    CAP=250 gpu_tests test_gpu_tc_wgmma
    if [ $rc -eq 0 ]; then
        for d in bf16 tf32 fp16; do sweep small_$d $d $HERE/split_cluster.toml $SMALL; done
        for d in bf16 tf32 fp16; do remeasure small_$d $d 3 $SMALL; done
        python3 $HERE/split_vs_rest.py "$AUTOTUNE_DB" --since "$T1" > "$OUT/split_all.md"; cat "$OUT/split_all.md" >> "$OUT/summary.txt"
    fi
    clocks
    echo "$T1" > "$OUT/since.txt"
}
case "${1:?1}" in
1)  # A split tile's blocks as one cluster (SPLIT_CLUSTER, new): the tile's first block adds the
    # others' accumulators over distributed shared memory and stores the tile, one launch. Its
    # GPU test (odd shapes, every dtype), then split_cluster.toml exhaustively on ResNet-50's
    # 7x7 C = 2048 F = 512 layer in every dtype, the stored bests measured again with this code
    # beside them, then the kernel's whole GPU test file (every path's tile loop changed), then
    # the other 7x7 and 14x14 layers.
    # Predicted: C = 2048 at 128 x 128 split in two (104 blocks, 16 steps each, where 128 x 64
    # unsplit runs 32 steps of 84 bytes a cycle a multiprocessor, ~495 cycles a step measured
    # against ~290 of tensor time): 12.7 -> ~10.5 us in 16 bits, 20.7 -> ~16 us in tf32.
    split_call
    save_db; pack ;;
2)  # Call 1 hung in the first split configuration: each slot's `empty` barrier counted the
    # cluster's blocks as MULTICAST's pairs do, though only this block's consumers free its
    # slots, so no slot was freed and the producer waited for ever. Fixed; call 1 again, after
    # one split configuration alone under a minute's timeout.
    install || exit 1
    restore_db
    s=$SECONDS; timeout -k 5 60 python3 -m autotune run --family tc_wgmma $C2048 --layout NHWC --dtype bf16 --subspace $HERE/one_split.toml --exhaustive --no-baseline --storage /tmp/one.db > "$OUT/one_split.log" 2>&1
    say "one split configuration: rc=$? $((SECONDS - s)) s: $(grep -E "new evaluations|FAIL|WRONG" "$OUT/one_split.log" | tail -2 | tr '\n' ' ')"
    split_call
    save_db; pack ;;
3)  # Call 2: split in clusters lost on C = 2048 in 16 bits (0.88x the best unsplit, 128 x 128
    # in two against 128 x 64 whole; predicted 1.2x faster) and won on tf32's 7x7 3x3 layers
    # (1.06x, 1.15x). Nsight Compute on both bf16 configurations and cuDNN's kernel, for what the
    # split's 16-step blocks spend (predicted: the tensor pipe active ~45% of the split's
    # cycles against ~35% unsplit, and the two cluster barriers and 64 KB read across the
    # cluster ~1 us of its 14.6). Then every table layer's stored bests measured again with
    # this code (remeasure, three a study), and ours beside cuDNN in each dtype (rest_ab).
    # Predicted: tf32 ~1.12x over the 42 layers, the 16-bit means within 2% of session 66's.
    install || exit 1
    restore_db
    clocks
    NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
    base='"C_OUTER":1,"GEMM_1X1":1,"L1_CACHE":0,"MULTICAST":0,"PERSISTENT":0,"PINGPONG":0,"PRODUCER":1,"STAGES":6,"STAGING":1,"STORE_TMA":1,"STREAM_K":0,"TILES_PER_BLOCK":1,"TMA":1,"WG":2'
    ncu_ours whole N=7,K=1,C=2048,F=512,B=32 bf16 "{\"BM\":128,\"BN\":64,\"SPLIT_K\":1,\"SPLIT_CLUSTER\":0,$base}"
    ncu_ours split N=7,K=1,C=2048,F=512,B=32 bf16 "{\"BM\":128,\"BN\":128,\"SPLIT_K\":2,\"SPLIT_CLUSTER\":1,$base}"
    ncu_cudnn c2048 bf16 7 1 2048 512 32 1
    (cd "$OUT" && tar -czf profiles.tgz cudnn_*.txt ours_*.txt && rm -f cudnn_*.txt ours_*.txt)
    for d in tf32 bf16 fp16; do
        t=$(( $(left) - 150 )); [ "$t" -lt 40 ] && { say "remeasure $d: not run (time)"; continue; }
        s=$SECONDS; timeout -k 5 $t python3 -m autotune remeasure --family tc_wgmma --shapes alexnet --shapes overfeat --shapes vgg16 --shapes resnet50 --layout NHWC --dtype $d --top 3 --no-baseline --time-limit $(( t - 10 )) > "$OUT/remeasure_$d.log" 2>&1
        say "remeasure $d: rc=$? $((SECONDS - s)) s"
    done
    for d in tf32 bf16 fp16; do rest_ab $d $(table_layers $TABLE $d all) $(table_layers $TABLE $d first); done
    clocks
    save_db; pack ;;
4)  # Call 3's rest_ab moved in opposite directions by dtype against the last tables: in tf32
    # ours 2-14% faster on 30 of 42 layers than in session 67 (1.115x -> 1.193x cuDNN), in 16
    # bits 2-8% slower on the short layers than in session 66 (bf16 1.228x -> 1.173x, fp16
    # 1.163x -> 1.124x). The kernel's text changed for every configuration (the tile loop,
    # the split's defines); it should compile to the same code where SPLIT_CLUSTER = 0. A/B on
    # one machine: each layer's best compiled from this kernel and from session 67's
    # (.head: `git archive 002515c kernels`), interleaved (code_ab.py), on the layers that moved
    # most, in bf16 and tf32.
    # Predicted: old / new within 1% on every layer (the moves are the machines').
    install || exit 1
    restore_db
    clocks
    BF="--shape N=14,K=1,C=1024,F=256,B=32 --shape N=14,K=1,C=1024,F=512,B=32 --shape N=14,K=1,C=256,F=1024,B=32 --shape N=7,K=1,C=2048,F=512,B=32 --shape N=7,K=1,C=512,F=2048,B=32 --shape N=56,K=1,C=64,F=64,B=32 --shape N=28,K=1,C=128,F=512,B=32 --shape N=14,K=3,C=256,F=256,B=32"
    TF="--shape N=7,K=1,C=1024,F=2048,B=32,stride=2 --shape N=14,K=1,C=1024,F=512,B=32 --shape N=14,K=3,C=256,F=256,B=32,stride=2 --shape N=56,K=3,C=128,F=256,B=32"
    code_ab bf16 $BF
    code_ab tf32 $TF
    clocks
    pack ;;
5)  # Call 4: the new text was 3-5% slower than session 67's on all 8 bf16 layers and 9-17% faster
    # on all 4 tf32 ones, each layer's best configuration (no split) compiled from both. The
    # SASS: in bf16 the main loop is the same, a few instructions reordered (the tile index read
    # into a uniform register before the producer's branch); in tf32 the producer's loop is 16
    # instructions shorter. Here the same A/B with the order rotated each round (call 4 always
    # ran new first), and a third text, the variant: this kernel with the block's first tile
    # and tile stride read where they are used, as session 67's read blockIdx.x and gridDim.x
    # (made below with sed). bf16, fp16 and tf32.
    # Predicted: the bf16 gap under 1% with the order rotated (an order effect), tf32's gain
    # holding, the variant within 1% of new.
    install || exit 1
    restore_db
    clocks
    mkdir -p /tmp/variant
    sed -e '/const int first_tile = blockIdx.x \/ TILE_BLOCKS, tile_stride = gridDim.x \/ TILE_BLOCKS;/d' \
        -e 's/\bfirst_tile\b/((int)blockIdx.x \/ TILE_BLOCKS)/g; s/\btile_stride\b/((int)gridDim.x \/ TILE_BLOCKS)/g' \
        kernels/tc_wgmma.cu > /tmp/variant/tc_wgmma.cu
    say "variant: $(diff kernels/tc_wgmma.cu /tmp/variant/tc_wgmma.cu | grep -c '^>') lines changed"
    REPEATS=4 code_ab bf16 --shape N=14,K=1,C=1024,F=256,B=32 --shape N=7,K=1,C=2048,F=512,B=32 --shape N=56,K=1,C=64,F=64,B=32 --shape N=14,K=3,C=256,F=256,B=32
    REPEATS=4 code_ab fp16 --shape N=14,K=1,C=1024,F=512,B=32 --shape N=7,K=1,C=512,F=2048,B=32 --shape N=28,K=1,C=128,F=512,B=32
    REPEATS=4 code_ab tf32 --shape N=7,K=1,C=1024,F=2048,B=32,stride=2 --shape N=14,K=3,C=256,F=256,B=32,stride=2 --shape N=56,K=3,C=128,F=256,B=32
    clocks
    pack ;;
esac
