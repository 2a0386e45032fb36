#!/usr/bin/env bash
# Session 76's GPU calls (H200): LIMIT=N OUT=$OUT bash results/h200/20261202h/calls.sh K, from
# the checkout root, with `( [ -d .whlmin ] && rm -rf .whl && mv .whlmin .whl ); . .whl/env.sh &&`
# before it and carry [".whlmin", ".dbcarry"]: `.whl` less Kernel Tuner's wheels, and session
# 75's store of ResNet-50 and VGG-16 tuned whole (../20261202g/call2/store.db.gz) as
# .dbcarry/autotune.db.gz. Sent with results/campaigns/20261129-h100.db.gz,
# results/recordings/h100.db.gz and ../20261201k/call3/store.db.gz moved out of the checkout,
# which is otherwise larger than one call carries.
set -u
. "$(dirname "$0")/../calls_lib.sh"
HERE=results/h200/20261202h
clocks() { nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader >> "$OUT/summary.txt"; }
script() {  # NAME SCRIPT [ARGS]: a results script run into $OUT/NAME.md, its log beside it
    local name=$1 s=$SECONDS; shift
    timeout -k 5 $(( $(left) - 15 )) python3 "$@" > "$OUT/$name.md" 2> "$OUT/$name.log"
    say "$name: rc=$? $((SECONDS - s)) s"; cat "$OUT/$name.md" >> "$OUT/summary.txt"
}
case "${1:?1}" in
1)  # Session 75: with CUDA graphs, ours in torch.compile spends one idle gap a forward from
    # CUDA-graph trees' copy of the input to the graph's first kernel, 162-180 us in ResNet-50
    # (58 kernels) and 60-103 us in VGG-16 (26), under 25 us in compile's own graph; seen only
    # under PyTorch's profiler. Here, first, what a graph's launch costs by what its nodes
    # carry (graph_launch.py: 58 near-empty nodes, with tensor-map-sized parameters, 200 KB of
    # shared memory, clusters, a module each); then each model's forward timed without the
    # profiler, on an idle GPU and behind a spin (the GPU's own time), and the start split
    # with the trace's host side (graph_start.py).
    # Predicted: the gap is the host's, between the copy's call and cudaGraphLaunch (graph
    # trees' bookkeeping, several times slower under the profiler, as the head is: 385 us
    # there against 107 us of host time in `bench model`); launch -> first kernel under 20 us
    # in both ways; graph_launch.py's variants within 10 us of one another in latency. ResNet-50
    # ours: events 0.97-1.00 ms, GPU alone 0.88-0.93 ms.
    install || exit 1
    restore_db
    clocks
    script graph_launch $HERE/graph_launch.py
    script start_resnet50 $HERE/graph_start.py --model resnet50
    script start_vgg16 $HERE/graph_start.py --model vgg16
    clocks
    pack ;;
esac
