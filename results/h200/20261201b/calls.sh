#!/usr/bin/env bash
# The GPU calls of 2026-12-01's second session (session 59), on one H200, from the checkout root
# with `.whl` carried (../shared/device/wheels.sh --kernel-tuner, with nvidia-ml-py). Run as:
#   LIMIT=575 OUT=$OUT bash results/h200/20261201b/calls.sh N
set -u
. "$(dirname "$0")/../calls_lib.sh"
HERE=results/h200/20261201b
# The calls ran with a copy of session 58's layers() here, which printed what table_layers does.
layers() {  # DTYPE WHICH: session 58's table's layers (../20261201/call9), table_layers' WHICH
    table_layers results/h200/20261201/call9/tc_targets_9.md "$@"
}
sweep() {  # DTYPE WHICH SUBSPACE: the subspace exhaustively on the dtype's layers, cuDNN measured
    # in this run
    local d=$1 which=$2 sub=$3 s=$SECONDS t=$(( $(left) - 40 ))
    [ "$t" -lt 30 ] && { say "sweep $d $which: not run (time)"; return; }
    timeout -k 5 "$t" python3 -m autotune run --family tc_wgmma $(layers "$d" "$which") --layout NHWC --dtype "$d" --subspace "$HERE/$sub" --exhaustive --time-limit $(( t - 15 )) > "$OUT/sweep_${d}_$which.log" 2>&1
    say "sweep $d $which $sub: rc=$? $((SECONDS - s)) s: $(grep -E "new evaluations" "$OUT/sweep_${d}_$which.log" | tail -1)"
}
pairs() {  # DTYPE: mc_pairs.py's table of this call's store
    python3 "$HERE/mc_pairs.py" "$AUTOTUNE_DB" "$1" > "$OUT/pairs_$1.md" 2>&1
    cat "$OUT/pairs_$1.md" >> "$OUT/summary.txt"
}
case "${1:?1}" in
1)  # Clusters of two blocks sharing a tile by multicast copies (MULTICAST), new: correct at the
    # odd shapes in every dtype (the new test and the whole file), then each clustered
    # configuration of mc.toml beside its twin without clusters on bf16's weak layers.
    # Predicted: a quarter fewer L2 bytes a step for 128 x 128 tiles; where L2's bandwidth or
    # the copies' latency bounds the main loop (ResNet-50's short 1x1 layers), 5-15% faster.
    install || exit 1
    nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >> "$OUT/summary.txt"
    s=$SECONDS; timeout -k 5 200 python3 -m pytest -q -m gpu -p no:cacheprovider -k clusters tests/gpu/test_gpu_tc_wgmma.py > "$OUT/clusters.log" 2>&1
    say "test_gpu_tc_wgmma -k clusters: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/clusters.log")"
    grep -E "^E |Error|error" "$OUT/clusters.log" | head -20 >> "$OUT/summary.txt"
    s=$SECONDS; timeout -k 5 240 python3 -m pytest -q -m gpu -p no:cacheprovider -k "not clusters" tests/gpu/test_gpu_tc_wgmma.py > "$OUT/tc_wgmma.log" 2>&1
    say "test_gpu_tc_wgmma -k 'not clusters': rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/tc_wgmma.log")"
    sweep bf16 weak mc.toml
    pairs bf16
    save_db; pack ;;
2)  # Call 1: correct, but 1.3-3.4x the time of each twin without clusters (MULTICAST=1: 43
    # pairs, geometric mean 2.31x; 2: 48 pairs, 2.24x). The SASS (cuobjdump) showed why: the
    # consumers' arrive with .release.cluster put MEMBAR.ALL.GPU before every slot's release,
    # and the producer's .acquire.cluster wait a CCTL.IVALL after. Now CTA-scope arrives and
    # waits, as the barrier protocol needs. Correct again, then the twins on bf16's weak and
    # other layers, and fp16's and tf32's weak ones. Predicted as in call 1.
    install || exit 1
    s=$SECONDS; timeout -k 5 200 python3 -m pytest -q -m gpu -p no:cacheprovider -k clusters tests/gpu/test_gpu_tc_wgmma.py > "$OUT/clusters.log" 2>&1
    say "test_gpu_tc_wgmma -k clusters: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/clusters.log")"
    sweep bf16 weak mc.toml; pairs bf16
    sweep fp16 weak mc.toml
    sweep tf32 weak mc.toml
    sweep bf16 rest mc.toml
    pairs bf16; pairs fp16; pairs tf32
    save_db; pack ;;
3|4|5)  # Call 2: with CTA-scope barriers, sharing the input (MULTICAST = 1) is 3-5% faster than its
    # twin on most 3x3 layers and 16% on OverFeat's C = 1024 F = 1024 (0.4322 against 0.5161 ms
    # in bf16), 0-2% on ResNet-50's short 1x1 layers; sharing the filters (2) 5% slower on
    # average. Tables of one call, bf16 (3), fp16 (4) and tf32 (5, on call 4's machine, warm): tables.toml (session 58's TMA core,
    # weak.toml, with and without MULTICAST = 1) exhaustively on every layer with C > 3, a
    # 20-evaluation search on each C = 3 first layer, cuDNN in this call. Call 3 first runs
    # the export's GPU test, a persistent clustered plan among its C++ plans.
    install || exit 1
    d=bf16; [ "$1" = 4 ] && d=fp16; [ "$1" = 5 ] && d=tf32
    if [ "$1" = 3 ]; then
        s=$SECONDS; timeout -k 5 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_gpu_export.py > "$OUT/export.log" 2>&1
        say "test_gpu_export: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/export.log")"
    fi
    s=$SECONDS; t=$(( $(left) - 40 ))
    timeout -k 5 $t python3 -m autotune run --family tc_wgmma $(layers $d first) --layout NHWC --dtype $d --budget 20 --time-limit $(( t - 15 )) > "$OUT/first_$d.log" 2>&1
    say "first layers $d: rc=$? $((SECONDS - s)) s: $(grep -E "new evaluations" "$OUT/first_$d.log" | tail -1)"
    sweep $d all tables.toml
    pairs $d
    python3 results/tc_targets.py "$AUTOTUNE_DB" "NVIDIA H200" > "$OUT/tc_targets_$1.md" 2> "$OUT/tc_targets_$1.log"
    say "tc_targets: rc=$? $(grep "stored in" "$OUT/tc_targets_$1.md" | tr '\n' ' ')"
    save_db; pack ;;
esac
