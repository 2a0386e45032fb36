#!/usr/bin/env bash
# GPU call 1 of 2026-11-29 (H200): the newcomer's first command, cold, then the GPU tests of the
# code changed since the last GPU run. From the checkout root: . .whl/env.sh && bash results/h200/20261129/call1.sh
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
T0=$SECONDS
left() { echo $(( ${LIMIT:-570} - (SECONDS - T0) )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > "$OUT/device.txt" 2>&1
python3 -c "import cupy, torch; print('cupy', cupy.__version__, 'torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())" >> "$OUT/device.txt" 2>&1
nproc >> "$OUT/device.txt"
# Issue 37: `autotune run` as the README's first command meets it: empty results database, empty
# compile caches (a fresh HOME holds both).
export HOME=$(mktemp -d)
s=$SECONDS; python3 -m autotune run > "$OUT/run_default.log" 2>&1; rc=$?
echo "autotune run (cold): rc=$rc wall=$((SECONDS - s)) s" | tee "$OUT/summary.txt"
s=$SECONDS; python3 -m autotune run > "$OUT/run_default_again.log" 2>&1; rc=$?
echo "autotune run (again, resumes): rc=$rc wall=$((SECONDS - s)) s" | tee -a "$OUT/summary.txt"
for f in test_gpu_tune_kernel test_gpu_observers test_gpu_tuned_kernel test_gpu_faults test_gpu_interrupt test_gpu; do
    t=$(left); [ "$t" -lt 20 ] && { echo "$f: not run (time)" | tee -a "$OUT/summary.txt"; continue; }
    s=$SECONDS
    timeout -k 5 "$t" python3 -m pytest -q -m gpu -p no:cacheprovider --durations=5 "tests/gpu/$f.py" > "$OUT/$f.log" 2>&1
    echo "$f: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/$f.log")" | tee -a "$OUT/summary.txt"
done
