#!/usr/bin/env bash
# The GPU calls of 2026-11-30's eighth session (session 56), on two H200s of one host
# (nvidia-h200-x2), from the checkout root, `.whl` carried (../shared/device/wheels.sh
# --kernel-tuner) and `.dbcarry/autotune.db.gz` (session 55's store of the three tables, or the
# call before's where the machine was not kept). Run as:
#   LIMIT=575 OUT=$OUT bash results/h200/20261130h/calls.sh N
# GPU 0 and GPU 1 each run their own work with their own store (/tmp/home/<name>.db); nothing
# timed shares a GPU.
set -u
. "$(dirname "$0")/../calls_lib.sh"
HERE=results/h200/20261130h
deep() {  # GPU STORE NAME DTYPE SHAPE...: tc_wgmma searched to 200 evaluations a layer
    local g=$1 db=$2 n=$3 d=$4 s=$SECONDS; shift 4; local a=(); for S in "$@"; do a+=(--shape "$S"); done
    CUDA_VISIBLE_DEVICES=$g AUTOTUNE_DB=$db timeout -k 5 $(( $(left) - 40 )) python3 -m autotune run --family tc_wgmma "${a[@]}" --layout NHWC --dtype "$d" --budget 200 --no-baseline --time-limit $(( $(left) - 60 )) > "$OUT/deep_$n.log" 2>&1
    say "budget 200, $n on GPU $g: rc=$? $((SECONDS - s)) s: $(grep "new evaluations" "$OUT/deep_$n.log")"
}
checkpoint() {  # STORE: its WAL folded in, so that it can be copied or merged
    python3 -c "import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute('PRAGMA wal_checkpoint(TRUNCATE)')" "$1"
}
remeasure() {  # GPU STORE DTYPE: tc_wgmma's 3 fastest stored configurations of each of the 42
    # layers, of the previous code, timed with this code (no search)
    local g=$1 db=$2 d=$3 s=$SECONDS
    CUDA_VISIBLE_DEVICES=$g AUTOTUNE_DB=$db timeout -k 5 $(( $(left) - 30 )) python3 -m autotune remeasure --family tc_wgmma --shapes alexnet --shapes overfeat --shapes vgg16 --shapes resnet50 --layout NHWC --dtype "$d" --top 3 --no-baseline --time-limit $(( $(left) - 50 )) > "$OUT/remeasure_$d.log" 2>&1
    say "remeasure $d on GPU $g: rc=$? $((SECONDS - s)) s: $(grep "measured again" "$OUT/remeasure_$d.log")"
}
search() {  # GPU STORE DTYPE SHAPE: a search of 60 evaluations with this code, and cuDNN again
    local g=$1 db=$2 d=$3 S=$4 s=$SECONDS
    CUDA_VISIBLE_DEVICES=$g AUTOTUNE_DB=$db timeout -k 5 $(( $(left) - 20 )) python3 -m autotune baseline --shape "$S" --layout NHWC --dtype "$d" --remeasure > "$OUT/search_$d.log" 2>&1
    CUDA_VISIBLE_DEVICES=$g AUTOTUNE_DB=$db timeout -k 5 $(( $(left) - 20 )) python3 -m autotune run --family tc_wgmma --shape "$S" --layout NHWC --dtype "$d" --budget 60 --time-limit $(( $(left) - 40 )) >> "$OUT/search_$d.log" 2>&1
    say "search $d $S on GPU $g: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/search_$d.log")"
}
OVERFEAT2=N=20,K=5,C=96,F=256,B=128
case "${1:?1 to 3}" in
1)  # GPU 0: the GPU tests of the short step (test_gpu_tc_wgmma's odd shapes have C = 12, 16,
    # 20, 40, 96 in every pipeline case), then the bf16 layers remeasured and OverFeat's C = 96
    # layer searched; GPU 1: fp16 and tf32 remeasured, fp16's C = 96 layer searched. Then one
    # store, and the three tables.
    install || exit 1; restore_db; checkpoint "$AUTOTUNE_DB"; cp "$AUTOTUNE_DB" /tmp/home/b.db
    ( remeasure 1 /tmp/home/b.db fp16; search 1 /tmp/home/b.db fp16 "$OVERFEAT2"; remeasure 1 /tmp/home/b.db tf32 ) &
    ( export CUDA_VISIBLE_DEVICES=0; CAP=200 gpu_tests test_gpu_tc_wgmma )
    remeasure 0 "$AUTOTUNE_DB" bf16; search 0 "$AUTOTUNE_DB" bf16 "$OVERFEAT2"
    wait; checkpoint /tmp/home/b.db
    python3 -m autotune merge /tmp/home/b.db > "$OUT/merge.log" 2>&1; say "merge: rc=$? $(tail -1 "$OUT/merge.log")"
    python3 results/tc_targets.py "$AUTOTUNE_DB" > "$OUT/tc_targets_1.md" 2> "$OUT/tc_targets_1.log"
    say "tc_targets: rc=$? $(grep "stored in" "$OUT/tc_targets_1.md" | tr '\n' ' ')"
    save_db
    (cd "$OUT" && tar -czf call1.tgz *.log *.md && rm -f *.log *.md) ;;
