#!/usr/bin/env bash
# The GPU calls of 2026-11-30's fourth session (session 52), on the H200, from the checkout root:
# session 51's queued calls (../20261130c/calls.sh 5, 6, 7), call 1 with a measurement of the
# output's return first. Carried: `.whl` (../shared/device/wheels.sh --kernel-tuner) and
# `.kt_examples/cuda` (Kernel Tuner's examples/cuda, its public snapshot).
# Run as: LIMIT=580 OUT=$OUT bash results/h200/20261130d/calls.sh N
set -u
. "$(dirname "$0")/../calls_lib.sh"
case "${1:?1 to 6}" in
1)  # An 800 MB output's return to the host, each way (host_copy.py), then ../20261130c's call 5.
    # Predicted: get() into a new array costs page faults the reused and pinned buffers do not,
    # a few tenths of a second; not the 0.9 s a configuration accuracy.py lost.
    install || exit 1
    timeout -k 5 120 python3 results/h200/20261130d/host_copy.py > "$OUT/host_copy.txt" 2>&1
    say "host_copy: rc=$?"; cat "$OUT/host_copy.txt" >> "$OUT/summary.txt"
    LIMIT=$(left) bash results/h200/20261130c/calls.sh 5 ;;
2)  LIMIT=$(left) bash results/h200/20261130c/calls.sh 6 ;;
3)  LIMIT=$(left) bash results/h200/20261130c/calls.sh 7 ;;
4)  # reduction.py, which call 2 (../20261130c's 6) did not reach: Kernel Tuner's
    # convolution.py and convolution_correct.py ran into the 150 s limit before it. Then
    # accuracy.py's calls step by step (example_timeline.py), in this process: call 1's cProfile
    # could not split them (Python 3.12's profiler puts every thread's calls on one stack).
    # Predicted from host_copy.py: the observers 1.2-1.7 s a configuration, the output's return
    # about 0.3 s, the rest of an evaluation under 0.1 s.
    install || exit 1
    kt_suite kt_reduction reduction.py
    (cd .kt_examples/cuda && AUTOTUNE_DB=/tmp/home/accuracy_tl.db timeout -k 5 $(( $(left) - 10 )) python3 "$OLDPWD/results/h200/20261130d/example_timeline.py" accuracy.py > "$OUT/accuracy_timeline.md" 2>&1)
    say "accuracy timeline: rc=$?"; cat "$OUT/accuracy_timeline.md" >> "$OUT/summary.txt" ;;
5)  # convolution_correct.py with 300 s a run, in which Kernel Tuner finished (call 2: past 150 s).
    install || exit 1
    timeout -k 5 360 python3 -m autotune bench kt-examples --examples .kt_examples/cuda --kernel-tuner --kt-lang cupy --max-fevals 20 --timeout 300 --only convolution_correct.py --output "$OUT/kt_cc" > "$OUT/kt_cc.log" 2>&1
    say "kt-examples convolution_correct: rc=$?"; (cd "$OUT" && tar -czf kt_cc.tgz kt_cc kt_cc.log && rm -rf kt_cc kt_cc.log) ;;
6)  # The notebook of tests/nvrtc/test_user_code.py executed by a Jupyter kernel with the real GPU
    # worker. Carried: `.whlmin`, wheels.sh's six base wheels without Kernel Tuner's (the
    # transfer's 64 MiB), and `.nbwhl`: nbclient, nbformat, ipykernel and what they need (pip
    # download of the three), which the GPU machine lacks; both git-ignored.
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whlmin/*.whl || exit 1
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/nbsite .nbwhl/*.whl || exit 1
    PYTHONPATH="$PYTHONPATH:/tmp/nbsite" timeout -k 5 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_gpu_tune_kernel.py -k notebook > "$OUT/notebook.log" 2>&1
    say "notebook on the GPU: rc=$? $(tail -1 "$OUT/notebook.log")" ;;
esac
say "call $1 done in $((SECONDS - T0)) s"
