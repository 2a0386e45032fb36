#!/usr/bin/env bash
# The GPU calls of 2026-12-01's session (session 58), on one H200, from the checkout root with
# `.whl` carried (../shared/device/wheels.sh --kernel-tuner, with nvidia-ml-py for `--observe`),
# `.head` (HEAD's autotune and kernels, `git archive HEAD autotune kernels`) where a call compares
# against it, and `.dbcarry/autotune.db.gz` (call 4's store) in call 9. Run as:
#   LIMIT=575 OUT=$OUT bash results/h200/20261201/calls.sh N
# Session 57's store (.dbcarry) did not survive to this machine: calls 4 and 9 made a new one.
set -u
. "$(dirname "$0")/../calls_lib.sh"
HERE=results/h200/20261201
cfg() {  # BM BN STAGES STORE_TMA STREAM_K [GEMM_1X1]: a TMA config's JSON, two consumer warpgroups
    echo "{\"BM\":$1,\"BN\":$2,\"WG\":2,\"STAGES\":$3,\"SPLIT_K\":1,\"PRODUCER\":1,\"C_OUTER\":1,\"L1_CACHE\":0,\"TILES_PER_BLOCK\":1,\"TMA\":1,\"STORE_TMA\":$4,\"GEMM_1X1\":${6:-0},\"STAGING\":1,\"PINGPONG\":0,\"PERSISTENT\":0,\"STREAM_K\":$5}"
}
trace() {  # NAME SHAPE DTYPE [--sk-blocks N]... CONFIG...: sk_trace.py's timelines
    local name=$1 shape=$2 d=$3; shift 3; local a=() c
    while [ "${1:-}" = --sk-blocks ]; do a+=(--sk-blocks "$2"); shift 2; done
    for c in "$@"; do a+=(--config "$c"); done
    timeout -k 5 $(( $(left) - 10 )) python3 "$HERE/sk_trace.py" --shape "$shape" --dtype "$d" "${a[@]}" --output "$OUT/$name.json" > "$OUT/$name.md" 2> "$OUT/$name.log"
    say "trace $name: rc=$?"; cat "$OUT/$name.md" >> "$OUT/summary.txt"; tail -3 "$OUT/$name.log" >> "$OUT/summary.txt"
}
layers() {  # DTYPE WHICH: session 57's table's layers of the dtype, as --shape args: weak (C > 3,
    # below 1.0x cuDNN), rest (C > 3, at or above) or first (C = 3)
    python3 - "$1" "$2" <<'PY'
import re, sys
cur = None
for line in open("results/h200/20261130i/call2/tc_targets_2.md"):
    m = re.match(r"## (\w+)", line)
    if m:
        cur = m.group(1)
    elif cur == sys.argv[1] and line.startswith("| ") and "tc_" in line:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        c, speedup = int(re.search(r"C=(\d+)", cells[1]).group(1)), float(cells[5])
        which = "first" if c <= 3 else "weak" if speedup < 1.0 else "rest"
        if which == sys.argv[2]:
            print("--shape", cells[1])
PY
}
weak() { layers "$1" weak; }
sweep() {  # DTYPE [WHICH SUBSPACE]: the subspace exhaustively on the dtype's layers (default: the
    # weak ones, weak.toml), cuDNN measured in this run
    local d=$1 which=${2:-weak} sub=${3:-weak.toml} s=$SECONDS t=$(( $(left) - 40 ))
    [ "$t" -lt 30 ] && { say "sweep $d $which: not run (time)"; return; }
    timeout -k 5 "$t" python3 -m autotune run --family tc_wgmma $(layers "$d" "$which") --layout NHWC --dtype "$d" --subspace "$HERE/$sub" --exhaustive --time-limit $(( t - 15 )) > "$OUT/sweep_${d}_$which.log" 2>&1
    say "sweep $d $which: rc=$? $((SECONDS - s)) s: $(grep -E "new evaluations" "$OUT/sweep_${d}_$which.log" | tail -1)"
}
case "${1:?1}" in
1)  # Why stream-K is slower than the whole tiles on ResNet-50's short layers (session 57: 17.3
    # us against 12.6 on the 14x14 C = 1024 F = 256 bf16 layer, where 11.9 steps a block against
    # 16 predicted 0.75 of the time plus the fix-up): each block's timeline, stream-K beside
    # the whole tiles, on that layer (98 tiles of 128 x 128, 16 steps) and on the 7x7 C = 2048
    # F = 512 layer (52 tiles, 32 steps: 12.6 steps a block, predicted 0.45 of the main loop).
    install || exit 1
    trace sk14 N=14,K=1,C=1024,F=256,B=32 bf16 "$(cfg 128 128 6 1 0)" "$(cfg 128 128 6 1 1)"
    trace sk7 N=7,K=1,C=2048,F=512,B=32 bf16 "$(cfg 128 128 6 1 0)" "$(cfg 128 128 6 1 1)" "$(cfg 128 128 6 0 1)"
    (cd "$OUT" && tar -czf call1.tgz *.json *.md *.log && rm -f *.json *.md *.log) ;;
