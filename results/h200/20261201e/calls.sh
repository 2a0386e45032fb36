#!/usr/bin/env bash
# The GPU calls of 2026-12-01's fifth session (session 62), on H200s, from the checkout root with
# `.whl` (../shared/device/wheels.sh --kernel-tuner) and, where a call says so,
# `.dbcarry/autotune.db.gz`: a store to start from (call 1: session 61's, ../20261201d/store.db.gz;
# call 3: call 1's; call 4: call 3's, each pruned to each study's 10 fastest evaluations of each
# code; call 5: call 4's with session 61's call 6 merged in, ../20261201d/call6/store.db.gz, the
# same pruning; call 6: call 5's, though the warm machine kept call 4's store, which call 6
# used) and, for call 7, `.head`: HEAD's autotune (the five starting
# configurations) with this session's kernels and search_spaces. Call 2 ran its commands inline
# (the same lines, sourcing ../calls_lib.sh), before case 2 was written here; call 8 too. Run as:
#   LIMIT=575 OUT=$OUT bash results/h200/20261201e/calls.sh N
set -u
. "$(dirname "$0")/../calls_lib.sh"
HERE=results/h200/20261201e
# ResNet-50's and VGG-16's 14x14 layers (6,272 pixels: 33 tiles of 192, 49 of 128) and the
# stride-2 3x3 layers with 6,272 pixels, where tiles of 128 pixels leave a wave part full.
WAVES=(--shape N=14,K=1,C=1024,F=512,B=32 --shape N=14,K=1,C=1024,F=256,B=32
    --shape N=14,K=3,C=256,F=256,B=32 --shape N=14,K=3,C=512,F=512,B=32
    --shape N=28,K=3,C=128,F=128,B=32,stride=2 --shape N=14,K=3,C=256,F=256,B=32,stride=2)
DTYPES=(--dtype tf32 --dtype bf16 --dtype fp16)
clocks() { nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader >> "$OUT/summary.txt"; }
case "${1:?1}" in
1)  # Three consumer warpgroups (WG = 3): 192-pixel tiles, so that the 14x14 layers' grids are
    # one wave (132 tiles of 192 x 128 at F = 512, of 192 x 64 at F = 256) where 128-pixel tiles
    # make 196 (1.48 waves) and cuBLAS runs 128 x 192 tiles on 132 blocks. The WG = 3 subspace
    # (wg3.toml) exhaustively on WAVES in three dtypes; session 61's 5 fastest of each layer
    # measured again with this kernel and cuDNN again, all in one store (wg3_pairs.py); then
    # the GPU test of WG = 3 at odd shapes.
    # Predicted: WG = 3 faster than the best of WG = 1-2 on the 1x1 14x14 layers by 10-20%
    # (fp16 0.84x and 0.91x cuDNN in session 61 to at least 1.0x), on the 3x3 14x14 layers by
    # 5-15%, and correct everywhere.
    install || exit 1
    restore_db
    clocks
    s=$SECONDS; t=$(( $(left) - 230 ))
    timeout -k 5 "$t" python3 -m autotune run --family tc_wgmma "${WAVES[@]}" --layout NHWC "${DTYPES[@]}" --subspace "$HERE/wg3.toml" --exhaustive --no-baseline --time-limit $(( t - 15 )) > "$OUT/sweep_wg3.log" 2>&1
    say "sweep wg3: rc=$? $((SECONDS - s)) s: $(grep -E "new evaluations" "$OUT/sweep_wg3.log" | tail -1)"
    s=$SECONDS
    timeout -k 5 $(( $(left) - 170 )) python3 -m autotune remeasure --family tc_wgmma "${WAVES[@]}" --layout NHWC "${DTYPES[@]}" --top 5 --no-baseline > "$OUT/remeasure.log" 2>&1
    say "remeasure: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/remeasure.log")"
    s=$SECONDS
    timeout -k 5 $(( $(left) - 130 )) python3 -m autotune baseline "${WAVES[@]}" --layout NHWC "${DTYPES[@]}" --remeasure > "$OUT/baseline.log" 2>&1
    say "baseline: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/baseline.log")"
    python3 "$HERE/wg3_pairs.py" "$AUTOTUNE_DB" > "$OUT/wg3_pairs.md" 2>&1
    tail -3 "$OUT/wg3_pairs.md" >> "$OUT/summary.txt"
    s=$SECONDS
    timeout -k 5 $(( $(left) - 15 )) python3 -m pytest -q -m gpu -p no:cacheprovider -k three tests/gpu/test_gpu_tc_wgmma.py > "$OUT/test_three.log" 2>&1
    say "test three: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/test_three.log")"
    clocks
    save_db; pack ;;
