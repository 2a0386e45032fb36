#!/usr/bin/env bash
# The GPU calls of 2026-11-30's second session (session 50), on the H200, from the checkout
# root: calls 1-4 were queued by session 49 (main at e14b68d: the epilogue's column pairs,
# EpiColumns, and GEMM_1X1), 5-7 were added as their results came in, 8-9 are queued for the
# next session (this one's 1,800 s ran out). Carried: `.whl` (../shared/device/wheels.sh
# --kernel-tuner), `.kt_examples/cuda` (Kernel Tuner's examples/cuda, its public snapshot),
# `.main` (`git archive 52eb83d`, main before EpiColumns and GEMM_1X1) and `.head` (`git
# archive e14b68d`, main before call 6's change), each trimmed of results/, docs/ and the CPU
# tests. Run as: LIMIT=580 OUT=$OUT bash results/h200/20261130b/calls.sh N
set -u
. "$(dirname "$0")/../calls_lib.sh"
case "${1:?1 to 13}" in
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
5)  # Nsight Compute on the 56x56 C = 64 F = 256 conv3's best configuration, fused, in both trees
    # (call 2: 48.4 us before EpiColumns, 49.7 after, where the pairs' geomean moved 0.79x and
    # the prediction was about 40): what EpiColumns moved in the layer's best, and what bounds it.
    install || exit 1
    NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
    S=N=56,K=1,C=64,F=256,B=32,dtype=bf16,layout=NHWC,epilogue=bias_add_relu
    for side in a b; do
        tree=$PWD/.main P=$PWD/results/h200/20261130/residual_best.toml
        [ $side = b ] && tree=$PWD P=$PWD/results/h200/20261130b/columns_best.toml
        (cd "$tree" && PYTHONPATH="/tmp/site:$tree" timeout -k 5 100 $NCU --target-processes all --kernel-name regex:^tc_wgmma\$ --launch-count 1 --set full \
            --import-source yes --export "$OUT/ncu_$side" --force-overwrite python3 -m autotune run --family tc_wgmma --shape "$S" \
            --subspace $P --strategy brute_force --exhaustive --no-baseline --storage /tmp/ncu_$side.db > "$OUT/ncu_$side.log" 2>&1)
        $NCU --import "$OUT/ncu_$side.ncu-rep" --page details > "$OUT/ncu_$side.details.txt" 2>&1
        $NCU --import "$OUT/ncu_$side.ncu-rep" --page source --csv --print-source sass > "$OUT/ncu_$side.sass.csv" 2>&1
        rm -f "$OUT/ncu_$side.ncu-rep"
        say "ncu $side: $(grep -m1 'Duration' "$OUT/ncu_$side.details.txt")"
    done
    (cd "$OUT" && tar -czf ncu.tgz ncu_* && rm -f ncu_*) ;;