2)  # Call 1: the steps run as fast in stream-K's shares as in whole tiles (0.38 us); each
    # fix-up costs 1.5-4.6 us, two a block. Where in the fix-up: stamps between its steps. And
    # fewer sharing blocks, so that shares fall on halves of tiles (one fix-up a block): on the
    # 7x7 layer 104 blocks of 16 steps, predicted 6.1 + ~2.5 first data + one fix-up; on the
    # 14x14 C = 1024 F = 512 layer (196 tiles: a wave and 64 more) 128 blocks of 8 steps
    # after the wave; on the 14x14 F = 256 layer 98 (one whole tile each, no fix-up: stream-K's
    # path against the whole tiles').
    install || exit 1
    trace sk7b N=7,K=1,C=2048,F=512,B=32 bf16 --sk-blocks 104 "$(cfg 128 128 6 1 1)"
    trace sk14f512 N=14,K=1,C=1024,F=512,B=32 bf16 --sk-blocks 128 "$(cfg 128 128 6 1 0)" "$(cfg 128 128 6 1 1)"
    trace sk14b N=14,K=1,C=1024,F=256,B=32 bf16 --sk-blocks 98 "$(cfg 128 128 6 1 1)"
    (cd "$OUT" && tar -czf call2.tgz *.json *.md *.log && rm -f *.json *.md *.log) ;;
3)  # HALF_BLOCK: the last channel block at most half full copied through half-width maps. On
    # OverFeat's 20x20 C = 96 F = 256 layer (bf16 0.78x, fp16 0.77x cuDNN in session 57), where
    # half steps took 0.9 of a full step's time; predicted: those steps at half the time if
    # their copies' bytes (zeros included) bound them, about 0.78 of the layer's time; no
    # change if the copies' rows do. half_block.toml's 12 configs a dtype with the code before
    # (.head: HEAD's autotune and kernels, carried) and this one, cuDNN measured in the same
    # run; then the kernel's GPU tests.
    install || exit 1
    for v in before after; do
        s=$SECONDS; [ $v = before ] && pp=/tmp/site:$PWD/.head || pp=/tmp/site:$PWD
        [ $v = before ] && base="" || base=--no-baseline
        PYTHONPATH=$pp timeout -k 5 150 python3 -m autotune run --family tc_wgmma --shape N=20,K=5,C=96,F=256,B=128 --layout NHWC --dtype bf16 --dtype fp16 --subspace "$HERE/half_block.toml" --exhaustive $base --storage /tmp/home/$v.db > "$OUT/half_$v.log" 2>&1
        say "half block $v: rc=$? $((SECONDS - s)) s: $(grep -E "new evaluations|wrong" "$OUT/half_$v.log" | tail -2 | tr '\n' ' ')"
        PYTHONPATH=$pp python3 -m autotune best --family tc_wgmma --storage /tmp/home/$v.db --output "$OUT/half_$v.md" >> "$OUT/half_$v.log" 2>&1
        cat "$OUT/half_$v.md" >> "$OUT/summary.txt"
    done
    for v in before after; do tail -4 "$OUT/half_$v.log" >> "$OUT/summary.txt"; done
    CAP=$(( $(left) - 20 )) gpu_tests test_gpu_tc_wgmma
    (cd "$OUT" && tar -czf call3.tgz *.log *.md && rm -f *.log *.md) ;;
4|5)  # Call 3: OverFeat's C = 96 layer 0.1071 ms in 12 configs of the TMA core, where its
    # stored best (a 60-evaluation search of the whole space) was 0.1262. weak.toml exhaustively
    # on every dtype's weak layers, cuDNN measured in the same run: the store is carried from
    # call 4 to call 5 (.dbcarry) and each resumes where the last stopped.
    install || exit 1; restore_db
    for d in bf16 fp16 tf32; do sweep $d; done
    python3 -m autotune best --family tc_wgmma --output "$OUT/sweep_best.md" > /dev/null 2>&1
    # (as it ran in call 4, sweep named its logs sweep_$d.log)
    save_db; (cd "$OUT" && tar -czf call$1.tgz *.log *.md && rm -f *.log *.md) ;;