2)  # The GPU tests that build tc_wgmma, with this kernel (WG = 3's code path is new; the
    # others' SASS is unchanged, their text's digest not).
    install || exit 1
    CAP=300 gpu_tests test_gpu_tc_wgmma test_gpu_epilogue test_runtime_precision ;;
3)  # Call 1: WG = 3 faster on all 18 (6 layers x 3 dtypes), WG 3 / WG 1-2 0.910-0.922 by dtype
    # (0.812 to 0.974), VGG-16's 14x14 C = 512 by 16-19%; no stream-K and no 96-wide tile won.
    # The WG = 3 subspace without those (192 x 64 or 192 x 128, 4-6 stages, no clusters) on every
    # other layer with C > 3 but the 7x7 ones (1,568 pixels: 9 tiles of 192, against 13 of 128)
    # in three dtypes, in call 1's store (.dbcarry).
    # Predicted: faster than the best of WG = 1-2 on the layers whose 128-pixel grids leave a
    # wave part full (OverFeat's 12x12 C = 256, ResNet-50's 28x28 3x3 and 1x1 C = 512 F = 128:
    # 131 tiles of 192 x 128), within 3% either way on the large ones.
    install || exit 1
    restore_db
    clocks
    REST=$(python3 - <<'PY'
from autotune.model.shapes import named_shapes
done = {"N=14,K=1,C=1024,F=512,B=32", "N=14,K=1,C=1024,F=256,B=32", "N=14,K=3,C=256,F=256,B=32",
        "N=14,K=3,C=512,F=512,B=32", "N=28,K=3,C=128,F=128,B=32,stride=2",
        "N=14,K=3,C=256,F=256,B=32,stride=2"}
seen = []
for s in ("alexnet", "overfeat", "vgg16", "resnet50"):
    for p in named_shapes(s):
        key = f"N={p.N},K={p.K},C={p.C},F={p.F},B={p.B}" + (f",stride={p.stride}" if p.stride != 1 else "")
        if p.C > 3 and p.N != 7 and key not in done and key not in seen:
            seen.append(key)
print(" ".join(f"--shape {k}" for k in seen))
PY
)
    s=$SECONDS; t=$(( $(left) - 20 ))
    timeout -k 5 "$t" python3 -m autotune run --family tc_wgmma $REST --layout NHWC "${DTYPES[@]}" --subspace "$HERE/wg3_rest.toml" --exhaustive --no-baseline --time-limit $(( t - 15 )) > "$OUT/sweep_wg3_rest.log" 2>&1
    say "sweep wg3_rest: rc=$? $((SECONDS - s)) s: $(grep -E "new evaluations" "$OUT/sweep_wg3_rest.log" | tail -1)"
    python3 "$HERE/wg3_pairs.py" "$AUTOTUNE_DB" > "$OUT/wg3_pairs_sweep.md" 2>&1
    tail -3 "$OUT/wg3_pairs_sweep.md" >> "$OUT/summary.txt"
    clocks
    save_db; pack ;;
