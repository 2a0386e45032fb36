#!/usr/bin/env bash
# The GPU calls of 2026-11-30's ninth session (session 57), on two H200s of one host
# (nvidia-h200-x2), from the checkout root, `.whl` carried (../shared/device/wheels.sh
# --kernel-tuner) and `.dbcarry/autotune.db.gz` (session 56's store of the three tables, or the
# call before's). Run as:
#   LIMIT=575 OUT=$OUT bash results/h200/20261130i/calls.sh N
# GPU 0 and GPU 1 each run their own work with their own store; nothing timed shares a GPU.
set -u
. "$(dirname "$0")/../calls_lib.sh"
HERE=results/h200/20261130i
checkpoint() {  # STORE: its WAL folded in, so that it can be copied or merged
    python3 -c "import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute('PRAGMA wal_checkpoint(TRUNCATE)')" "$1"
}
remeasure() {  # GPU STORE DTYPE: tc_wgmma's 3 fastest stored configurations of each of the 42
    # layers, of the previous code, timed with this code (no search)
    local g=$1 db=$2 d=$3 s=$SECONDS
    CUDA_VISIBLE_DEVICES=$g AUTOTUNE_DB=$db timeout -k 5 $(( $(left) - 30 )) python3 -m autotune remeasure --family tc_wgmma --shapes alexnet --shapes overfeat --shapes vgg16 --shapes resnet50 --layout NHWC --dtype "$d" --top 3 --no-baseline --time-limit $(( $(left) - 50 )) > "$OUT/remeasure_$d.log" 2>&1
    say "remeasure $d on GPU $g: rc=$? $((SECONDS - s)) s: $(grep "measured again" "$OUT/remeasure_$d.log")"
}
weak() {  # DTYPE: the layers with C > 3 below 1.0x cuDNN in session 56's table, as --shape args
    python3 - "$1" <<'PY'
import re, sys
cur = None
for line in open("results/h200/20261130h/call6/tc_targets_6.md"):
    m = re.match(r"## (\w+)", line)
    if m:
        cur = m.group(1)
    elif cur == sys.argv[1] and line.startswith("| ") and "tc_" in line:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if int(re.search(r"C=(\d+)", cells[1]).group(1)) > 3 and float(cells[5]) < 1.0:
            print("--shape", cells[1])
PY
}
streamk() {  # GPU STORE DTYPE: every stream-K configuration of streamk.toml on the weak layers
    local g=$1 db=$2 d=$3 s=$SECONDS
    CUDA_VISIBLE_DEVICES=$g AUTOTUNE_DB=$db timeout -k 5 $(( $(left) - 30 )) python3 -m autotune run --family tc_wgmma $(weak "$d") --layout NHWC --dtype "$d" --subspace "$HERE/streamk.toml" --exhaustive --no-baseline --time-limit $(( $(left) - 45 )) > "$OUT/streamk_$d.log" 2>&1
    say "stream-K $d on GPU $g: rc=$? $((SECONDS - s)) s: $(grep "new evaluations" "$OUT/streamk_$d.log")"
}
smoke() {  # GPU: one stream-K configuration under a short timeout (a kernel that never ends
    # shows here, and the searches are skipped)
    local g=$1 s=$SECONDS
    CUDA_VISIBLE_DEVICES=$g timeout -k 5 90 python3 -m autotune run --family tc_wgmma --shape N=14,K=1,C=1024,F=256,B=32 --layout NHWC --dtype bf16 --subspace "$HERE/streamk_smoke.toml" --exhaustive --no-baseline --storage /tmp/home/smoke.db > "$OUT/smoke.log" 2>&1
    local rc=$?; say "smoke on GPU $g: rc=$rc $((SECONDS - s)) s: $(grep -E "^\| tc_wgmma" "$OUT/smoke.log" | head -2 | cut -c1-200)"
    return $rc
}
case "${1:?1 to 3}" in
1)  # GPU 0: one stream-K configuration under a timeout, then the GPU tests of stream-K (and
    # of every other pipeline case) and of the counters the evaluator checks. GPU 1, once the
    # smoke run passed: the three dtypes' stored bests timed with this code, then every
    # stream-K configuration of streamk.toml on each dtype's weak layers. Then one store, the
    # tables.
    install || exit 1; restore_db; checkpoint "$AUTOTUNE_DB"; cp "$AUTOTUNE_DB" /tmp/home/b.db
    smoke 0 || { say "smoke failed: no searches"; save_db; exit 1; }
    ( for d in bf16 fp16 tf32; do remeasure 1 /tmp/home/b.db $d; done
      for d in bf16 fp16 tf32; do streamk 1 /tmp/home/b.db $d; done ) &
    ( export CUDA_VISIBLE_DEVICES=0; CAP=280 gpu_tests test_gpu_tc_wgmma; CAP=120 gpu_tests test_gpu_counters )
    wait; checkpoint /tmp/home/b.db
    python3 -m autotune merge /tmp/home/b.db > "$OUT/merge.log" 2>&1; say "merge: rc=$? $(tail -1 "$OUT/merge.log")"
    python3 results/tc_targets.py "$AUTOTUNE_DB" > "$OUT/tc_targets_1.md" 2> "$OUT/tc_targets_1.log"
    say "tc_targets: rc=$? $(grep "stored in" "$OUT/tc_targets_1.md" | tr '\n' ' ')"
    save_db
    (cd "$OUT" && tar -czf call1.tgz *.log *.md && rm -f *.log *.md) ;;
