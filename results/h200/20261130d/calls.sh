#!/usr/bin/env bash
# The GPU calls of 2026-11-30's fourth session (session 52), on the H200, from the checkout root:
# session 51's queued calls (../20261130c/calls.sh 5, 6, 7), call 1 with a measurement of the
# output's return first. Carried: `.whl` (../shared/device/wheels.sh --kernel-tuner) and
# `.kt_examples/cuda` (Kernel Tuner's examples/cuda, its public snapshot).
# Run as: LIMIT=580 OUT=$OUT bash results/h200/20261130d/calls.sh N
set -u
. "$(dirname "$0")/../calls_lib.sh"
case "${1:?1 to 3}" in
1)  # An 800 MB output's return to the host, each way (host_copy.py), then ../20261130c's call 5.
    # Predicted: get() into a new array costs page faults the reused and pinned buffers do not,
    # a few tenths of a second; not the 0.9 s a configuration accuracy.py lost.
    install || exit 1
    timeout -k 5 120 python3 results/h200/20261130d/host_copy.py > "$OUT/host_copy.txt" 2>&1
    say "host_copy: rc=$?"; cat "$OUT/host_copy.txt" >> "$OUT/summary.txt"
    LIMIT=$(left) bash results/h200/20261130c/calls.sh 5 ;;
2)  LIMIT=$(left) bash results/h200/20261130c/calls.sh 6 ;;
3)  LIMIT=$(left) bash results/h200/20261130c/calls.sh 7 ;;
esac
say "call $1 done in $((SECONDS - T0)) s"