6)  # Call 4 timed call 3's OverFeat C = 96 best again at 0.1303 ms, where call 3 had 0.1071;
    # cuDNN was the same in both (0.0955, 0.0959), measured before the tuning began. Call 3's
    # study ran first on a fresh machine, call 4's after 60 s of others. Does the GPU slow
    # under sustained load (power or heat), and the baseline escape it by going first? The
    # layer's cuDNN and its 12 configs (half_block.toml, bf16) fresh, then after 90 s of BF16
    # products, then again, with the SM clock, power and temperature read (nvidia-smi, a
    # query) between.
    install || exit 1
    gpu() { nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu,clocks_throttle_reasons.active --format=csv,noheader | sed "s/^/$1: /" >> "$OUT/summary.txt"; }
    pair() {  # NAME: cuDNN, then the 12 configs, into their own store
        local s=$SECONDS
        python3 -m autotune baseline --shape N=20,K=5,C=96,F=256,B=128 --dtype bf16 --layout NHWC --storage /tmp/home/$1.db > "$OUT/base_$1.log" 2>&1
        gpu "$1 after cuDNN"
        python3 -m autotune run --family tc_wgmma --shape N=20,K=5,C=96,F=256,B=128 --layout NHWC --dtype bf16 --subspace "$HERE/half_block.toml" --exhaustive --observe clocks,power --storage /tmp/home/$1.db > "$OUT/run_$1.log" 2>&1
        gpu "$1 after ours"
        python3 -m autotune best --family tc_wgmma --storage /tmp/home/$1.db > "$OUT/best_$1.md" 2>&1
        say "$1: $((SECONDS - s)) s"; grep "tc_wgmma" "$OUT/best_$1.md" | cut -c1-220 >> "$OUT/summary.txt"
    }
    gpu fresh
    pair fresh
    python3 "$HERE/heat.py" 90 >> "$OUT/summary.txt" 2>&1; gpu "after 90 s of products"
    pair hot
    python3 "$HERE/heat.py" 30 >> "$OUT/summary.txt" 2>&1
    pair hot2
    (cd "$OUT" && tar -czf call6.tgz *.log *.md && rm -f *.log *.md) ;;
7)  # Call 6: no throttling (1980 MHz throughout, 34-43 C, at most 468 W of 700), and the config
    # ran at 0.1322 ms fresh and hot alike; cuDNN at 0.0941-0.0946. Call 3 alone had 0.1071,
    # in both of its runs. Where the buffers lie? The config with pads before its buffers;
    # then call 3's first run exactly (.head, bf16 and fp16, a fresh store: the device's
    # ceilings and cuDNN measured first, in the same process).
    install || exit 1
    c96=$(cfg 128 128 4 1 0 | sed 's/"PERSISTENT":0/"PERSISTENT":1/')
    python3 "$HERE/placement.py" --shape N=20,K=5,C=96,F=256,B=128 --dtype bf16 --config "$c96" \
        --pad-mib 0 --pad-mib 0.5 --pad-mib 1 --pad-mib 1.5 --pad-mib 2 --pad-mib 3 --pad-mib 7 \
        --pad-mib 13 --pad-mib 64 --pad-mib 100 >> "$OUT/summary.txt" 2>&1
    s=$SECONDS
    PYTHONPATH=/tmp/site:$PWD/.head timeout -k 5 150 python3 -m autotune run --family tc_wgmma --shape N=20,K=5,C=96,F=256,B=128 --layout NHWC --dtype bf16 --dtype fp16 --subspace "$HERE/half_block.toml" --exhaustive --storage /tmp/home/again.db > "$OUT/again.log" 2>&1
    say "call 3's first run again: rc=$? $((SECONDS - s)) s"; grep "^| tc_wgmma" "$OUT/again.log" | cut -c1-60,250-400 >> "$OUT/summary.txt"
    python3 "$HERE/placement.py" --shape N=20,K=5,C=96,F=256,B=128 --dtype bf16 --config "$c96" --pad-mib 0 >> "$OUT/summary.txt" 2>&1
    (cd "$OUT" && tar -czf call7.tgz *.log && rm -f *.log) ;;
