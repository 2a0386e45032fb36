#!/usr/bin/env bash
# Draft for the next GPU session (copy to results/h200/<date>/calls.sh and adjust): the plan of
# note-20261129f.md. From the checkout root, `.whl` and `.dbcarry` carried (the H200 store with
# ResNet-50 and VGG-16 tuned in bf16 and tf32).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
T0=$SECONDS
left() { echo $(( ${LIMIT:-580} - (SECONDS - T0) )); }
export HOME=/tmp/home PYTHONUNBUFFERED=1 AUTOTUNE_DB=/tmp/home/autotune.db; mkdir -p "$HOME"
export PYTHONPATH="/tmp/site:$PWD"
say() { echo "$*" | tee -a "$OUT/summary.txt"; }
gpu_tests() {
    for f in "$@"; do
        t=$(left); [ "$t" -lt 30 ] && { say "$f: not run (time)"; continue; }
        s=$SECONDS
        timeout -k 5 "$t" python3 -m pytest -q -m gpu -p no:cacheprovider --durations=5 "tests/gpu/$f.py" > "$OUT/$f.log" 2>&1
        say "$f: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/$f.log")"
    done
}
install() {
    [ -d /tmp/site/optuna ] && return 0
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
}
restore_db() {
    [ -f "$AUTOTUNE_DB" ] || { [ -f .dbcarry/autotune.db.gz ] && gunzip -c .dbcarry/autotune.db.gz > "$AUTOTUNE_DB"; }
}
save_db() {
    python3 -c "import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute('PRAGMA wal_checkpoint(TRUNCATE)')" "$AUTOTUNE_DB"
    gzip -c "$AUTOTUNE_DB" > "$OUT/autotune.db.gz"
}
bench_model() {  # model batch precision [more options]
    local m=$1 b=$2 p=$3; shift 3
    s=$SECONDS; timeout -k 5 $(( $(left) - 10 )) python3 -m autotune bench model --model "$m" --batch "$b" --precision "$p" --output "$OUT/model_${m}_$p" "$@" > "$OUT/bench_${m}_$p.log" 2>&1
    say "bench model $m $b $p $*: rc=$? $((SECONDS - s)) s"; cat "$OUT/model_${m}_$p/model.md" >> "$OUT/summary.txt" 2>/dev/null
}
case "${1:?1, 2, 3 or 4}" in
1)  install || exit 1; restore_db
    python3 -m autotune device > "$OUT/device.txt" 2>&1; say "device: rc=$?"
    gpu_tests test_runtime_precision test_gpu_tune_kernel
    bench_model resnet50 32 tf32 --cuda-graphs
    bench_model vgg16 32 tf32
    # Where a bf16 forward's host time goes now (ResNet-50 eager ours is host-bound: 2.60 of 2.66 ms).
    s=$SECONDS; timeout -k 5 $(( $(left) - 20 )) python3 results/h200/20261129b/host_profile.py > "$OUT/host_profile.txt" 2>&1
    say "host_profile: rc=$? $((SECONDS - s)) s"
    save_db ;;