4)  # Call 3 searched WG = 3 on 27 more layers (1,726 evaluations). The tables with this kernel,
    # in call 3's store (.dbcarry, or the warm machine's own): each study's 5 fastest, of any
    # code, measured again with this one, and cuDNN again, all in this call; results/tc_targets.py
    # and wg3_pairs.py on the store.
    # Predicted: with WG = 3, tf32 26-28 of 38 layers with C > 3 at least 1.0x cuDNN, bf16 and
    # fp16 33-35; geometric means up 1.5-3% on session 61's (1.088x, 1.152x, 1.093x).
    install || exit 1
    restore_db
    clocks
    SETS=(--shapes alexnet --shapes overfeat --shapes vgg16 --shapes resnet50)
    s=$SECONDS; t=$(( $(left) - 150 ))
    timeout -k 5 $t python3 -m autotune remeasure --family tc_wgmma "${SETS[@]}" --layout NHWC "${DTYPES[@]}" --top 5 --no-baseline --time-limit $(( t - 10 )) > "$OUT/remeasure.log" 2>&1
    say "remeasure: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/remeasure.log")"
    s=$SECONDS
    timeout -k 5 $(( $(left) - 20 )) python3 -m autotune baseline "${SETS[@]}" --layout NHWC "${DTYPES[@]}" --remeasure > "$OUT/baseline.log" 2>&1
    say "baseline: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/baseline.log")"
    python3 results/tc_targets.py "$AUTOTUNE_DB" "NVIDIA H200" > "$OUT/tc_targets_4.md" 2>&1
    grep -E "distinct layers stored" "$OUT/tc_targets_4.md" >> "$OUT/summary.txt"
    python3 "$HERE/wg3_pairs.py" "$AUTOTUNE_DB" > "$OUT/wg3_pairs.md" 2>&1
    tail -3 "$OUT/wg3_pairs.md" >> "$OUT/summary.txt"
    clocks
    save_db; pack ;;
5)  # Call 4's tables: tf32 22 of 38 layers with C > 3 at least 1.0x cuDNN, 1.095x; bf16 35,
    # 1.181x, best layer 91.2% of its peak; fp16 31, 1.131x, 90.0%. Session 61's call 6 (tf32's
    # 15 weakest layers searched exhaustively in the PINGPONG and tables' subspaces: 4 of them
    # past cuDNN) was not in that store: merged in (.dbcarry), tf32's 5 fastest of each study
    # measured again with this kernel, cuDNN's tf32 again, in this call.
    # Predicted: tf32 25-27 of 38 at least 1.0x, geometric mean 1.10-1.11x.
    install || exit 1
    export AUTOTUNE_DB=/tmp/home/call5.db  # not the warm machine's call 4 store
    restore_db
    clocks
    SETS=(--shapes alexnet --shapes overfeat --shapes vgg16 --shapes resnet50)
    s=$SECONDS; t=$(( $(left) - 80 ))
    timeout -k 5 $t python3 -m autotune remeasure --family tc_wgmma "${SETS[@]}" --layout NHWC --dtype tf32 --top 5 --no-baseline --time-limit $(( t - 10 )) > "$OUT/remeasure.log" 2>&1
    say "remeasure: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/remeasure.log")"
    s=$SECONDS
    timeout -k 5 $(( $(left) - 20 )) python3 -m autotune baseline "${SETS[@]}" --layout NHWC --dtype tf32 --remeasure > "$OUT/baseline.log" 2>&1
    say "baseline: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/baseline.log")"
    python3 results/tc_targets.py "$AUTOTUNE_DB" "NVIDIA H200" > "$OUT/tc_targets_5.md" 2>&1
    grep -E "distinct layers stored in tf32" "$OUT/tc_targets_5.md" >> "$OUT/summary.txt"
    clocks
    save_db; pack ;;