8)  # What cuDNN runs where it beats the sweep's bests (call 4): on ResNet-50's short layers
    # (0.86-0.90x in bf16), OverFeat's C = 96 (0.74x) and VGG-16's 224x224 C = 64 (0.93x), its
    # kernels and ours (ncu_layers.txt: the sweep's bf16 best of each) under Nsight Compute at
    # the GPU's own clocks: names, grids, clusters, registers, shared memory, duration, SM and
    # memory throughput.
    install || exit 1
    NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
    sections="--section LaunchStats --section SpeedOfLight --section Occupancy"
    while IFS='|' read -r shape config; do
        eval "$(echo "$shape" | tr ',' '\n' | sed 's/^/local_/')"
        tag=$(echo "$shape" | tr ',=' '__')
        timeout -k 5 120 $NCU --target-processes all --profile-from-start off $sections --clock-control none \
            python3 "$HERE/cudnn_conv.py" $local_N $local_K $local_C $local_F $local_B ${local_stride:-1} bf16 > "$OUT/cudnn_$tag.txt" 2>&1
        timeout -k 5 120 $NCU --target-processes all --kernel-name regex:^tc_wgmma\$ --launch-skip 3 --launch-count 1 $sections --clock-control none \
            python3 "$HERE/placement.py" --shape "$shape" --dtype bf16 --config "$config" --repeats 5 > "$OUT/ours_$tag.txt" 2>&1
        say "$shape: $(grep -E "^  [a-z_0-9]+.*\(|Duration|Cluster Size|Grid Size|Registers Per|Dynamic Shared Memory Per|Compute \(SM\) Throughput|Memory Throughput" "$OUT/cudnn_$tag.txt" "$OUT/ours_$tag.txt" | sed 's/  */ /g' | cut -c1-160)"
        unset local_stride
    done < "$HERE/ncu_layers.txt"
    (cd "$OUT" && tar -czf call8.tgz *.txt --exclude summary.txt && rm -f cudnn_*.txt ours_*.txt) ;;
9)  # The tables of one run: call 4's store (.dbcarry) with the layers call 4 did not sweep, the
    # rest of C > 3 (rest.toml) and the C = 3 first layers (a 20-evaluation search each: they
    # take the cp.async gather, outside the TMA core), cuDNN measured for each.
    install || exit 1; restore_db
    for d in bf16 fp16 tf32; do sweep $d rest rest.toml; done
    for d in bf16 fp16 tf32; do
        s=$SECONDS; t=$(( $(left) - 40 ))
        timeout -k 5 $t python3 -m autotune run --family tc_wgmma $(layers $d first) --layout NHWC --dtype $d --budget 20 --time-limit $(( t - 15 )) > "$OUT/first_$d.log" 2>&1
        say "first layers $d: rc=$? $((SECONDS - s)) s: $(grep -E "new evaluations" "$OUT/first_$d.log" | tail -1)"
    done
    python3 results/tc_targets.py "$AUTOTUNE_DB" "NVIDIA H200" > "$OUT/tc_targets_9.md" 2> "$OUT/tc_targets_9.log"
    say "tc_targets: rc=$? $(grep "stored in" "$OUT/tc_targets_9.md" | tr '\n' ' ')"
    save_db; (cd "$OUT" && tar -czf call9.tgz *.log && rm -f *.log) ;;
10)  # The default search with the starting configurations chosen from calls 4 and 9 against the
    # three before them (.head: HEAD's autotune): `autotune run` as a newcomer runs it, 12
    # evaluations a layer from a fresh store, on ResNet-50's and VGG-16's layers in bf16.
    install || exit 1
    for net in resnet50 vgg16; do
        for v in before after; do
            s=$SECONDS; t=$(( $(left) - 25 )); [ "$t" -lt 30 ] && { say "$net $v: not run (time)"; continue; }
            [ $v = before ] && pp=/tmp/site:$PWD/.head || pp=/tmp/site:$PWD
            PYTHONPATH=$pp timeout -k 5 $t python3 -m autotune run --family tc_wgmma --shapes $net --dtype bf16 --layout NHWC --budget 12 --no-baseline --time-limit $(( t - 10 )) --storage /tmp/home/${net}_$v.db > "$OUT/seeds_${net}_$v.log" 2>&1
            say "$net $v: rc=$? $((SECONDS - s)) s: $(grep -E "new evaluations" "$OUT/seeds_${net}_$v.log" | tail -1)"
        done
        python3 "$HERE/seed_ab.py" /tmp/home/${net}_before.db /tmp/home/${net}_after.db > "$OUT/seeds_$net.md" 2>&1
        cat "$OUT/seeds_$net.md" >> "$OUT/summary.txt"
    done
    (cd "$OUT" && tar -czf call10.tgz *.log && rm -f *.log) ;;
esac