2)  # GPU 0: what bounds OverFeat's C = 96 layer after the short step (predicted about 20%
    # faster, measured 4.4%): its best under Nsight Compute (its own clocks), and the same tile
    # timed at C = 64, 96 and 128 (25, 50 and 50 steps; from 96 to 128, a third more wgmmas and
    # the same loads). GPU 1: the tensor-core peak of our own wgmma loop (its GPU test, then the
    # three peaks measured again into the store), timing protocol 2's floor, the tables again.
    install || exit 1; restore_db
    ( export CUDA_VISIBLE_DEVICES=1; CAP=150 gpu_tests test_gpu_ceilings
      s=$SECONDS; python3 -m autotune device --remeasure --ceiling tc_peak_tf32 --ceiling tc_peak_bf16 --ceiling tc_peak_fp16 > "$OUT/device.log" 2>&1
      say "device --remeasure: rc=$? $((SECONDS - s)) s"; grep -E "tc_peak|fma_peak" "$OUT/device.log" >> "$OUT/summary.txt"
      s=$SECONDS; AUTOTUNE_DB=/tmp/home/floor.db timeout -k 5 120 python3 "$HERE/timer_floor.py" > "$OUT/timer_floor.md" 2> "$OUT/timer_floor.log"
      say "timer_floor: rc=$? $((SECONDS - s)) s"; cat "$OUT/timer_floor.md" >> "$OUT/summary.txt" ) &
    NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
    S=N=20,K=5,C=96,F=256,B=128,dtype=bf16,layout=NHWC
    ( export CUDA_VISIBLE_DEVICES=0
      timeout -k 5 200 $NCU --target-processes all --kernel-name regex:^tc_wgmma\$ --launch-count 1 --set full --clock-control none --export "$OUT/ncu_c96" --force-overwrite python3 -m autotune run --family tc_wgmma --shape "$S" --subspace "$HERE/overfeat2_best.toml" --strategy brute_force --exhaustive --no-baseline --storage "/tmp/ncu_$$.db" > "$OUT/ncu_c96.log" 2>&1
      say "ncu c96: rc=$?"
      $NCU --import "$OUT/ncu_c96.ncu-rep" --page details > "$OUT/ncu_c96_details.txt" 2>&1
      $NCU --import "$OUT/ncu_c96.ncu-rep" --page raw > "$OUT/ncu_c96_raw.txt" 2>&1; rm -f "$OUT/ncu_c96.ncu-rep"
      grep -E "Duration|DRAM Throughput|Memory Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Compute \(SM\) Throughput|Issue Slots Busy" "$OUT/ncu_c96_details.txt" | head -10 >> "$OUT/summary.txt"
      grep -iE "gmma|tensor_op" "$OUT/ncu_c96_raw.txt" | grep -iE "pct|active" | head -12 >> "$OUT/summary.txt"
      a=(); for c in 64 96 128; do a+=(--shape N=20,K=5,C=$c,F=256,B=128); done
      s=$SECONDS; timeout -k 5 $(( $(left) - 30 )) python3 -m autotune run --family tc_wgmma "${a[@]}" --layout NHWC --dtype bf16 --subspace "$HERE/overfeat2_best.toml" --strategy brute_force --exhaustive --storage /tmp/home/scale.db > "$OUT/scale.log" 2>&1
      say "C = 64, 96, 128 with the C = 96 best: rc=$? $((SECONDS - s)) s"
      grep -E "^\| tc_wgmma" "$OUT/scale.log" | cut -c1-60,250- >> "$OUT/summary.txt" )
    wait
    python3 results/tc_targets.py "$AUTOTUNE_DB" > "$OUT/tc_targets_2.md" 2> "$OUT/tc_targets_2.log"
    say "tc_targets: rc=$? $(grep "stored in" "$OUT/tc_targets_2.md" | tr '\n' ' ')"
    save_db
    (cd "$OUT" && tar --exclude=summary.txt -czf call2.tgz *.log *.md *.txt && rm -f ncu_* *.log tc_targets_2.md timer_floor.md) ;;
3)  # Issue 36's end-to-end table with this kernel (session 52's was of an older one): each
    # model's convolutions tuned with their fused epilogues in bf16 (`tune-model`, 60
    # evaluations a study), then `bench model` at batch 32, channels-last: ResNet-50 on GPU 0,
    # VGG-16 on GPU 1, each with its own copy of the store.
    install || exit 1; restore_db; checkpoint "$AUTOTUNE_DB"; cp "$AUTOTUNE_DB" /tmp/home/vgg.db
    ( export CUDA_VISIBLE_DEVICES=1 AUTOTUNE_DB=/tmp/home/vgg.db; tune vgg16 bf16; bench_model vgg16 32 bf16 --layers --cuda-graphs ) &
    ( export CUDA_VISIBLE_DEVICES=0; tune resnet50 bf16; bench_model resnet50 32 bf16 --layers --cuda-graphs )
    wait; checkpoint /tmp/home/vgg.db
    python3 -m autotune merge /tmp/home/vgg.db > "$OUT/merge.log" 2>&1; say "merge: rc=$? $(tail -1 "$OUT/merge.log")"
    save_db; pack ;;
