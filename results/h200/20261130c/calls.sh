#!/usr/bin/env bash
# The GPU calls of 2026-11-30's third session (session 51), on the H200, from the checkout root.
# Session 50's queued calls ran first as ../20261130b/calls.sh 8, 9 and 10 (see README.md);
# these check what this session changed; 5-7 are queued for the next session (../queued/). Carried: `.whl` (../shared/device/wheels.sh
# --kernel-tuner) and `.kt_examples/cuda` (Kernel Tuner's examples/cuda, its public snapshot).
# Run as: LIMIT=580 OUT=$OUT bash results/h200/20261130c/calls.sh N
# (Calls 1-4 ran with kt_suite's lines written out in each; call 4 also packed its test logs
# into kt4.tgz.)
set -u
. "$(dirname "$0")/../calls_lib.sh"
case "${1:?1 to 7}" in
1)  # tune_kernel's kernels in the caller's process (InProcessEvaluator, its new default; the
    # worker with isolate=True): the GPU tests (a kernel that loses the caller's context is a
    # crash and the rest run in a worker), the call's timeline both ways, then Kernel Tuner's
    # small examples beside Kernel Tuner 1.5.0, each tool's compile cache lasting the suite.
    # Predicted from session 50's timelines (worker ready at 1.18 s cached, CuPy and a context
    # 0.8 s): vector_add's call about 1.55 s isolated and about 1.0-1.2 s in this process.
    install || exit 1
    CAP=200 gpu_tests test_gpu_tune_kernel
    for how in here here isolate; do
        n=$((${n:-0} + 1))
        AUTOTUNE_DB=/tmp/home/timeline_$n.db timeout -k 5 60 python3 results/h200/20261130c/kt_call_timeline.py $how > "$OUT/kt_call_timeline_${n}_$how.md" 2>&1
        say "timeline $n $how: rc=$? $(head -1 "$OUT/kt_call_timeline_${n}_$how.md")"
    done
    kt_suite kt stencil.py vector_add.py vector_add_codegen.py vector_add_cupy.py vector_add_custom_strategy.py vector_add_jinja.py vector_add_jinja2.py vector_add_metric.py vector_add_nvcuda.py spmv.py ;;
2|3)  # The rest of Kernel Tuner's in-scope suite, in two parts.
    install || exit 1
    case $1 in
    2) only="accuracy.py convolution.py convolution_correct.py reduction.py" ;;
    3) only="expdist.py matmul.py sepconv.py zeromeanfilter.py vector_add_observers.py" ;;
    esac
    kt_suite "kt$1" $only ;;
4)  # The arguments handed over in memory to a session in the caller's process (no .npy
    # files) and pandas left out of a call: the GPU tests, the call's timeline both ways (new
    # stores), then the examples whose wall missed Kernel Tuner's in calls 1-3 (reduction.py:
    # 23.9 s against 19.8, 3.2 GB of arguments to each of 12 calls; vector_add_observers.py 18.3
    # against 17.7; vector_add_custom_strategy.py 0.94 against 0.79) and accuracy.py (800 MB
    # outputs to output observers, now in memory). Predicted: reduction's wall under 19 s (13 s
    # outside the tuner, most of it writing and mapping the files); the vector_add call
    # 0.83-1.0 s to about 0.7 s.
    install || exit 1
    CAP=150 gpu_tests test_gpu_tune_kernel test_gpu_observers
    for how in here isolate here; do
        n=$((${n:-0} + 1))
        AUTOTUNE_DB=/tmp/home/call4_tl_$n.db timeout -k 5 60 python3 results/h200/20261130c/kt_call_timeline.py $how > "$OUT/tl4_${n}_$how.md" 2>&1
        say "timeline $n $how: rc=$? $(head -1 "$OUT/tl4_${n}_$how.md")"
    done
    (cd "$OUT" && tar -czf tl4.tgz tl4_*.md && rm tl4_*.md)
    kt_suite kt4 reduction.py vector_add_custom_strategy.py vector_add_observers.py accuracy.py ;;
5)  # Queued. The worker that takes over after a kernel poisons the caller's context, given the
    # arguments as files (479bcc7: in call 4 it had none, LAUNCH_ERROR); accuracy.py's wall
    # both ways, to split the in-memory return of its 800 MB outputs (call 4: 58.7 s, where
    # call 2 took 45.3 at 5289c88) from the rest: in the caller's process, then isolated, each
    # with cProfile. Predicted: the GPU tests pass; accuracy.py at most Kernel Tuner's 56.5 s.
    install || exit 1
    CAP=150 gpu_tests test_gpu_tune_kernel
    for how in here isolate; do
        (cd .kt_examples/cuda && AUTOTUNE_DB=/tmp/home/accuracy_$how.db timeout -k 5 200 python3 -m cProfile -o "$OUT/accuracy_$how.prof" "$OLDPWD/results/h200/20261130c/accuracy_timed.py" $how > "$OUT/accuracy_$how.txt" 2>&1)
        say "accuracy $how: rc=$? $(tail -1 "$OUT/accuracy_$how.txt")"
    done
    python3 -c "import pstats, sys; [pstats.Stats(f).sort_stats('cumulative').print_stats(25) for f in sys.argv[1:]]" "$OUT"/accuracy_*.prof > "$OUT/accuracy_profiles.txt" 2>&1; rm -f "$OUT"/accuracy_*.prof ;;
6|7)  # Queued. Kernel Tuner's suite again, the configurations pinned (241b98c: both tools
    # brute-force the same 20 of each call's space), in two calls. Predicted: every best time
    # at most 1.05x Kernel Tuner's (the configurations both timed came out 0.68-1.00x).
    install || exit 1
    case $1 in
    6) only="accuracy.py convolution.py convolution_correct.py reduction.py" ;;
    7) only="expdist.py matmul.py sepconv.py spmv.py zeromeanfilter.py vector_add_observers.py stencil.py vector_add.py vector_add_codegen.py vector_add_cupy.py vector_add_custom_strategy.py vector_add_jinja.py vector_add_jinja2.py vector_add_metric.py vector_add_nvcuda.py" ;;
    esac
    kt_suite "kt$1" $only ;;
esac
say "call $1 done in $((SECONDS - T0)) s"