2)  # Call 1: stream-K correct, and slower than the whole tiles on the short layers it was made
    # for (+5 to +7 us on 9 us kernels): its fix-up, not its main loop. This code skips the look
    # at the counter where a share comes first in its tile, and stores a tile's last share by TMA
    # where registers allow. GPU 0: the GPU tests of the kernel, of the evaluator's and the
    # runtime's counters (test_gpu_counters, test_gpu, test_runtime, test_gpu_export), then
    # ResNet-50 tuned and benched (the runtime's PyTorch path, CUDA graphs). GPU 1: the stored
    # bests timed with this code, every stream-K configuration of streamk.toml again on the weak
    # layers. One store, the tables.
    install || exit 1; restore_db; checkpoint "$AUTOTUNE_DB"; cp "$AUTOTUNE_DB" /tmp/home/b.db
    smoke 0 || { say "smoke failed: no searches"; save_db; exit 1; }
    ( for d in bf16 fp16 tf32; do remeasure 1 /tmp/home/b.db $d; done
      for d in bf16 fp16 tf32; do streamk 1 /tmp/home/b.db $d; done ) &
    ( export CUDA_VISIBLE_DEVICES=0; CAP=200 gpu_tests test_gpu_tc_wgmma test_gpu_counters test_runtime test_gpu_export test_gpu
      tune resnet50 bf16; bench_model resnet50 32 bf16 --layers --cuda-graphs )
    wait; checkpoint /tmp/home/b.db
    python3 -m autotune merge /tmp/home/b.db > "$OUT/merge.log" 2>&1; say "merge: rc=$? $(tail -1 "$OUT/merge.log")"
    python3 results/tc_targets.py "$AUTOTUNE_DB" > "$OUT/tc_targets_2.md" 2> "$OUT/tc_targets_2.log"
    say "tc_targets: rc=$? $(grep "stored in" "$OUT/tc_targets_2.md" | tr '\n' ' ')"
    save_db; pack
    (cd "$OUT" && tar -czf call2.tgz *.md && rm -f *.md) ;;
3)  # What call 2 left undone: test_gpu (the evaluator's counters check is in its path; call 2's
    # 200 s cap stopped it after 10 of its tests, none failed) on GPU 0; on GPU 1, ResNet-50's
    # convolutions tuned with their fused epilogues (call 2's tune-model ran out of time at 960 of
    # 1440 evaluations) and benched.
    install || exit 1; restore_db
    ( export CUDA_VISIBLE_DEVICES=1; tune resnet50 bf16; bench_model resnet50 32 bf16 --layers --cuda-graphs ) &
    ( export CUDA_VISIBLE_DEVICES=0; CAP=330 gpu_tests test_gpu )
    wait; save_db; pack ;;