4)  # The GPU tests of what else this session changed: the ceilings' cuBLAS path beside the
    # wgmma loop (test_gpu, test_gpu_precision), the kernel through the exported C++ and the
    # runtime (test_gpu_export, test_runtime); one GPU each half.
    install || exit 1
    ( export CUDA_VISIBLE_DEVICES=1; CAP=400 gpu_tests test_gpu_precision test_runtime ) &
    ( export CUDA_VISIBLE_DEVICES=0; CAP=400 gpu_tests test_gpu test_gpu_export )
    wait; pack ;;
5)  # Does the default budget leave speed behind? The 15 bf16 layers below 0.95x cuDNN (call 2's
    # table), searched again to 200 evaluations each with this code (the 3 of call 1 count):
    # VGG-16's and OverFeat's on GPU 0, ResNet-50's on GPU 1, each with its own store. Predicted:
    # at most 3 of 15 layers 3% faster or more, the 15 layers' geometric mean at most 1.5%.
    install || exit 1; restore_db; checkpoint "$AUTOTUNE_DB"; cp "$AUTOTUNE_DB" /tmp/home/b.db
    deep 1 /tmp/home/b.db resnet50 bf16 N=28,K=1,C=128,F=512,B=32 N=28,K=1,C=256,F=512,B=32,stride=2 N=28,K=1,C=512,F=256,B=32 N=14,K=1,C=256,F=1024,B=32 N=14,K=1,C=1024,F=256,B=32 N=14,K=1,C=1024,F=512,B=32 N=7,K=3,C=512,F=512,B=32,stride=2 N=7,K=1,C=512,F=2048,B=32 N=7,K=1,C=2048,F=512,B=32 &
    deep 0 "$AUTOTUNE_DB" vgg_overfeat bf16 N=20,K=5,C=96,F=256,B=128 N=28,K=3,C=256,F=512,B=32 N=56,K=3,C=128,F=256,B=32 N=112,K=3,C=128,F=128,B=32 N=112,K=3,C=64,F=128,B=32 N=224,K=3,C=64,F=64,B=32
    wait; checkpoint /tmp/home/b.db
    python3 -m autotune merge /tmp/home/b.db > "$OUT/merge.log" 2>&1; say "merge: rc=$? $(tail -1 "$OUT/merge.log")"
    python3 results/tc_targets.py "$AUTOTUNE_DB" > "$OUT/tc_targets_5.md" 2> "$OUT/tc_targets_5.log"
    say "tc_targets: rc=$? $(grep "stored in" "$OUT/tc_targets_5.md" | tr '\n' ' ')"
    save_db
    (cd "$OUT" && tar -czf call5.tgz *.log *.md && rm -f *.log *.md) ;;
6)  # The same for tf32's 11 and fp16's 7 layers below 0.95x (call 2's table): tf32 on GPU 1,
    # fp16 on GPU 0, each with its own store, merged after.
    install || exit 1; restore_db; checkpoint "$AUTOTUNE_DB"; cp "$AUTOTUNE_DB" /tmp/home/b.db
    deep 1 /tmp/home/b.db tf32 tf32 N=27,K=5,C=64,F=192,B=128 N=13,K=3,C=256,F=256,B=128 N=20,K=5,C=96,F=256,B=128 N=12,K=3,C=1024,F=1024,B=128 N=224,K=3,C=64,F=64,B=32 N=56,K=3,C=256,F=256,B=32 N=28,K=3,C=256,F=512,B=32 N=14,K=3,C=512,F=512,B=32 N=28,K=1,C=256,F=512,B=32,stride=2 N=14,K=3,C=256,F=256,B=32,stride=2 N=7,K=1,C=2048,F=512,B=32 &
    deep 0 "$AUTOTUNE_DB" fp16 fp16 N=20,K=5,C=96,F=256,B=128 N=112,K=7,C=3,F=64,B=32,stride=2 N=14,K=1,C=1024,F=256,B=32 N=14,K=1,C=1024,F=512,B=32 N=7,K=3,C=512,F=512,B=32,stride=2 N=7,K=1,C=512,F=2048,B=32 N=7,K=1,C=2048,F=512,B=32
    wait; checkpoint /tmp/home/b.db
    python3 -m autotune merge /tmp/home/b.db > "$OUT/merge.log" 2>&1; say "merge: rc=$? $(tail -1 "$OUT/merge.log")"
    python3 results/tc_targets.py "$AUTOTUNE_DB" > "$OUT/tc_targets_6.md" 2> "$OUT/tc_targets_6.log"
    say "tc_targets: rc=$? $(grep "stored in" "$OUT/tc_targets_6.md" | tr '\n' ' ')"
    save_db
    (cd "$OUT" && tar -czf call6.tgz *.log *.md && rm -f *.log *.md) ;;
esac
