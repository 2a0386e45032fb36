#!/usr/bin/env bash
# The GPU calls of 2026-12-01's third session (session 60), on one H200, from the checkout root
# with `.whl` carried (../shared/device/wheels.sh --kernel-tuner, with nvidia-ml-py). Run as:
#   LIMIT=575 OUT=$OUT bash results/h200/20261201c/calls.sh N
# As they ran: LIMIT=570 for calls 1, 2, 4 and 5, 400 for call 3, 585 for call 6; calls 4, 5
# and 6 on one machine, warm between them (its /tmp/home/autotune.db carried the store).
set -u
. "$(dirname "$0")/../calls_lib.sh"
HERE=results/h200/20261201c
TABLE=results/h200/20261201b/call5/tc_targets_5.md
sweep() {  # NAME DTYPE SUBSPACE SHAPE...: the subspace exhaustively on the shapes, cuDNN measured
    # in this run
    local name=$1 d=$2 sub=$3 s=$SECONDS t=$(( $(left) - 30 )); shift 3
    [ "$t" -lt 30 ] && { say "sweep $name: not run (time)"; return; }
    local a=(); for x in "$@"; do a+=(--shape "$x"); done
    timeout -k 5 "$t" python3 -m autotune run --family tc_wgmma "${a[@]}" --layout NHWC --dtype "$d" --subspace "$HERE/$sub" --exhaustive --time-limit $(( t - 15 )) > "$OUT/sweep_$name.log" 2>&1
    say "sweep $name $d $sub: rc=$? $((SECONDS - s)) s: $(grep -E "new evaluations" "$OUT/sweep_$name.log" | tail -1)"
}
cfg() {  # BM BN STAGES PINGPONG STORE_TMA MULTICAST: a persistent TMA config's JSON, two consumer
    # warpgroups
    echo "{\"BM\":$1,\"BN\":$2,\"WG\":2,\"STAGES\":$3,\"SPLIT_K\":1,\"PRODUCER\":1,\"C_OUTER\":1,\"L1_CACHE\":0,\"TILES_PER_BLOCK\":1,\"TMA\":1,\"STORE_TMA\":$5,\"GEMM_1X1\":0,\"STAGING\":1,\"PINGPONG\":$4,\"PERSISTENT\":1,\"STREAM_K\":0,\"MULTICAST\":$6}"
}
PROFILE="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section LaunchStats --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_tensor_op_gmma.sum"
key_lines() {  # FILE: the profile's lines worth a summary
    grep -E "^  [a-zA-Z_0-9]+.*\(|Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|DRAM Throughput|gmma|Issued Warp Per Scheduler|No Eligible|Warp Cycles Per Issued|Stall|L2 Hit Rate|Registers Per|Dynamic Shared Memory Per" "$1" | sed 's/  */ /g' | cut -c1-150 | tr '\n' ';'
}
ncu_ours() {  # NAME SHAPE DTYPE CONFIG: our kernel's fourth launch under Nsight Compute ($PROFILE)
    timeout -k 5 150 "$NCU" --target-processes all --kernel-name regex:^tc_wgmma\$ --launch-skip 3 --launch-count 1 $PROFILE --clock-control none \
        python3 results/h200/20261201/placement.py --shape "$2" --dtype "$3" --config "$4" --repeats 5 > "$OUT/ours_$1.txt" 2>&1
    say "ours $1 $4: rc=$? $(key_lines "$OUT/ours_$1.txt")"
}
ncu_cudnn() {  # DTYPE N K C F B STRIDE: cuDNN's kernels for the layer under Nsight Compute
    local d=$1; shift
    local tag="$d-$(echo "$*" | tr ' ' '_')"
    timeout -k 5 120 "$NCU" --target-processes all --profile-from-start off --section LaunchStats --section Occupancy --clock-control none \
        python3 results/h200/20261201/cudnn_conv.py "$@" "$d" > "$OUT/cudnn_$tag.txt" 2>&1
    say "cudnn $tag: rc=$? $(grep -E "^  [a-z_0-9]+.*\(|Cluster Size|Grid Size|Block Size|Registers Per|Dynamic Shared Memory Per|Block Limit (Registers|Shared Mem)|Theoretical Occupancy|Waves Per SM" "$OUT/cudnn_$tag.txt" | sed 's/  */ /g' | cut -c1-140 | tr '\n' ';')"
}
case "${1:?1}" in
1)  # Where cuDNN beats the tables' bests it runs one consumer warpgroup a block with 128
    # accumulators a thread (warpgroupsize1x1x1: 128 x 128, 64 x 256, 256 x 64 tiles, in tf32 on
    # 36 of its 42 layers); ours run two, 64 each. Nsight Compute's launch statistics of three
    # of those cuDNN kernels (registers, shared memory, blocks a multiprocessor), then wg.toml
    # (one or two consumer warpgroups, the same tiles) on tf32's and bf16's big 3x3 layers.
    # Predicted: if cuDNN's kernels run two blocks a multiprocessor (one block's epilogue under
    # the other's main loop), ours with one warpgroup, one block a multiprocessor (233-240
    # registers), gain nothing over two warpgroups; the two-block form is then what to build.
    install || exit 1
    NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
    nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >> "$OUT/summary.txt"
    ncu_cudnn tf32 28 3 512 512 32 1
    ncu_cudnn bf16 12 3 1024 1024 128 1
    ncu_cudnn tf32 27 5 64 192 128 1
    sweep tf32 tf32 wg.toml N=28,K=3,C=512,F=512,B=32 N=56,K=3,C=256,F=256,B=32 N=112,K=3,C=128,F=128,B=32 N=12,K=3,C=256,F=512,B=128 N=13,K=3,C=256,F=256,B=128 N=14,K=3,C=512,F=512,B=32
    sweep bf16 bf16 wg.toml N=28,K=3,C=512,F=512,B=32 N=12,K=3,C=1024,F=1024,B=128 N=56,K=3,C=128,F=256,B=32 N=112,K=3,C=128,F=128,B=32
    python3 "$HERE/wg_pairs.py" "$AUTOTUNE_DB" > "$OUT/wg_pairs.md" 2>&1; cat "$OUT/wg_pairs.md" >> "$OUT/summary.txt"
    save_db; pack ;;
