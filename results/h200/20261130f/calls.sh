#!/usr/bin/env bash
# The GPU calls of 2026-11-30's sixth session (session 54), on the H200, from the checkout root,
# `.whl` carried (../shared/device/wheels.sh --kernel-tuner). Run as:
#   LIMIT=580 OUT=$OUT bash results/h200/20261130f/calls.sh N
set -u
. "$(dirname "$0")/../calls_lib.sh"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
ab() {  # SHAPE...: each shape's best of pingpong_0.toml (beside cuDNN) and of pingpong_1.toml
    local S v
    for S in "$@"; do
        for v in 0 1; do
            t=$(( $(left) - 15 )); [ "$t" -lt 30 ] && { say "ab $S $v: not run (time)"; continue; }
            base=--no-baseline; [ $v = 0 ] && base=
            s=$SECONDS; timeout -k 5 "$t" python3 -m autotune run --family tc_wgmma --shape "$S,dtype=bf16,layout=NHWC" --subspace results/h200/20261130f/pingpong_$v.toml --strategy brute_force --exhaustive $base --storage /tmp/ab$v.db >> "$OUT/ab_$v.log" 2>&1
            say "ab $S pingpong $v: rc=$? $((SECONDS - s)) s"
        done
    done
    for v in 0 1; do
        python3 -m autotune best --storage /tmp/ab$v.db > "$OUT/ab_best_$v.md" 2>&1; cat "$OUT/ab_best_$v.md" >> "$OUT/summary.txt"
        python3 -m autotune best --storage /tmp/ab$v.db --format csv > "$OUT/ab_best_$v.csv" 2>&1
    done
}
case "${1:?1 to 3}" in
1)  # (a) Session 53's unverified plan choice (55f14ce: a plain call of a stored shape may take a
    # family's fused measurement) under the runtime's GPU tests, then ResNet-50's bf16 shapes
    # served over session 53's store (.dbcarry): predicted, 11 of 23 shapes move to tc_wgmma and
    # their GPU time falls to about their fused stored time (56x56 C = 64 F = 256: 35 -> ~25 us).
    # (b) Issue 36: where tc_wgmma's tile loses to cuDNN on a large layer. VGG-16's 112x112
    # C = 128 F = 128 in bf16 (0.57x cuDNN tuned 30 evaluations, ../20261130e/call3): tuned 60
    # evaluations beside cuDNN (protocol 2), its best profiled by Nsight Compute, and cuDNN's
    # kernel for the same layer profiled the same way (name, grid, registers, throughput).
    install || exit 1; restore_db
    CAP=120 gpu_tests test_runtime
    s=$SECONDS; timeout -k 5 90 python3 -m autotune bench dispatch --shape-set resnet50 --dtype bf16 --layout NHWC --output "$OUT/dispatch" > "$OUT/dispatch.log" 2>&1
    say "bench dispatch resnet50 bf16 NHWC: rc=$? $((SECONDS - s)) s"; head -14 "$OUT/dispatch/dispatch.md" | tail -3 >> "$OUT/summary.txt" 2>/dev/null
    S=N=112,K=3,C=128,F=128,B=32,dtype=bf16,layout=NHWC
    s=$SECONDS; timeout -k 5 200 python3 -m autotune run --family tc_wgmma --shape "$S" --budget 60 --storage /tmp/vgg.db > "$OUT/vgg_tune.log" 2>&1
    say "tune $S: rc=$? $((SECONDS - s)) s: $(tail -3 "$OUT/vgg_tune.log" | tr '\n' ' ')"
    python3 -m autotune best --family tc_wgmma --format csv --storage /tmp/vgg.db > "$OUT/vgg_best.csv"
    python3 - "$OUT/vgg_best.csv" > "$OUT/vgg_best.toml" <<'PY'
import csv, json, sys
row = next(csv.DictReader(open(sys.argv[1])))
config = json.loads(row["config"])
print(f'description = "The best tc_wgmma configuration on VGG-16 112x112 C = 128 F = 128 bf16: {row["time_ms"]} ms"')
print("[tc_wgmma]")
for k, v in config.items():
    print(f"{k} = [{v}]")
