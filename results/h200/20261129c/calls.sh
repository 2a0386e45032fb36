#!/usr/bin/env bash
# GPU calls of 2026-11-29 (third H200 session), one machine kept warm between calls. From the
# checkout root, with `.whl` (../shared/device/wheels.sh --kernel-tuner) and `.dbcarry` (the
# ResNet-50 bf16 database tuned in results/h200/20261129b, call A) carried:
#   bash results/h200/20261129c/calls.sh N|V|W|X|P
# N tests the branch next/all (the op through torch.library.Library, fused ReLU/residual
# epilogues, large outputs as files), carried as `.nextall` (git archive next/all autotune tests
# kernels pyproject.toml), before it is merged.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
T0=$SECONDS
left() { echo $(( ${LIMIT:-580} - (SECONDS - T0) )); }
export HOME=/tmp/home PYTHONUNBUFFERED=1 AUTOTUNE_DB=/tmp/home/autotune.db; mkdir -p "$HOME"
ROOT=$PWD
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
restore_db() {  # the tuned database a former call wrote back, when this machine has none
    [ -f "$AUTOTUNE_DB" ] || { [ -f .dbcarry/autotune.db.gz ] && gunzip -c .dbcarry/autotune.db.gz > "$AUTOTUNE_DB"; }
}
save_db() {  # one file: the write-ahead log folded in first
    python3 -c "import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute('PRAGMA wal_checkpoint(TRUNCATE)')" "$AUTOTUNE_DB"
    gzip -c "$AUTOTUNE_DB" > "$OUT/autotune.db.gz"
}
bench_model() {  # model batch precision [more options]
    local m=$1 b=$2 p=$3; shift 3
    s=$SECONDS; timeout -k 5 $(( $(left) - 10 )) python3 -m autotune bench model --model "$m" --batch "$b" --precision "$p" --output "$OUT/model_${m}_$p" "$@" > "$OUT/bench_${m}_$p.log" 2>&1
    say "bench model $m $b $p $*: rc=$? $((SECONDS - s)) s"; cat "$OUT/model_${m}_$p/model.md" >> "$OUT/summary.txt" 2>/dev/null
}
case "${1:?N, V, W, X or P}" in
N)  install || exit 1; restore_db
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$OUT/device.txt" 2>&1
    cd "$ROOT/.nextall"; export PYTHONPATH="/tmp/site:$ROOT/.nextall"
    gpu_tests test_runtime_precision test_runtime test_gpu_tune_kernel
    bench_model resnet50 32 bf16 --cuda-graphs ;;
V)  # VGG-16 in bf16 tuned (issue 35), then benched; one Kernel Tuner example with outputs as files.
    install || exit 1; restore_db
    cd "$ROOT/.nextall"; export PYTHONPATH="/tmp/site:$ROOT/.nextall"
    s=$SECONDS; python3 -m autotune tune-model --model vgg16 --batch 32 --dtype bf16 --time-limit 220 > "$OUT/tune_vgg16.log" 2>&1
    say "tune-model vgg16 bf16: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/tune_vgg16.log")"
    save_db
    bench_model vgg16 32 bf16 --cuda-graphs
    s=$SECONDS; timeout -k 5 $(( $(left) - 5 )) python3 -m autotune bench kt-examples --examples "$ROOT/.kt_examples/cuda" --max-fevals 20 --timeout 200 --only accuracy.py --output "$OUT/kt" > "$OUT/kt_examples.log" 2>&1
    say "kt-examples accuracy.py: rc=$? $((SECONDS - s)) s"; cat "$OUT"/kt/*.md >> "$OUT/summary.txt" 2>/dev/null ;;
W)  # VGG-16's three shapes V's time limit left untuned, its bench again; then ResNet-50 in tf32 tuned
    # for as long as the call has (resumed by a later call), the database written back.
    install || exit 1; restore_db
    cd "$ROOT/.nextall"; export PYTHONPATH="/tmp/site:$ROOT/.nextall"
    s=$SECONDS; python3 -m autotune tune-model --model vgg16 --batch 32 --dtype bf16 --time-limit 200 > "$OUT/tune_vgg16.log" 2>&1
    say "tune-model vgg16 bf16: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/tune_vgg16.log")"
    bench_model vgg16 32 bf16 --cuda-graphs
    s=$SECONDS; python3 -m autotune tune-model --model resnet50 --batch 32 --dtype tf32 --time-limit $(( $(left) - 30 )) > "$OUT/tune_resnet50_tf32.log" 2>&1
    say "tune-model resnet50 tf32: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/tune_resnet50_tf32.log")"
    save_db ;;
X)  # ResNet-50 in tf32 (tuned in W) benched; batch 1 in bf16 (shapes the store holds only at batch
    # 32); VGG-16 tuned in tf32 and benched as time allows.
    install || exit 1; restore_db
    cd "$ROOT/.nextall"; export PYTHONPATH="/tmp/site:$ROOT/.nextall"
    bench_model resnet50 32 tf32 --cuda-graphs
    s=$SECONDS; timeout -k 5 120 python3 -m autotune bench model --model resnet50 --batch 1 --precision bf16 --output "$OUT/model_resnet50_b1" > "$OUT/bench_resnet50_b1.log" 2>&1
    say "bench model resnet50 1 bf16: rc=$? $((SECONDS - s)) s"; cat "$OUT/model_resnet50_b1/model.md" >> "$OUT/summary.txt" 2>/dev/null
    s=$SECONDS; python3 -m autotune tune-model --model vgg16 --batch 32 --dtype tf32 --time-limit $(( $(left) - 110 )) > "$OUT/tune_vgg16_tf32.log" 2>&1
    say "tune-model vgg16 tf32: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/tune_vgg16_tf32.log")"
    save_db
    bench_model vgg16 32 tf32 ;;
P)  # Where ResNet-50's tf32 forward goes, eager against ours (X's bench: ours 0.54x eager).
    install || exit 1; restore_db
    cd "$ROOT/.nextall"; export PYTHONPATH="/tmp/site:$ROOT/.nextall"
    timeout 150 python3 "$ROOT/results/h200/20261129c/tf32_profile.py" > "$OUT/tf32_profile.txt" 2>&1
    say "tf32_profile: rc=$?" ;;
esac
say "call $1 done in $((SECONDS - T0)) s"
