#!/usr/bin/env bash
# The GPU calls of 2026-11-30's fourth session (session 52), on the H200, from the checkout root:
# session 51's queued calls (../20261130c/calls.sh 5, 6, 7), call 1 with a measurement of the
# output's return first. Carried: `.whl` (../shared/device/wheels.sh --kernel-tuner) and
# `.kt_examples/cuda` (Kernel Tuner's examples/cuda, its public snapshot).
# Run as: LIMIT=580 OUT=$OUT bash results/h200/20261130d/calls.sh N
set -u
. "$(dirname "$0")/../calls_lib.sh"
case "${1:?1 to 4}" in
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
esac
say "call $1 done in $((SECONDS - T0)) s"