2)  # Call 1: cuDNN's warpgroupsize1x1x1 kernels are 384 threads (a producer and two consumer
    # warpgroups), 168 registers, 231 KB of shared memory, one block a multiprocessor, grids of
    # 132 or 120 in clusters of 2 or 8: two consumer warpgroups, each holding a whole 128 x 128
    # tile (128 accumulators), so taking tiles in turn, as our PINGPONG does, with 7 stages of
    # 32 KB and no staging tile. Ours with one consumer warpgroup were 5.5% slower than with two
    # (as predicted). pp.toml: PINGPONG or not, 4-8 stages (7 and 8 new in the space), the
    # output staged by TMA or stored from registers, on the same layers.
    # Predicted: PINGPONG without a staging tile at 6-7 stages 3-6% faster than the best
    # without it in tf32 (where a 128 x 128 FP32 staging tile costs two stages), less in bf16.
    install || exit 1
    nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >> "$OUT/summary.txt"
    sweep tf32 tf32 pp.toml N=28,K=3,C=512,F=512,B=32 N=56,K=3,C=256,F=256,B=32 N=112,K=3,C=128,F=128,B=32 N=12,K=3,C=256,F=512,B=128 N=13,K=3,C=256,F=256,B=128 N=14,K=3,C=512,F=512,B=32
    sweep bf16 bf16 pp.toml N=28,K=3,C=512,F=512,B=32 N=12,K=3,C=1024,F=1024,B=128 N=56,K=3,C=128,F=256,B=32 N=112,K=3,C=128,F=128,B=32
    python3 "$HERE/wg_pairs.py" "$AUTOTUNE_DB" --by PINGPONG,STORE_TMA --ref PINGPONG=0 > "$OUT/pp_pairs.md" 2>&1; cat "$OUT/pp_pairs.md" >> "$OUT/summary.txt"
    save_db; pack ;;
3)  # Call 2: taking tiles in turn (PINGPONG) without a staging tile won on three of ten layers
    # (tf32 14x14 C = 512: 0.0914 ms at 64 x 128 and 8 stages against 0.0997; 112x112 C = 128:
    # 0.3235 against 0.3436) and lost on the others (geometric mean 0.995x the time); with a
    # staging tile it lost everywhere (1.14x). More stages were slower with it (tf32 28x28
    # C = 512: 0.2994 ms at 4, 0.3080 at 7). cuDNN's kernel of that layer is the same shape
    # (128 x 128, two consumer warpgroups, 7 stages, clusters of 2) at 0.285 ms. Nsight
    # Compute on that layer: cuDNN's, our best (sharing the rows, staged by TMA, clusters) and
    # PINGPONG at 4 and 7 stages: where each spends its cycles (tensor pipe active, the warps'
    # stall reasons, L2 and DRAM).
    install || exit 1
    NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
    nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >> "$OUT/summary.txt"
    L=N=28,K=3,C=512,F=512,B=32
    timeout -k 5 150 "$NCU" --target-processes all --profile-from-start off $PROFILE --clock-control none \
        python3 results/h200/20261201/cudnn_conv.py 28 3 512 512 32 1 tf32 > "$OUT/cudnn_tf32_28.txt" 2>&1
    say "cudnn tf32 28: rc=$? $(key_lines "$OUT/cudnn_tf32_28.txt")"
    ncu_ours rows_s5 $L tf32 "$(cfg 128 128 5 0 1 1)"
    ncu_ours pp_s4 $L tf32 "$(cfg 128 128 4 1 0 0)"
    ncu_ours pp_s7 $L tf32 "$(cfg 128 128 7 1 0 0)"
    ncu_ours pp_s7_mc $L tf32 "$(cfg 128 128 7 1 0 1)"
    (cd "$OUT" && tar -czf profiles.tgz cudnn_*.txt ours_*.txt && rm -f cudnn_*.txt ours_*.txt)
    pack ;;
