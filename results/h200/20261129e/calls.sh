#!/usr/bin/env bash
# This session's device calls (H200), one case each: `bash results/h200/20261129e/calls.sh N`
# (cases 1 to 4 ran, in order; 5 did not: the device time was spent). From the checkout root,
# `.whl` carried, and `.dbcarry/autotune.db.gz`: for case 1 the store call 8 of
# results/h200/20261129d wrote, for each later case the store ($OUT/autotune.db.gz) of the one
# before. LIMIT is the call's seconds (570, 560, 540, 350 here).
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
        [ "$t" -gt 160 ] && t=160
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
tune() {  # model dtype [more options]
    local m=$1 d=$2; shift 2
    t=$(( $(left) - 70 )); [ "$t" -lt 60 ] && { say "tune $m $d: not run (time)"; return; }
    s=$SECONDS; timeout -k 5 "$t" python3 -m autotune tune-model --model "$m" --batch 32 --dtype "$d" "$@" > "$OUT/tune_${m}_$d.log" 2>&1
    say "tune-model $m $d $*: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/tune_${m}_$d.log")"
}
bench_model() {  # model batch precision [more options]
    local m=$1 b=$2 p=$3; shift 3
    s=$SECONDS; timeout -k 5 $(( $(left) - 10 )) python3 -m autotune bench model --model "$m" --batch "$b" --precision "$p" --output "$OUT/model_${m}_$p" "$@" > "$OUT/bench_${m}_$p.log" 2>&1
    say "bench model $m $b $p $*: rc=$? $((SECONDS - s)) s"; cat "$OUT/model_${m}_$p/model.md" >> "$OUT/summary.txt" 2>/dev/null
    grep -h "^Our convolutions" "$OUT/model_${m}_$p"/layers_*.md >> "$OUT/summary.txt" 2>/dev/null
}
fused_slow() {  # the slow fused configuration alone: plain, bias, bias_add_relu; then ncu on two
    # (with NCU_IF_SLOW set, only where the fused one still takes 1.5x the plain one or more)
    local S=N=56,K=1,C=64,F=256,B=32,dtype=tf32,layout=NHWC P=results/h200/20261129e/fused_slow.toml
    for e in "" ",epilogue=bias" ",epilogue=bias_add_relu"; do
        timeout -k 5 60 python3 -m autotune run --family tc_wgmma --shape "$S$e" --subspace $P --strategy brute_force \
            --exhaustive --no-baseline --storage /tmp/fs.db --cache-dir /tmp/fs_cache > "$OUT/fs.log" 2>&1
    done
    python3 -c "import sqlite3; [print('alone', *r) for r in sqlite3.connect('/tmp/fs.db').execute('select problem_key, status, round(time_ms*1000,1), registers from evaluations')]" | tee -a "$OUT/summary.txt"
    NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
    if [ -n "${NCU_IF_SLOW:-}" ]; then
        python3 -c "import sqlite3; t = dict(sqlite3.connect('/tmp/fs.db').execute('select problem_key, time_ms from evaluations')); plain = min(v for k, v in t.items() if 'epilogue' not in k); exit(0 if max(t.values()) >= 1.5 * plain else 1)" || return 0
    fi
    for e in "" ",epilogue=bias_add_relu"; do
        n=plain; [ -n "$e" ] && n=fused
        timeout -k 5 120 $NCU --target-processes all --kernel-name regex:^tc_wgmma\$ --launch-count 1 --set full \
            --export "$OUT/ncu_$n" --force-overwrite python3 -m autotune run --family tc_wgmma --shape "$S$e" \
            --subspace $P --strategy brute_force --exhaustive --no-baseline --storage /tmp/fs_$n.db --cache-dir /tmp/fs_cache > "$OUT/ncu_$n.log" 2>&1
        $NCU --import "$OUT/ncu_$n.ncu-rep" --page details > "$OUT/ncu_$n.details.txt" 2>&1; rm -f "$OUT/ncu_$n.ncu-rep"
        say "ncu $n: $(grep -m1 'Duration' "$OUT/ncu_$n.details.txt")"
    done
}
pack() { (cd "$OUT" && tar -czf logs_models.tgz *.log model_* 2>/dev/null && rm -rf *.log model_*); }
case "${1:?1 to 5}" in
1)  # The residual's fused tuning (9c85b13, never run) and the layer table (b4069a1, never run).
    install || exit 1; restore_db
    gpu_tests test_runtime_precision test_gpu_tune_kernel test_runtime
    fused_slow
    tune resnet50 tf32 --family tc_wgmma
    bench_model resnet50 32 tf32 --layers --cuda-graphs
    tune resnet50 bf16
    save_db; pack ;;
2)  # The epilogue's inputs fetched a run at a time (kernel change after call 1): its GPU tests,
    # the slow configuration alone again, ResNet-50 tf32 tuned again (new digest) and its rows.
    install || exit 1; restore_db
    gpu_tests test_gpu_epilogue test_gpu_tc_wgmma
    NCU_IF_SLOW=1 fused_slow
    tune resnet50 tf32 --family tc_wgmma
    bench_model resnet50 32 tf32 --layers
    save_db; pack ;;
3)  # bf16 under main's digest (fused epilogues): ResNet-50, then VGG-16 in the time left.
    install || exit 1; restore_db
    tune resnet50 bf16; bench_model resnet50 32 bf16 --layers --cuda-graphs
    tune vgg16 bf16; bench_model vgg16 32 bf16 --layers
    save_db; pack ;;
4)  # fp32 (TF32 off) rows, issue 35's last precision.
    install || exit 1; restore_db
    tune resnet50 fp32 --family implicit_gemm --family winograd
    bench_model resnet50 32 fp32 --layers
    save_db; pack ;;
5)  # next/tma-store (issue 36 item 2), carried as .tma (git archive next/tma-store without
    # results/ but results/h200/tma_store_ab): its tc_wgmma and epilogue GPU tests (the TMA store
    # at odd shapes, every epilogue), then the A/B in the time left.
    install || exit 1
    (cd .tma && PYTHONPATH="/tmp/site:$PWD" timeout -k 5 240 python3 -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_gpu_tc_wgmma.py tests/gpu/test_gpu_epilogue.py > "$OUT/tma_tests.log" 2>&1); say "tma-store tests: $(tail -1 "$OUT/tma_tests.log")"
    (cd .tma && PYTHONPATH="/tmp/site:$PWD" OUT=$OUT/ab timeout -k 5 $(( $(left) - 10 )) bash results/h200/tma_store_ab/ab.sh > "$OUT/ab.log" 2>&1); say "ab: rc=$?"; cat "$OUT/ab/ab.md" >> "$OUT/summary.txt" 2>/dev/null
    (cd "$OUT" && tar -czf ab.tgz ab *.log && rm -rf ab *.log) ;;
esac
say "call $1 done in $((SECONDS - T0)) s"
