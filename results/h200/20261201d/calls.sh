#!/usr/bin/env bash
# The GPU calls of 2026-12-01's fourth session (session 61), on H200s (a fresh machine for
# calls 1, 2, 3 and 6; calls 4 and 5 on one), from the checkout root with `.whl`
# (../shared/device/wheels.sh --kernel-tuner) and the trees each call names carried:
# - `.head_c9696cb`: `git archive c9696cb kernels`, the kernel before this session;
# - `.head_<variant>` (calls 2 and 3): a copy of that tree with the kernel's text as the call's
#   comment says (`.head_same`: unchanged; the others: the edits each names);
# - `.head` (call 4): `git archive` of autotune, kernels and search_spaces with this session's
#   kernel, before the starting configuration that takes tiles in turn;
# - `.dbcarry/autotune.db.gz` (call 4): a store to start from, as call 4 says.
# Run as:
#   LIMIT=575 OUT=$OUT bash results/h200/20261201d/calls.sh N
# As they ran: LIMIT=575 for calls 1, 2 and 4, 400 for call 3, 500 for call 5, 520 for call 6.
set -u
. "$(dirname "$0")/../calls_lib.sh"
HERE=results/h200/20261201d
SETS=(--shapes alexnet --shapes overfeat --shapes vgg16 --shapes resnet50)
clocks() { nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader >> "$OUT/summary.txt"; }
case "${1:?1}" in
1)  # The wgmma descriptors added to, not rebuilt: a consumer warp's step from 92-130
    # instructions to 45-54 in the SASS of tf32 28x28 C = 512's bests (session 60's profile:
    # ours issued 1.6x cuDNN's instructions and ran at 1.60-1.62 GHz against its 1.66). The GPU
    # tests of tc_wgmma first (also the first run of the space's 7 and 8 stages there), then
    # each layer's best of sessions 59-60 in three dtypes built from both texts of the kernel,
    # outputs compared bit for bit, timed in turn (desc_ab.py).
    # Predicted: outputs identical; now / before 0.97-1.0, geometric mean about 0.985, most
    # where the step is short (tf32's 4 wgmmas a step, PINGPONG's 8 with 2 x 64 rows).
    # (It ran desc_ab.py's first form, `--before PATH` for the one other text: the same
    # measurement, its table's columns before ms, now ms, now / before.)
    install || exit 1
    clocks
    CAP=200 gpu_tests test_gpu_tc_wgmma
    s=$SECONDS
    timeout -k 5 $(( $(left) - 10 )) python3 "$HERE/desc_ab.py" --text before=.head_c9696cb/kernels/tc_wgmma.cu --bests "$HERE/bests.jsonl" > "$OUT/desc_ab.md" 2> "$OUT/desc_ab.log"
    say "desc_ab: rc=$? $((SECONDS - s)) s, $(grep -c "^| N=" "$OUT/desc_ab.md") layers, $(grep -c DIFFER "$OUT/desc_ab.md") differing; $(tail -2 "$OUT/desc_ab.log" | tr '\n' ' ')"
    grep -E "^(tf32|bf16|fp16):" "$OUT/desc_ab.md" >> "$OUT/summary.txt"
    clocks
    pack ;;
2)  # Call 1: outputs identical on all 126 layers, but the new text was slower: now / before
    # 1.016-1.019 (geometric means by dtype), faster on 18 of 126, up to 1.16x on tf32's
    # 224x224 C = 3 and 1.10-1.13x on the 7x7 3x3 layers (128 x 64 tiles, short steps). In its
    # SASS the descriptors' chain now sits after the full barrier's wait (the old text made
    # them in vector registers while the wait was pending), and each step divides by STAGES in
    # the uniform datapath between the wgmmas' wait and the slot's release. Texts, each the
    # kernel of c9696cb with some of:
    # - offsets: the descriptors added to, cwg per thread (vector registers);
    # - uniform: cwg broadcast alone (the descriptors rebuilt, in uniform registers);
    # - offsets_uniform: both (call 1's "now");
    # - incremental: slot and phase carried from step to step, no division, alone;
    # - pinned: offsets_uniform with the slot's descriptor made before the wait (an empty asm
    #   ties it there);
    # - all: offsets_uniform, incremental and pinned;
    # - now (the checkout): offsets_uniform and incremental.
    # Predicted: incremental and now at or below before (0.98-1.0); offsets_uniform as call 1
    # (1.016-1.019), uniform slower than before. Then the GPU tests on the checkout.
    install || exit 1
    clocks
    s=$SECONDS
    timeout -k 5 $(( $(left) - 170 )) python3 "$HERE/desc_ab.py" --text before=.head_c9696cb/kernels/tc_wgmma.cu \
        $(for v in offsets uniform offsets_uniform incremental pinned all; do echo --text $v=.head_$v/kernels/tc_wgmma.cu; done) \
        --bests "$HERE/bests.jsonl" > "$OUT/desc_ab.md" 2> "$OUT/desc_ab.log"
    say "desc_ab: rc=$? $((SECONDS - s)) s, $(grep -c "^| N=" "$OUT/desc_ab.md") layers, $(grep -c DIFFER "$OUT/desc_ab.md") differing; $(tail -2 "$OUT/desc_ab.log" | tr '\n' ' ')"
    grep -E "^(tf32|bf16|fp16) " "$OUT/desc_ab.md" >> "$OUT/summary.txt"
    clocks
    CAP=200 gpu_tests test_gpu_tc_wgmma
    pack ;;