4|5)  # Call 3 (Nsight Compute, tf32 28x28 C = 512): in cycles our best is 3.0% behind cuDNN's
    # kernel (483,935 against 469,684) and PINGPONG at 4 stages 1.2% (475,480); the rest of the
    # time is the clock (1.60-1.62 GHz under ours, 1.66 under cuDNN's, profiled first). Ours
    # issue 1.6x the instructions (0.35 a scheduler a cycle against 0.22; PINGPONG 0.27). With
    # STAGES 7 and 8 now in the space, tf32's table of one machine (calls 4 and 5, warm
    # between them): call 4 the first layers' 20-evaluation searches and the tables' sweep
    # (../20261201b/tables.toml) on every layer with C > 3, call 5 pp_tables.toml (PINGPONG
    # without a staging tile) on the same layers, then the table and the kinds side by side.
    # Predicted: PINGPONG the best on a third of tf32's layers, the C > 3 geometric mean up by
    # 1-3% over the tables' sweep alone.
    install || exit 1
    restore_db
    d=tf32
    if [ "$1" = 4 ]; then
        nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >> "$OUT/summary.txt"
        s=$SECONDS; t=$(( $(left) - 40 ))
        timeout -k 5 $t python3 -m autotune run --family tc_wgmma $(table_layers $TABLE $d first) --layout NHWC --dtype $d --budget 20 --time-limit $(( t - 15 )) > "$OUT/first_$d.log" 2>&1
        say "first layers $d: rc=$? $((SECONDS - s)) s: $(grep -E "new evaluations" "$OUT/first_$d.log" | tail -1)"
        sweep tables_$d $d ../20261201b/tables.toml $(table_layers $TABLE $d all | cut -d" " -f2)
    else
        sweep pp_$d $d pp_tables.toml $(table_layers $TABLE $d all | cut -d" " -f2)
        python3 "$HERE/wg_pairs.py" "$AUTOTUNE_DB" --dtype $d --by PINGPONG --ref PINGPONG=0 > "$OUT/pp_pairs_$d.md" 2>&1; tail -3 "$OUT/pp_pairs_$d.md" >> "$OUT/summary.txt"
        python3 results/tc_targets.py "$AUTOTUNE_DB" "NVIDIA H200" > "$OUT/tc_targets_$1.md" 2> "$OUT/tc_targets_$1.log"
        say "tc_targets: rc=$? $(grep "stored in" "$OUT/tc_targets_$1.md" | tr '\n' ' ')"
    fi
    save_db; pack ;;
6)  # Calls 4-5, tf32 (one machine): 20 of 38 layers with C > 3 at least 1.0x cuDNN (18 in
    # session 59), C > 3 geometric mean 1.024x (1.004x). bf16 the same way in one call, on
    # that machine, warm: the first layers, tables.toml, then pp_tables.toml, then the table.
    install || exit 1
    restore_db
    d=bf16
    s=$SECONDS
    timeout -k 5 60 python3 -m autotune run --family tc_wgmma $(table_layers $TABLE $d first) --layout NHWC --dtype $d --budget 20 --time-limit 45 > "$OUT/first_$d.log" 2>&1
    say "first layers $d: rc=$? $((SECONDS - s)) s: $(grep -E "new evaluations" "$OUT/first_$d.log" | tail -1)"
    sweep tables_$d $d ../20261201b/tables.toml $(table_layers $TABLE $d all | cut -d" " -f2)
    sweep pp_$d $d pp_tables.toml $(table_layers $TABLE $d all | cut -d" " -f2)
    python3 "$HERE/wg_pairs.py" "$AUTOTUNE_DB" --dtype $d --by PINGPONG --ref PINGPONG=0 > "$OUT/pp_pairs_$d.md" 2>&1; tail -3 "$OUT/pp_pairs_$d.md" >> "$OUT/summary.txt"
    python3 results/tc_targets.py "$AUTOTUNE_DB" "NVIDIA H200" > "$OUT/tc_targets_$1.md" 2> "$OUT/tc_targets_$1.log"
    say "tc_targets: rc=$? $(grep "stored in" "$OUT/tc_targets_$1.md" | tr '\n' ' ')"
    save_db; pack ;;
esac