PY
    say "best: $(head -1 "$OUT/vgg_best.toml")"; cat "$OUT/vgg_best.toml" >> "$OUT/summary.txt"
    python3 -m autotune best --storage /tmp/vgg.db > "$OUT/vgg_best.md" 2>&1; cat "$OUT/vgg_best.md" >> "$OUT/summary.txt"
    timeout -k 5 120 $NCU --target-processes all --kernel-name regex:^tc_wgmma\$ --launch-count 1 --set full --import-source yes --export "$OUT/ncu" --force-overwrite python3 -m autotune run --family tc_wgmma --shape "$S" --subspace "$OUT/vgg_best.toml" --strategy brute_force --exhaustive --no-baseline --storage /tmp/ncu.db > "$OUT/ncu.log" 2>&1
    say "ncu ours: rc=$?"
    $NCU --import "$OUT/ncu.ncu-rep" --page details > "$OUT/ncu_details.txt" 2>&1
    $NCU --import "$OUT/ncu.ncu-rep" --page source --csv --print-source sass > "$OUT/ncu_sass.csv" 2>&1
    rm -f "$OUT/ncu.ncu-rep"; say "ncu ours: $(grep -m1 'Duration' "$OUT/ncu_details.txt")"
    timeout -k 5 100 $NCU --target-processes all --profile-from-start off --launch-count 3 --set full --export "$OUT/ncu_cudnn" --force-overwrite python3 results/h200/20261130f/cudnn_layer.py 112 3 128 128 32 > "$OUT/ncu_cudnn.log" 2>&1
    say "ncu cudnn: rc=$?"
    $NCU --import "$OUT/ncu_cudnn.ncu-rep" --page details > "$OUT/ncu_cudnn_details.txt" 2>&1
    rm -f "$OUT/ncu_cudnn.ncu-rep"; grep -E "^  [a-z_0-9]+.*\(|Duration|Grid Size|Block Size|Registers Per|Dynamic Shared|Compute \(SM\) Throughput" "$OUT/ncu_cudnn_details.txt" | head -30 >> "$OUT/summary.txt"
    (cd "$OUT" && tar -czf call1.tgz ncu_* vgg_* dispatch *.log && rm -rf ncu_* vgg_* dispatch *.log) ;;
2)  # Issue 36: the consumer warpgroups taking a block's tiles in turn (PINGPONG), as cuDNN's
    # kernel for VGG-16's 112x112 C = 128 F = 128 layer does (call 1: a persistent grid of 132
    # blocks of 384 threads, a 128 x 128 tile, 168 registers, 231 KB of shared memory). Its GPU
    # tests (odd shapes in every dtype, every fused epilogue with the residual staged by TMA),
    # then the A/B on three VGG-16 layers in bf16: the best configuration of pingpong_0.toml
    # (the warpgroups sharing each tile) against pingpong_1.toml's (taking tiles in turn).
    # Predicted: PINGPONG ahead by about the epilogue's share of a tile (10-15%) on the 112x112
    # layer (18 reduction steps a tile), less on the 28x28 C = 512 one (72 steps).
    install || exit 1
    CAP=170 gpu_tests test_gpu_tc_wgmma
    ab N=112,K=3,C=128,F=128,B=32 N=56,K=3,C=256,F=256,B=32 N=28,K=3,C=512,F=512,B=32
    CAP=120 gpu_tests test_gpu_epilogue
    (cd "$OUT" && tar -czf call2.tgz ab_* *.log && rm -rf ab_* *.log) ;;
