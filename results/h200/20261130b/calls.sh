#!/usr/bin/env bash
# The GPU calls queued for the next session with device time (this one had 175 s of it), on the
# H200, from the checkout root (main with the epilogue's column pairs, EpiColumns, and
# GEMM_1X1), `.whl` carried (../shared/device/wheels.sh --kernel-tuner), `.kt_examples/cuda` =
# Kernel Tuner's examples/cuda (its public snapshot), `.main` = `git archive` of main before
# both (52eb83d) trimmed of results/, docs/ and the CPU tests (the A/B's tree A);
# `.dbcarry/autotune.db.gz` = the store an earlier call saved, where the machine was given back
# between calls. Run as: LIMIT=580 OUT=$OUT bash results/h200/queued/calls.sh N
set -u
. "$(dirname "$0")/../calls_lib.sh"
case "${1:?1 to 4}" in
1)  # The GPU tests of what landed unverified: the epilogue's scale and bias loaded once a
    # column pair (EpiColumns), a 1x1 input at stride 1 read as a matrix (GEMM_1X1) at odd
    # shapes in every dtype, and the command line's interrupts (it compiles in child processes).
    install || exit 1
    CAP=200 gpu_tests test_gpu_epilogue test_gpu_tc_wgmma test_gpu_interrupt ;;
2)  # The A/B on ResNet-50's four conv3 shapes (bias_add_relu) and two of its bias_relu layers,
    # main before both changes (`.main`, 52eb83d) against this tree. Predicted: the 56x56
    # C = 64 F = 256 conv3's best from 48.6 to about 40 us (a quarter of its fused instructions
    # were the scale and bias loads and conversions, reloaded 4 times a pair); the direct store,
    # the control, within 3% a pair; GEMM_1X1 within 5% of im2col addressing either way (the
    # same bytes land in the same swizzle; the tiled map saves the im2col box's arithmetic).
    install || exit 1
    MAIN=$PWD/.main OUT=$OUT/ab SUBSPACE=$PWD/results/h200/queued/epilogue_subspace.toml \
        EPILOGUE_SHAPES="N=56,K=1,C=64,F=256 N=28,K=1,C=128,F=512 N=14,K=1,C=256,F=1024 N=7,K=1,C=512,F=2048 N=56,K=1,C=256,F=64,epilogue=bias_relu N=56,K=3,C=64,F=64,padding=1,epilogue=bias_relu" \
        timeout -k 5 $(( $(left) - 5 )) bash results/h200/residual_tma_ab/ab.sh > "$OUT/ab.log" 2>&1; say "epilogue ab: rc=$?"; cat "$OUT/ab/ab.md" >> "$OUT/summary.txt" 2>/dev/null
    rm -f "$OUT"/ab/*.db; (cd "$OUT" && tar -czf ab.tgz ab *.log && rm -rf ab *.log) ;;
3)  # ResNet-50 in bf16 tuned at this digest and benched (issues 35 and 36), then the per-call
    # host cost beside PyTorch's on its shapes (issue 35: at most PyTorch's).
    install || exit 1
    tune resnet50 bf16
    bench_model resnet50 32 bf16 --layers --cuda-graphs
    s=$SECONDS; timeout -k 5 $(( $(left) - 15 )) python3 -m autotune bench dispatch --shape-set resnet50 --dtype bf16 --layout NHWC --output "$OUT/dispatch" > "$OUT/dispatch.log" 2>&1
    say "bench dispatch resnet50 bf16 NHWC: rc=$? $((SECONDS - s)) s"; cat "$OUT/dispatch/dispatch.md" >> "$OUT/summary.txt" 2>/dev/null
    save_db; pack ;;
4)  # VGG-16 in bf16 at this digest, and Kernel Tuner's vector_add and stencil beside Kernel
    # Tuner 1.5.0 (issue 33: wall time at most Kernel Tuner's).
    install || exit 1; restore_db
    tune vgg16 bf16
    bench_model vgg16 32 bf16 --layers --cuda-graphs
    save_db
    timeout -k 5 $(( $(left) - 5 )) python3 -m autotune bench kt-examples --examples .kt_examples/cuda --kernel-tuner --kt-lang cupy --only vector_add.py --only stencil.py --output "$OUT/kt" > "$OUT/kt.log" 2>&1; say "kt-examples small: rc=$?"; cat "$OUT"/kt/*.md >> "$OUT/summary.txt" 2>/dev/null
    (cd "$OUT" && tar -czf kt.tgz kt kt.log && rm -rf kt kt.log); pack ;;
esac
say "call $1 done in $((SECONDS - T0)) s"