6)  # Call 5: tf32 23 of 38 layers with C > 3 at least 1.0x cuDNN, 1.114x. The peak column of
    # calls 4-5 divides by the latest stored peak, measured on another machine (call 4's store:
    # bf16 91.2%, fp16 90.0%; call 5's, with session 61's call 6 merged in, 92.7% and 90.8%).
    # The three tensor-core peaks measured on this machine before and after the largest layers'
    # 5 fastest of each dtype are measured again (OverFeat's 12x12 C = 512 and 1024, VGG-16's
    # 28x28 C = 512 and 56x56 C = 256), in call 5's store; then the C++ export's GPU test.
    # Predicted: the best bf16 and fp16 layers within 1% of calls 4-5's share of the peak, so
    # 89-92%: the 90% target met or missed by a hair.
    install || exit 1
    restore_db
    clocks
    PEAKS=(--ceiling tc_peak_tf32 --ceiling tc_peak_bf16 --ceiling tc_peak_fp16)
    BIG=(--shape N=12,K=3,C=512,F=1024,B=128 --shape N=12,K=3,C=1024,F=1024,B=128
        --shape N=28,K=3,C=512,F=512,B=32 --shape N=56,K=3,C=256,F=256,B=32)
    python3 -m autotune device --remeasure "${PEAKS[@]}" > "$OUT/peaks_before.log" 2>&1
    say "peaks before: rc=$? $(grep -E "tc_peak" "$OUT/peaks_before.log" | tr -s ' ' | tr '\n' ';')"
    s=$SECONDS
    timeout -k 5 $(( $(left) - 150 )) python3 -m autotune remeasure --family tc_wgmma "${BIG[@]}" --layout NHWC "${DTYPES[@]}" --top 5 --no-baseline > "$OUT/remeasure.log" 2>&1
    say "remeasure: rc=$? $((SECONDS - s)) s"
    python3 -m autotune device --remeasure "${PEAKS[@]}" > "$OUT/peaks_after.log" 2>&1
    say "peaks after: rc=$? $(grep -E "tc_peak" "$OUT/peaks_after.log" | tr -s ' ' | tr '\n' ';')"
    python3 results/tc_targets.py "$AUTOTUNE_DB" "NVIDIA H200" > "$OUT/tc_targets_6.md" 2>&1
    grep -E "distinct layers stored" "$OUT/tc_targets_6.md" >> "$OUT/summary.txt"
    CAP=150 gpu_tests test_gpu_export
    clocks
    save_db; pack ;;
7)  # Call 6: the peaks on this machine were bf16 918.2 then 909.4 TFLOP/s, fp16 859.3 then
    # 876.9, tf32 483.5 then 483.3; the best layer against the later: bf16 91.0%, fp16 89.3%,
    # tf32 83.8%. The C++ export's GPU test passed. Now a sixth starting configuration, three
    # consumer warpgroups (192 x 64, 6 stages), in session 58's newcomer A/B: `autotune run`,
    # 12 evaluations a layer, fresh stores, bf16 (PyTorch users' dtype), ResNet-50's layers then
    # VGG-16's, .head (five starting configurations) then the checkout (six).
    # Predicted: after / before about 0.97 on ResNet-50 (its 6 layers of 6,272 pixels about 10%
    # faster, the others unchanged), 0.98 on VGG-16.
    install || exit 1
    clocks
    for net in resnet50 vgg16; do
        for v in before after; do
            s=$SECONDS; t=$(( $(left) - 25 )); [ "$t" -lt 30 ] && { say "$net $v: not run (time)"; continue; }
            [ $v = before ] && pp=/tmp/site:$PWD/.head || pp=/tmp/site:$PWD
            PYTHONPATH=$pp timeout -k 5 $t python3 -m autotune run --family tc_wgmma --shapes $net --dtype bf16 --layout NHWC --budget 12 --no-baseline --time-limit $(( t - 10 )) --storage /tmp/home/${net}_$v.db > "$OUT/seeds_${net}_$v.log" 2>&1
            say "$net $v: rc=$? $((SECONDS - s)) s: $(grep -E "new evaluations" "$OUT/seeds_${net}_$v.log" | tail -1)"
        done
        python3 results/h200/20261201/seed_ab.py /tmp/home/${net}_before.db /tmp/home/${net}_after.db > "$OUT/seeds_$net.md" 2>&1
        tail -1 "$OUT/seeds_$net.md" >> "$OUT/summary.txt"
    done
    clocks
    pack ;;
8)  # The GPU tests whose picks now come from one helper (some_of_each): the same
    # configurations as before, drawn on the CPU; run again on the GPU at e06e000.
    install || exit 1
    timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider -k "stream_k or clusters or three" tests/gpu/test_gpu_tc_wgmma.py ;;
esac