6)  # The last stores waited for until they have read the staging tile, not until written
    # (call 5: 8% of the 56x56 conv3's warp samples on that wait at the block's exit), `.head`
    # = main before it (e14b68d): the GPU tests, then the A/B of call 2 against it (predicted:
    # the 56x56 layer's best 49.7 to about 47.5 us, the direct store unchanged); and where one
    # tune_kernel call's seconds go (issue 33: vector_add 2.31 s against Kernel Tuner's 1.58).
    install || exit 1
    CAP=100 gpu_tests test_gpu_epilogue test_gpu_tc_wgmma
    MAIN=$PWD/.head OUT=$OUT/ab SUBSPACE=$PWD/results/h200/20261130b/epilogue_subspace.toml \
        EPILOGUE_SHAPES="N=56,K=1,C=64,F=256 N=28,K=1,C=128,F=512 N=14,K=1,C=256,F=1024 N=7,K=1,C=512,F=2048 N=56,K=1,C=256,F=64,epilogue=bias_relu N=56,K=3,C=64,F=64,padding=1,epilogue=bias_relu" \
        timeout -k 5 $(( $(left) - 40 )) bash results/h200/residual_tma_ab/ab.sh > "$OUT/ab.log" 2>&1; say "exit-wait ab: rc=$?"; cat "$OUT/ab/ab.md" >> "$OUT/summary.txt" 2>/dev/null
    rm -f "$OUT"/ab/*.db; (cd "$OUT" && tar -czf ab.tgz ab ab.log && rm -rf ab ab.log)
    timeout -k 5 $(( $(left) - 3 )) python3 results/h200/20261130b/kt_call_profile.py > "$OUT/kt_call_profile.txt" 2>&1; say "kt call profile: rc=$? $(head -1 "$OUT/kt_call_profile.txt")" ;;
7)  # A timeline of one tune_kernel call (vector_add), since call 6's cProfile blurred the
    # threads: first with a new store and no cubin cache, then a new store, cubins cached.
    install || exit 1
    for n in 1 2; do
        AUTOTUNE_DB=/tmp/home/timeline_$n.db timeout -k 5 60 python3 results/h200/20261130b/kt_call_timeline.py > "$OUT/kt_call_timeline_$n.md" 2>&1
        say "timeline $n: rc=$? $(head -1 "$OUT/kt_call_timeline_$n.md")"
    done ;;
8)  # tune_kernel's compile processes started while the GPU worker boots, importing NVRTC's
    # module alone, and the worker's exit not waited for (issue 33); the runtime and
    # tuned_kernel compiling in a child process (their GPU tests). Predicted from call 7's
    # timelines: vector_add's call 3.84 to about 2.6 s cold, 1.83 to about 1.55 s cached.
    install || exit 1
    CAP=150 gpu_tests test_gpu_tune_kernel test_gpu_tuned_kernel test_runtime test_gpu_epilogue test_gpu_tc_wgmma
    for n in 1 2; do
        AUTOTUNE_DB=/tmp/home/timeline_$n.db timeout -k 5 60 python3 results/h200/20261130b/kt_call_timeline.py > "$OUT/kt_call_timeline_$n.md" 2>&1
        say "timeline $n: rc=$? $(head -1 "$OUT/kt_call_timeline_$n.md")"
    done
    timeout -k 5 $(( $(left) - 5 )) python3 -m autotune bench kt-examples --examples .kt_examples/cuda --kernel-tuner --kt-lang cupy --only vector_add.py --only stencil.py --output "$OUT/kt" > "$OUT/kt.log" 2>&1; say "kt-examples small: rc=$?"; cat "$OUT"/kt/*.md >> "$OUT/summary.txt" 2>/dev/null
    (cd "$OUT" && tar -czf kt.tgz kt kt.log && rm -rf kt kt.log) ;;
9)  # Where the GPU worker's boot goes (call 7: 1.2-1.7 s from spawn to ready, where CuPy's
    # import and a CUDA context took 0.8 s at 20261129f): each step timed, and its imports.
    install || exit 1
    timeout -k 5 60 python3 results/h200/20261130b/worker_boot.py > "$OUT/worker_boot.md" 2>&1; say "worker boot: rc=$?"
    cat "$OUT/worker_boot.md" >> "$OUT/summary.txt" ;;
10) # A second staging tile (STAGING = 2): the next tile's residual issued from this tile's
    # epilogue. `.head2` = git archive 108a393 (main before it): tree A, whose configurations
    # pair with B's STAGING = 1 (the control) and B's STAGING = 1 with STAGING = 2. Predicted:
    # the 56x56 C = 64 F = 256 conv3's best from 48.0 to about 43 us (a fifth of its warps'
    # samples waited on the residual, call 5), the other layers within 3%, the control within 1%.
    install || exit 1
    LATER=STAGING LATER_DEFAULT=1 MAIN=$PWD/.head2 OUT=$OUT/ab SUBSPACE=$PWD/results/h200/queued/staging_subspace.toml \
        EPILOGUE_SHAPES="N=56,K=1,C=64,F=256 N=28,K=1,C=128,F=512 N=14,K=1,C=256,F=1024 N=7,K=1,C=512,F=2048 N=56,K=1,C=256,F=64,epilogue=bias_relu N=56,K=3,C=64,F=64,padding=1,epilogue=bias_relu" \
        timeout -k 5 $(( $(left) - 5 )) bash results/h200/residual_tma_ab/ab.sh > "$OUT/ab.log" 2>&1; say "staging ab: rc=$?"; cat "$OUT/ab/ab.md" >> "$OUT/summary.txt" 2>/dev/null
    rm -f "$OUT"/ab/*.db; (cd "$OUT" && tar -czf ab.tgz ab ab.log && rm -rf ab ab.log) ;;
11|12|13)  # Kernel Tuner's whole in-scope CUDA suite beside Kernel Tuner 1.5.0, at this tree (issue
    # 33's table: the last full one, results/kernel_tuner_examples/gpu.md, is of 2026-11-29 at
    # a 30 s limit), in three calls of about 580 s; same budget and strategy for both tools.
    install || exit 1
    case $1 in
    11) only="accuracy.py convolution.py convolution_correct.py reduction.py" ;;
    12) only="expdist.py matmul.py sepconv.py spmv.py zeromeanfilter.py vector_add_observers.py" ;;
    13) only="stencil.py vector_add.py vector_add_codegen.py vector_add_cupy.py vector_add_custom_strategy.py vector_add_jinja.py vector_add_jinja2.py vector_add_metric.py vector_add_nvcuda.py" ;;
    esac
    args=(); for e in $only; do args+=(--only "$e"); done
    timeout -k 5 $(( $(left) - 5 )) python3 -m autotune bench kt-examples --examples .kt_examples/cuda --kernel-tuner --kt-lang cupy --max-fevals 20 --timeout 150 "${args[@]}" --output "$OUT/kt$1" > "$OUT/kt$1.log" 2>&1; say "kt-examples part $1: rc=$?"; cat "$OUT/kt$1"/*.md >> "$OUT/summary.txt" 2>/dev/null
    (cd "$OUT" && tar -czf kt$1.tgz kt$1 kt$1.log && rm -rf kt$1 kt$1.log) ;;
esac
say "call $1 done in $((SECONDS - T0)) s"