3|4)  # Issue 36's bf16 table with this kernel (PINGPONG in tc_wgmma's space): the 42 distinct
    # layers of AlexNet, OverFeat, VGG-16 and ResNet-50, tc_wgmma and tc_implicit_gemm 60
    # evaluations each beside cuDNN (protocol 2), resumed by call 4 (the store carried in
    # .dbcarry where the machine was not kept), which first runs the runtime's precision tests
    # over 5adeaef (a call's output from new_empty_strided) and the host time a call, step by
    # step (predicted: empty_like_layout about 1.4 us under torch.empty's 3.4-3.6); then
    # results/tc_targets.py.
    install || exit 1; restore_db
    if [ "$1" = 4 ]; then
        CAP=100 gpu_tests test_runtime_precision
        s=$SECONDS; timeout -k 5 90 python3 results/h200/20261130e/host_steps.py > "$OUT/host_steps.md" 2> "$OUT/host_steps.log"
        say "host steps: rc=$? $((SECONDS - s)) s"; grep -E "^\| (step|PyTorch|ours: Runtime|torch.empty \(|empty_like_layout|x.new_empty)" "$OUT/host_steps.md" >> "$OUT/summary.txt"
    fi
    s=$SECONDS; timeout -k 5 $(( $(left) - 25 )) python3 -m autotune run --family tc_wgmma --family tc_implicit_gemm --shapes alexnet --shapes overfeat --shapes vgg16 --shapes resnet50 --layout NHWC --dtype bf16 --budget 60 --time-limit $(( $(left) - 45 )) > "$OUT/table_bf16_$1.log" 2>&1
    say "run bf16 table (call $1): rc=$? $((SECONDS - s)) s: $(tail -2 "$OUT/table_bf16_$1.log" | tr '\n' ' ')"
    python3 results/tc_targets.py "$AUTOTUNE_DB" > "$OUT/tc_targets_$1.md" 2> "$OUT/tc_targets_$1.log"
    say "tc_targets: rc=$?"; cat "$OUT/tc_targets_$1.md" >> "$OUT/summary.txt"
    save_db; pack ;;
5)  # Nsight Compute on the bf16 table's worst layer with C > 3, VGG-16's 224x224 C = 64 F = 64
    # (0.77x cuDNN, call 4): tc_wgmma's best there (vgg224_best.toml: the warpgroups taking
    # 128 x 64 tiles in turn) and cuDNN's kernel, what each keeps busy.
    install || exit 1
    S=N=224,K=3,C=64,F=64,B=32,dtype=bf16,layout=NHWC
    timeout -k 5 $(( $(left) - 70 )) $NCU --target-processes all --kernel-name regex:^tc_wgmma\$ --launch-count 1 --set full --export "$OUT/ncu" --force-overwrite python3 -m autotune run --family tc_wgmma --shape "$S" --subspace results/h200/20261130f/vgg224_best.toml --strategy brute_force --exhaustive --no-baseline --storage /tmp/ncu.db > "$OUT/ncu.log" 2>&1
    say "ncu ours: rc=$?"
    $NCU --import "$OUT/ncu.ncu-rep" --page details > "$OUT/ncu_details.txt" 2>&1; rm -f "$OUT/ncu.ncu-rep"
    timeout -k 5 $(( $(left) - 10 )) $NCU --target-processes all --profile-from-start off --launch-count 3 --set full --export "$OUT/ncu_cudnn" --force-overwrite python3 results/h200/20261130f/cudnn_layer.py 224 3 64 64 32 > "$OUT/ncu_cudnn.log" 2>&1
    say "ncu cudnn: rc=$?"
    $NCU --import "$OUT/ncu_cudnn.ncu-rep" --page details > "$OUT/ncu_cudnn_details.txt" 2>&1; rm -f "$OUT/ncu_cudnn.ncu-rep"
    for f in ncu_details ncu_cudnn_details; do
        grep -E "^  [a-zA-Z_0-9]+.*\(|Duration|Grid Size|Block Size|Registers Per|Dynamic Shared|SM Busy|Compute \(SM\) Throughput|L2 Cache Throughput|DRAM Throughput|Issue Slots Busy" "$OUT/$f.txt" | head -14 >> "$OUT/summary.txt"
    done
    (cd "$OUT" && tar -czf call5.tgz ncu_* ncu.log && rm -rf ncu_* ncu.log) ;;
esac
