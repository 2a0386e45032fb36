#!/usr/bin/env bash
# GPU calls of 2026-11-29 on a lent nvidia-h200-x2 (two H200s of one host), one machine kept warm
# between calls. From the checkout root: bash results/h200x2/20261129/calls.sh A|B|C|S1|S2|D
# A carries .whl (installed into /tmp/site, which outlives the call) and the first third of Ray's
# wheel; B and C carry the other two thirds (the working tree plus .whl leave too little room for
# more: 64 MiB a call); C joins and installs Ray into /tmp/raysite. The pieces, made here (all
# three folders git-ignored through .git/info/exclude):
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux2014_x86_64 -d /tmp/raywhl ray==2.60.0
#   w=/tmp/raywhl/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl; mkdir -p .rayA .rayB .rayC
#   head -c 15000000 $w > .rayA/part0; tail -c +15000001 $w | head -c 32200000 > .rayB/part1
#   tail -c +47200001 $w > .rayC/part2
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/ray
T0=$SECONDS
left() { echo $(( ${LIMIT:-570} - (SECONDS - T0) )); }
export HOME=/tmp/home PYTHONUNBUFFERED=1 AUTOTUNE_DB=/tmp/home/autotune.db; mkdir -p "$HOME"
export PYTHONPATH="/tmp/raysite:/tmp/site:$PWD"
say() { echo "$*" | tee -a "$OUT/summary.txt"; }
gpu_tests() {
    for f in "$@"; do
        t=$(left); [ "$t" -lt 30 ] && { say "$f: not run (time)"; continue; }
        s=$SECONDS
        timeout -k 5 "$t" python3 -m pytest -q -m gpu -p no:cacheprovider --durations=5 "tests/gpu/$f.py" > "$OUT/$f.log" 2>&1
        say "$f: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/$f.log")"
    done
}
case "${1:?A, B, C, S1, S2 or D}" in
A)  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
    cp .rayA/part0 /tmp/ray/
    nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,memory.total --format=csv > "$OUT/device.txt" 2>&1
    python3 -c "import cupy, torch; print('cupy', cupy.__version__, 'torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())" >> "$OUT/device.txt" 2>&1
    nproc >> "$OUT/device.txt"; command -v nsys ncu >> "$OUT/device.txt"
    gpu_tests test_runtime_precision test_gpu_tuned_kernel test_gpu_tune_kernel test_gpu_interrupt test_gpu ;;
B)  cp .rayB/part1 /tmp/ray/
    # Issue 35: every distinct convolution of ResNet-50 at batch 32 in bf16 (the same command resumes if cut short).
    s=$SECONDS; python3 -m autotune tune-model --model resnet50 --batch 32 --dtype bf16 --time-limit $(( $(left) - 20 )) > "$OUT/tune_model_b.log" 2>&1
    say "tune-model resnet50 bf16: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/tune_model_b.log")" ;;
C)  cp .rayC/part2 /tmp/ray/
    cat /tmp/ray/part0 /tmp/ray/part1 /tmp/ray/part2 > /tmp/ray/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/raysite /tmp/ray/ray-2.60.0-*.whl || exit 1
    python3 -c "import ray; print('ray', ray.__version__)" | tee -a "$OUT/summary.txt"
    s=$SECONDS; timeout -k 5 $(( $(left) - 10 )) python3 -m autotune bench model --model resnet50 --batch 32 --precision bf16 --cuda-graphs --output "$OUT/model" > "$OUT/bench_model.log" 2>&1
    say "bench model resnet50 bf16: rc=$? $((SECONDS - s)) s"; cat "$OUT/model/model.md" >> "$OUT/summary.txt" 2>/dev/null ;;
S1) # Issue 34, the one-GPU and --gpus runs of the fixed campaign (kept under /tmp for S2).
    s=$SECONDS; timeout -k 5 585 python3 -m autotune bench scaling --gpus 0,1 --output-dir /tmp/scaling > "$OUT/scaling_c2.log" 2>&1
    say "bench scaling: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/scaling_c2.log")"
    tar czf "$OUT/scaling_c2.tgz" -C /tmp scaling ;;
S2) # Issue 34, the Ray run of the same campaign, the other two taken from S1's scaling.json.
    s=$SECONDS; timeout -k 5 320 python3 -m autotune bench scaling --gpus 0,1 --ray --reuse /tmp/scaling/scaling.json --output-dir /tmp/scaling_ray > "$OUT/scaling_ray.log" 2>&1
    say "bench scaling --ray: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/scaling_ray.log")"
    tar czf "$OUT/scaling_ray.tgz" -C /tmp scaling_ray ;;
D)  # Not run on 2026-11-29 (no device time left): where a forward of ResNet-50 spends its host time.
    # (Its profile of a forward's host time ran later as results/h200/20261129b/host_profile.py.)
    s=$SECONDS; timeout -k 5 $(( $(left) - 10 )) python3 -m autotune bench kt-examples --examples .kt_examples/cuda --kernel-tuner --kt-lang cupy --max-fevals 20 --timeout 120 --only convolution.py --only reduction.py --only expdist.py --only accuracy.py --output "$OUT/kt" > "$OUT/kt_examples.log" 2>&1
    say "kt-examples: rc=$? $((SECONDS - s)) s"; tar czf "$OUT/kt.tgz" -C "$OUT" kt && rm -rf "$OUT/kt" ;;
esac
say "call $1 done in $((SECONDS - T0)) s"