4)  # Call 3's bench ran beside test_gpu, whose compiles held the host: eager PyTorch and
    # torch.compile without graphs, which wait on the host, came out 1.5-2x slower than in
    # session 56. The bench alone, on one H200, over call 3's store (its older tc_wgmma code's
    # evaluations dropped: the runtime reads the current code's, and the store must travel).
    install || exit 1; restore_db
    bench_model resnet50 32 bf16 --layers --cuda-graphs; pack ;;
5)  # What bounds stream-K on the short layers (calls 1 and 2: 5-6 us more than the whole
    # tiles' 9 us): the 14x14 C = 1024 F = 256 layer's whole-tile best and the same with
    # STREAM_K = 1 under Nsight Compute (its own clocks), their details and the stall samples
    # by SASS instruction.
    install || exit 1
    NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
    for v in 0 1; do
        timeout -k 5 100 $NCU --target-processes all --kernel-name regex:^tc_wgmma\$ --launch-count 1 --set full --import-source no --clock-control none --export "$OUT/ncu_sk$v" --force-overwrite python3 -m autotune run --family tc_wgmma --shape N=14,K=1,C=1024,F=256,B=32 --layout NHWC --dtype bf16 --subspace "$HERE/sk_profile_$v.toml" --exhaustive --no-baseline --storage "/tmp/ncu_$v.db" > "$OUT/ncu_sk$v.log" 2>&1
        say "ncu STREAM_K=$v: rc=$?"
        $NCU --import "$OUT/ncu_sk$v.ncu-rep" --page details > "$OUT/ncu_sk${v}_details.txt" 2>&1
        $NCU --import "$OUT/ncu_sk$v.ncu-rep" --page source --csv --print-source sass > "$OUT/ncu_sk${v}_sass.csv" 2>&1
        rm -f "$OUT/ncu_sk$v.ncu-rep"
        grep -E "Duration|Compute \(SM\) Throughput|L2 Cache Throughput|DRAM Throughput|No Eligible|Issued Warp" "$OUT/ncu_sk${v}_details.txt" | head -8 >> "$OUT/summary.txt"
    done
    (cd "$OUT" && tar -czf call5.tgz ncu_* && rm -f ncu_*) ;;
6)  # Call 5's profile: the fix-up's per-thread __threadfence (MEMBAR.SC.GPU) took 10% of
    # stream-K's samples. This code has the leader alone release and acquire (atom.acq_rel after
    # the warpgroup's barrier). On one H200: stream-K's GPU tests, then stream-K on the short
    # bf16 layers and OverFeat's C = 1024 layer beside the whole tiles' best, both timed here.
    # Predicted: at most 1.7 us off the 6.7 us stream-K loses on the 14x14 C = 1024 layer.
    install || exit 1; restore_db
    smoke 0 || { say "smoke failed: no searches"; exit 1; }
    s=$SECONDS; timeout -k 5 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_gpu_tc_wgmma.py -k stream_k > "$OUT/test_stream_k.log" 2>&1
    say "test_gpu_tc_wgmma -k stream_k: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/test_stream_k.log")"
    a=(); for S in N=14,K=1,C=1024,F=256,B=32 N=14,K=1,C=1024,F=512,B=32 N=7,K=1,C=2048,F=512,B=32 N=28,K=1,C=512,F=256,B=32 N=12,K=3,C=1024,F=1024,B=128; do a+=(--shape "$S"); done
    s=$SECONDS; timeout -k 5 $(( $(left) - 30 )) python3 -m autotune run --family tc_wgmma "${a[@]}" --layout NHWC --dtype bf16 --subspace "$HERE/streamk.toml" --exhaustive --no-baseline > "$OUT/streamk6.log" 2>&1
    say "stream-K bf16: rc=$? $((SECONDS - s)) s: $(grep "new evaluations" "$OUT/streamk6.log")"
    s=$SECONDS; timeout -k 5 $(( $(left) - 10 )) python3 -m autotune remeasure --family tc_wgmma --shapes resnet50 --shapes overfeat --layout NHWC --dtype bf16 --top 1 --no-baseline > "$OUT/remeasure6.log" 2>&1
    say "remeasure bf16 top 1: rc=$? $((SECONDS - s)) s: $(grep "measured again" "$OUT/remeasure6.log")"
    save_db; (cd "$OUT" && tar -czf call6.tgz *.log && rm -f *.log) ;;
esac