3)  # Call 2 contradicts call 1: offsets_uniform (call 1's "now") was 0.980-0.986 of before
    # (geometric means by dtype) where call 1 had 1.016-1.019; incremental alone 0.998-1.002;
    # now 0.983-0.988. The layers that moved most swapped sides: bf16 7x7 C = 512 (128 x 64
    # tiles) before 0.0194 ms and now 0.0217 in call 1, before 0.0228 and now 0.0204 in call 2
    # (identical outputs, GPU tests passed in both). So a text's time there depends on more than
    # its text. The control: the same text twice (.head_same: a copy of .head_c9696cb), and the
    # texts in two orders, each order in a process of its own.
    # Predicted: same / before within 0.5% on every dtype's mean in both orders; if instead the
    # position of a text in the order moves it by 1-2%, call 1's and 2's sign is that.
    install || exit 1
    clocks
    ab() {  # NAME TEXT...: desc_ab.py over the texts, in this order, into desc_ab_NAME.md
        local name=$1 s=$SECONDS; shift
        local a=(); for v in "$@"; do a+=(--text "$v=.head_$v/kernels/tc_wgmma.cu"); done
        timeout -k 5 $(( $(left) - 10 )) python3 "$HERE/desc_ab.py" "${a[@]}" --bests "$HERE/bests.jsonl" > "$OUT/desc_ab_$name.md" 2> "$OUT/desc_ab_$name.log"
        say "desc_ab $name ($*, then now): rc=$? $((SECONDS - s)) s, $(grep -c DIFFER "$OUT/desc_ab_$name.md") differing"
        grep -E "^(tf32|bf16|fp16) " "$OUT/desc_ab_$name.md" >> "$OUT/summary.txt"
    }
    ab forward c9696cb same offsets_uniform
    ab reverse offsets_uniform same c9696cb
    ab forward2 c9696cb same offsets_uniform
    clocks
    pack ;;
4)  # Call 3, one machine, three processes: the same text twice within 0.5% (same / c9696cb
    # 0.998-1.000 by dtype, 0.9967 bf16 once); offsets_uniform / c9696cb 0.980-0.987 in both
    # orders (reversed: c9696cb / offsets_uniform 1.011-1.016); now (incremental added) /
    # offsets_uniform 0.9995-1.0064: no gain, so the checkout is offsets_uniform again (call
    # 1's text, whose GPU tests passed there). With it:
    # - the starting configuration that takes tiles in turn (64 x 128, 8 stages, PINGPONG, no
    #   staging tile), session 58's newcomer A/B: `autotune run` with 12 evaluations a layer from
    #   a fresh store, tf32, ResNet-50's and VGG-16's layers, .head (the same kernel, five
    #   starting configurations) then the checkout (six);
    # - the tables with this kernel: each study's 5 fastest of sessions 59-60 measured again
    #   (.dbcarry: their merged store, pruned to each study's 10 fastest evaluations of each
    #   code), cuDNN measured again in the same call, results/tc_targets.py.
    # Predicted: the sixth configuration 1-3% faster (geometric mean) on tf32's 3x3 layers,
    # no slower elsewhere; the tables about 1.5% better than session 60's (this kernel's gain).
    install || exit 1
    restore_db
    clocks
    for net in resnet50 vgg16; do
        for v in before after; do
            s=$SECONDS; t=$(( $(left) - 25 )); [ "$t" -lt 30 ] && { say "$net $v: not run (time)"; continue; }
            [ $v = before ] && pp=/tmp/site:$PWD/.head || pp=/tmp/site:$PWD
            PYTHONPATH=$pp timeout -k 5 $t python3 -m autotune run --family tc_wgmma --shapes $net --dtype tf32 --layout NHWC --budget 12 --no-baseline --time-limit $(( t - 10 )) --storage /tmp/home/${net}_$v.db > "$OUT/seeds_${net}_$v.log" 2>&1
            say "$net $v: rc=$? $((SECONDS - s)) s: $(grep -E "new evaluations" "$OUT/seeds_${net}_$v.log" | tail -1)"
        done
        python3 results/h200/20261201/seed_ab.py /tmp/home/${net}_before.db /tmp/home/${net}_after.db > "$OUT/seeds_$net.md" 2>&1
        tail -1 "$OUT/seeds_$net.md" >> "$OUT/summary.txt"
    done
    s=$SECONDS; t=$(( $(left) - 150 ))
    timeout -k 5 $t python3 -m autotune remeasure --family tc_wgmma "${SETS[@]}" --layout NHWC --dtype tf32 --dtype bf16 --dtype fp16 --top 5 --no-baseline --time-limit $(( t - 10 )) > "$OUT/remeasure.log" 2>&1
    say "remeasure: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/remeasure.log")"
    s=$SECONDS
    timeout -k 5 $(( $(left) - 20 )) python3 -m autotune baseline "${SETS[@]}" --layout NHWC --dtype tf32 --dtype bf16 --dtype fp16 --remeasure > "$OUT/baseline.log" 2>&1
    say "baseline: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/baseline.log")"
    python3 results/tc_targets.py "$AUTOTUNE_DB" "NVIDIA H200" > "$OUT/tc_targets_4.md" 2>&1
    grep -E "distinct layers stored" "$OUT/tc_targets_4.md" >> "$OUT/summary.txt"
    clocks
    save_db; pack ;;