2)  install || exit 1; restore_db
    gpu_tests test_gpu_export
    s=$SECONDS; python3 -m autotune export --output /tmp/exp --device "NVIDIA H200" --shapes resnet50 --shapes vgg16 --dtype bf16 --dtype tf32 --layout NHWC > "$OUT/export.log" 2>&1 \
      && make -C /tmp/exp -j16 > "$OUT/export_make.log" 2>&1 && /tmp/exp/build/example > "$OUT/export_example.txt" 2>&1
    say "export + example: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/export_example.txt")"
    s=$SECONDS; timeout -k 5 $(( $(left) - 5 )) python3 -m autotune bench kt-examples --examples .kt_examples/cuda --kernel-tuner --kt-lang cupy --max-fevals 20 --timeout 200 --only accuracy.py --output "$OUT/kt" > "$OUT/kt_examples.log" 2>&1
    say "kt-examples accuracy.py: rc=$? $((SECONDS - s)) s"; cat "$OUT"/kt/*.md >> "$OUT/summary.txt" 2>/dev/null ;;
3)  # Kernel Tuner's accuracy.py (issue 33: the arguments as mapped .npy files, the outputs as
    # mapped files; .kt_examples carried), then next/tiled-1x1 (carried as .tiled: its tree,
    # results/ but for results/h200/tiled_1x1_ab) against main (.abmain): the A/B, then the
    # branch's tc_wgmma tests in the time left.
    install || exit 1
    s=$SECONDS; timeout -k 5 200 python3 -m autotune bench kt-examples --examples .kt_examples/cuda --kernel-tuner --kt-lang cupy --max-fevals 20 --timeout 200 --only accuracy.py --output "$OUT/kt" > "$OUT/kt_examples.log" 2>&1
    say "kt-examples accuracy.py: rc=$? $((SECONDS - s)) s"; cat "$OUT"/kt/*.md >> "$OUT/summary.txt" 2>/dev/null
    s=$SECONDS; A=$PWD/.abmain B=$PWD/.tiled OUT=$OUT/ab timeout -k 5 $(( $(left) - 60 )) bash .tiled/results/h200/tiled_1x1_ab/ab.sh > "$OUT/ab.log" 2>&1; say "ab: rc=$? $((SECONDS - s)) s"; cat "$OUT/ab/ab.md" >> "$OUT/summary.txt" 2>/dev/null
    (cd .tiled && PYTHONPATH="/tmp/site:$PWD" timeout -k 5 $(( $(left) - 5 )) python3 -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_gpu_tc_wgmma.py > "$OUT/tc_wgmma_branch.log" 2>&1); say "tc_wgmma tests (branch): $(tail -1 "$OUT/tc_wgmma_branch.log")"
    tar -czf "$OUT/ab_kt.tgz" -C "$OUT" ab kt 2>/dev/null; rm -rf "$OUT/ab" "$OUT/kt" ;;
    4)  install || exit 1; restore_db
    s=$SECONDS; python3 -m autotune tune-model --model resnet50 --batch 32 --dtype fp32 --family implicit_gemm --family winograd --time-limit $(( $(left) - 120 )) > "$OUT/tune_fp32.log" 2>&1
    say "tune-model resnet50 fp32: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/tune_fp32.log")"
    save_db
    bench_model resnet50 32 fp32 ;;
5)  # next/tf32-round (carried as .tf32): tc_wgmma's FP32 outputs rounded to TF32 and the layer's
    # weight rounded, a new kernel digest: its GPU tests, tc_wgmma tuned again in tf32 for both
    # models (the other families' results stand), and the tf32 rows again.
    install || exit 1; restore_db
    cd .tf32; export PYTHONPATH="/tmp/site:$PWD"
    gpu_tests test_runtime_precision test_gpu_tc_wgmma
    for m in resnet50 vgg16; do
        t=$(( $(left) - 70 )); [ "$t" -lt 60 ] && { say "$m: not tuned (time)"; continue; }
        s=$SECONDS; timeout -k 5 "$t" python3 -m autotune tune-model --model $m --batch 32 --dtype tf32 --family tc_wgmma > "$OUT/tune_${m}_tf32.log" 2>&1
        say "tune-model $m tf32 tc_wgmma: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/tune_${m}_tf32.log")"
        bench_model $m 32 tf32
    done
    save_db; (cd "$OUT" && tar -czf logs_models.tgz *.log model_* && rm -rf *.log model_*) ;;
6)  # Why next/tf32-round's ResNet-50 tf32 forward took 4.75 ms against main's 2.77: the same
    # store (call 5's, carried as .dbcarry2, with both trees' tc_wgmma results), each tree.
    install || exit 1
    gunzip -c .dbcarry2/autotune.db.gz > "$AUTOTUNE_DB"
    for tree in "$PWD" "$PWD/.tf32"; do
        n=$(basename "$tree")
        (cd "$tree" && PYTHONPATH="/tmp/site:$tree" timeout -k 5 150 python3 "$OLDPWD/results/h200/20261129d/tf32_profile.py" > "$OUT/profile_$n.txt" 2>&1)
        say "profile $n: rc=$?"; grep -E "^module|^roundings" "$OUT/profile_$n.txt" >> "$OUT/summary.txt"
    done ;;
7)  # Per convolution, in order: main, main with TF32-rounded weights, next/tf32-round (.tf32),
    # over call 5's store (.dbcarry2).
    install || exit 1
    gunzip -c .dbcarry2/autotune.db.gz > "$AUTOTUNE_DB"
    S=$PWD/results/h200/20261129d/tf32_layers.py
    timeout -k 5 120 python3 "$S" > "$OUT/layers_main.txt" 2>&1; say "main: rc=$? $(head -1 "$OUT/layers_main.txt")"
    timeout -k 5 120 python3 "$S" --round-weights > "$OUT/layers_main_rw.txt" 2>&1; say "main, weights rounded: rc=$? $(head -1 "$OUT/layers_main_rw.txt")"
    (cd .tf32 && PYTHONPATH="/tmp/site:$PWD" timeout -k 5 120 python3 "$S" > "$OUT/layers_tf32.txt" 2>&1); say "next/tf32-round: rc=$? $(head -1 "$OUT/layers_tf32.txt")" ;;
8)  # next/tf32-round (.tf32) with the fused tuning: tc_wgmma tuned in tf32 with each
    # convolution's epilogue (the plain bests of call 5 in .dbcarry2), then the tf32 rows.
    install || exit 1
    gunzip -c .dbcarry2/autotune.db.gz > "$AUTOTUNE_DB"
    cd .tf32; export PYTHONPATH="/tmp/site:$PWD"
    for m in resnet50 vgg16; do
        t=$(( $(left) - 60 )); [ "$t" -lt 90 ] && { say "$m: not tuned (time)"; continue; }
        s=$SECONDS; timeout -k 5 "$t" python3 -m autotune tune-model --model $m --batch 32 --dtype tf32 --family tc_wgmma > "$OUT/tune_${m}_tf32.log" 2>&1
        say "tune-model $m tf32 tc_wgmma (fused): rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/tune_${m}_tf32.log")"
        bench_model $m 32 tf32
    done
    save_db; (cd "$OUT" && tar -czf logs_models.tgz *.log model_* && rm -rf *.log model_*) ;;
esac
say "call $1 done in $((SECONDS - T0)) s"
