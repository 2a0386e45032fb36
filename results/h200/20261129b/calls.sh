#!/usr/bin/env bash
# GPU calls of 2026-11-29 (second H200 session), one machine kept warm between calls. From the
# checkout root, with `.whl` carried (../shared/device/wheels.sh --kernel-tuner):
#   bash results/h200/20261129b/calls.sh A|K|B|C|D|E
# A installs `.whl` into /tmp/site (which outlives the call while the machine is warm), tunes
# ResNet-50 in bf16 and writes the database back (gzipped) so that later calls, on this machine or
# a fresh one, carry it in `.dbcarry/` (git-ignored) instead of tuning again.
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
restore_db() {  # the tuned database a former call wrote back, when this machine has none
    [ -f "$AUTOTUNE_DB" ] || { [ -f .dbcarry/autotune.db.gz ] && gunzip -c .dbcarry/autotune.db.gz > "$AUTOTUNE_DB"; }
}
save_db() {  # one file: the write-ahead log folded in first
    python3 -c "import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute('PRAGMA wal_checkpoint(TRUNCATE)')" "$AUTOTUNE_DB"
    gzip -c "$AUTOTUNE_DB" > "$OUT/autotune.db.gz"
}
case "${1:?A, K, B, C, D or E}" in
A)  install || exit 1
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > "$OUT/device.txt" 2>&1
    python3 -c "import cupy, torch; print('cupy', cupy.__version__, 'torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())" >> "$OUT/device.txt" 2>&1
    nproc >> "$OUT/device.txt"; lscpu | grep -E "Model name|MHz" >> "$OUT/device.txt"
    restore_db
    # Issue 35: every distinct convolution of ResNet-50 at batch 32 in bf16 (resumes if cut short).
    s=$SECONDS; python3 -m autotune tune-model --model resnet50 --batch 32 --dtype bf16 --time-limit 300 > "$OUT/tune_model.log" 2>&1
    say "tune-model resnet50 bf16: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/tune_model.log")"
    save_db
    # Where a forward's host time goes, per launcher (issue 35 item 5).
    s=$SECONDS; timeout -k 5 $(( $(left) - 20 )) python3 results/h200/20261129b/host_profile.py > "$OUT/host_profile.txt" 2>&1
    say "host_profile: rc=$? $((SECONDS - s)) s"
    gpu_tests test_runtime_precision ;;
K)  # Issue 33: four of Kernel Tuner's examples at longer limits, both tools (call 2, run after A on
    # the warm machine with `.kt_examples` carried as well; 560 s, cut short in Kernel Tuner's
    # own run of reduction.py).
    s=$SECONDS; timeout -k 5 560 python3 -m autotune bench kt-examples --examples .kt_examples/cuda --kernel-tuner --kt-lang cupy --max-fevals 20 --timeout 240 --only convolution.py --only reduction.py --only expdist.py --only accuracy.py --output "$OUT/kt" > "$OUT/kt_examples.log" 2>&1
    say "kt-examples: rc=$? $((SECONDS - s)) s"; tar czf "$OUT/kt.tgz" -C "$OUT" kt && rm -rf "$OUT/kt" ;;
B)  # After the driver default, the per-address tensor maps and the fused bias.
    install || exit 1; restore_db
    gpu_tests test_runtime_precision
    s=$SECONDS; timeout -k 5 $(( $(left) - 10 )) python3 -m autotune bench model --model resnet50 --batch 32 --precision bf16 --cuda-graphs --launcher driver --launcher cupy --output "$OUT/model" > "$OUT/bench_model.log" 2>&1
    say "bench model resnet50 bf16: rc=$? $((SECONDS - s)) s"; cat "$OUT/model/model.md" >> "$OUT/summary.txt" 2>/dev/null ;;
C)  install || exit 1; restore_db
    gpu_tests test_runtime_precision
    s=$SECONDS; timeout -k 5 120 python3 results/h200/20261129b/host_profile.py > "$OUT/host_profile.txt" 2>&1
    say "host_profile: rc=$? $((SECONDS - s)) s"
    gpu_tests test_runtime ;;
D)  # bench model again, its eager ways measured before any compiled one.
    install || exit 1; restore_db
    s=$SECONDS; timeout -k 5 $(( $(left) - 10 )) python3 -m autotune bench model --model resnet50 --batch 32 --precision bf16 --cuda-graphs --launcher driver --launcher cupy --output "$OUT/model" > "$OUT/bench_model.log" 2>&1
    say "bench model resnet50 bf16: rc=$? $((SECONDS - s)) s"; cat "$OUT/model/model.md" >> "$OUT/summary.txt" 2>/dev/null
    s=$SECONDS; timeout -k 5 120 python3 results/h200/20261129b/host_profile.py > "$OUT/host_profile.txt" 2>&1
    say "host_profile: rc=$? $((SECONDS - s)) s" ;;
E)  # After the chunked NHWC padding, aligned inputs and the bias-pass pricing.
    install || exit 1; restore_db
    gpu_tests test_runtime_precision test_runtime
    s=$SECONDS; timeout -k 5 $(( $(left) - 40 )) python3 -m autotune bench model --model resnet50 --batch 32 --precision bf16 --cuda-graphs --launcher driver --launcher cupy --output "$OUT/model" > "$OUT/bench_model.log" 2>&1
    say "bench model resnet50 bf16: rc=$? $((SECONDS - s)) s"; cat "$OUT/model/model.md" >> "$OUT/summary.txt" 2>/dev/null
    s=$SECONDS; timeout -k 5 $(( $(left) - 5 )) python3 results/h200/20261129b/host_profile.py > "$OUT/host_profile.txt" 2>&1
    say "host_profile: rc=$? $((SECONDS - s)) s" ;;
esac
say "call $1 done in $((SECONDS - T0)) s"