5)  # Call 4: the tables with this kernel (cuDNN of the same call): tf32 22 of 38 layers with
    # C > 3 at least 1.0x cuDNN, geometric mean 1.088x; bf16 32 of 38, 1.152x; fp16 29 of 38,
    # 1.093x. The sixth starting configuration changed nothing (after / before 0.997 on
    # ResNet-50's layers, 1.004 on VGG-16's), so it is not kept. The other GPU tests that build
    # tc_wgmma (fused epilogues, the runtime's precisions, the C++ export), then session 60's
    # call 3 again (Nsight Compute on tf32 28x28 C = 512: cuDNN, then ours) with this kernel.
    # Predicted: ours issue fewer instructions a scheduler a cycle than call 3's 0.35 and 0.27
    # (about 0.25 and 0.2), in 1-2% fewer cycles.
    install || exit 1
    clocks
    CAP=130 gpu_tests test_gpu_epilogue test_runtime_precision test_gpu_export
    mkdir -p "$OUT/ncu"
    LIMIT=$(( $(left) - 5 )) OUT="$OUT/ncu" bash results/h200/20261201c/calls.sh 3
    cat "$OUT/ncu/summary.txt" >> "$OUT/summary.txt"
    pack ;;
6)  # Call 5: the GPU tests passed; Nsight Compute on tf32 28x28 C = 512: ours now issue 0.19
    # (rows_s5) and 0.14 (PINGPONG) a scheduler a cycle, cuDNN 0.22; cycles 481,353 and 472,023
    # against cuDNN's 468,294 (0.5% and 0.7% fewer than session 60's). PINGPONG at 7 stages lost
    # its 5% to 4 stages (475,602 cycles, was 499,144): the division by 7 a step in vector
    # registers was that. The clock is still lower under ours (1.58-1.62 GHz, cuDNN 1.63),
    # though ours now issue fewer instructions: not the instructions. Call 4's remeasured
    # tables ranked 7-8 stages by the old code, so tf32's 15 layers still below 1.0x there:
    # both subspaces searched exhaustively in one store of this call, cuDNN measured in it.
    # Predicted: 2-4 of the 15 reach 1.0x, with PINGPONG at 7-8 stages.
    install || exit 1
    export AUTOTUNE_DB=/tmp/home/call6.db  # this call's own store (a warm machine keeps call 4's)
    clocks
    WEAK=$(table_layers "$HERE/call4/tc_targets_4.md" tf32 weak)
    for sub in ../20261201c/pp_tables.toml ../20261201b/tables.toml; do
        s=$SECONDS; t=$(( $(left) - 60 )); [ "$t" -lt 40 ] && { say "sweep $sub: not run (time)"; continue; }
        timeout -k 5 "$t" python3 -m autotune run --family tc_wgmma $WEAK --layout NHWC --dtype tf32 --subspace "$HERE/$sub" --exhaustive --no-baseline --time-limit $(( t - 15 )) > "$OUT/sweep_$(basename $sub .toml).log" 2>&1
        say "sweep $sub: rc=$? $((SECONDS - s)) s: $(grep -E "new evaluations" "$OUT/sweep_$(basename $sub .toml).log" | tail -1)"
    done
    s=$SECONDS
    timeout -k 5 $(( $(left) - 10 )) python3 -m autotune baseline $WEAK --layout NHWC --dtype tf32 > "$OUT/baseline.log" 2>&1
    say "baseline: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/baseline.log")"
    python3 results/tc_targets.py "$AUTOTUNE_DB" "NVIDIA H200" > "$OUT/tc_targets_6.md" 2>&1
    python3 results/h200/20261201c/wg_pairs.py "$AUTOTUNE_DB" --dtype tf32 --by PINGPONG,STAGES --ref PINGPONG=0 > "$OUT/pp_pairs.md" 2>&1
    grep -E "distinct layers stored in tf32" "$OUT/tc_targets_6.md" >> "$OUT/summary.txt"
    grep -E "^- " "$OUT/pp_pairs.md" >> "$OUT/summary.txt"
    clocks
    save_db; pack ;;
esac
