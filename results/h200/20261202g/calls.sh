#!/usr/bin/env bash
# Session 75's GPU calls (H200): LIMIT=N OUT=$OUT bash results/h200/20261202g/calls.sh K, from
# the checkout root, with `( [ -d .whlmin ] && rm -rf .whl && mv .whlmin .whl ); . .whl/env.sh &&`
# before it and carry [".whlmin"] (`.whl` less Kernel Tuner's wheels), plus ".dbcarry" where a
# call resumes the store the call before returned (as .dbcarry/autotune.db.gz). Sent with
# results/campaigns/20261129-h100.db.gz, results/recordings/h100.db.gz and
# ../20261201k/call3/store.db.gz moved out of the checkout, which is otherwise larger than one
# call carries.
set -u
. "$(dirname "$0")/../calls_lib.sh"
HERE=results/h200/20261202g
clocks() { nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader >> "$OUT/summary.txt"; }
model_whole() {  # MODEL: tuned whole into the store (its fused studies, every family), benched
    # with its layers and CUDA graphs, and one graph forward's time split by the profiler
    local m=$1 s
    tune "$m" bf16 --time-limit $(( $(left) - 170 ))
    bench_model "$m" 32 bf16 --layers --cuda-graphs
    s=$SECONDS; timeout -k 5 $(( $(left) - 15 )) python3 $HERE/graph_replay.py --model "$m" --batch 32 > "$OUT/graph_$m.md" 2> "$OUT/graph_$m.log"
    say "graph_replay $m: rc=$? $((SECONDS - s)) s"; cat "$OUT/graph_$m.md" >> "$OUT/summary.txt"
}
case "${1:?1}" in
1)  # Session 74's call 4 met both ResNet-50 targets (bf16, batch 32: ours 4.86x eager, ours in
    # torch.compile 1.35x torch.compile) with 11 of its 47 studies untuned: the call's time
    # stopped `tune-model`. With CUDA graphs ours in compile took 1.157 ms a forward where our
    # convolutions took 1.000 ms: 0.157 ms for the rest (0.02-0.05 ms in sessions 63 and 67).
    # Here ResNet-50 tuned whole into a fresh store, as a user on a new machine would, benched
    # the same way, then one graph forward split by PyTorch's profiler, compile's and ours.
    # Predicted: 2,820 evaluations in 280-330 s (session 63: 278 s); our convolutions
    # 0.97-1.00 ms a forward (every shape on its own tuned plan); ours 4.5-5x eager (host-bound
    # here), ours in compile 1.3-1.4x compile, with graphs 1.5-1.65x. Of the 0.157 ms: most is
    # the head, the host's time from the call to the graph's first kernel (guards, the input's
    # copy, the launch: events start before it), and under 0.05 ms kernels besides ours
    # (pooling, the classifier, Triton's few) and idle time inside the graph.
    install || exit 1
    clocks
    model_whole resnet50
    clocks
    save_db; pack ;;
2)  # VGG-16 likewise, into call 1's store (last run in session 63: ours 1.71x eager, ours in
    # compile 1.32x compile with 1,080 evaluations in 305 s).
    install || exit 1
    restore_db
    clocks
    model_whole vgg16
    clocks
    save_db; pack ;;
3)  # Run on the tree with programmatic_launch.diff applied (not landed: README section 3).
    # Calls 1-2, fully tuned (fresh store): with CUDA graphs ours in compile spent 163 us of a
    # ResNet-50 forward idle between kernels inside the graph (58 kernels; compile's own graph
    # 104 us over 114), about 2.9 us at each boundary against 0.9: our kernels' launches follow
    # the end of the kernel before them. tc_wgmma now waits for the grid before it
    # (griddepcontrol.wait) and lets the next start (launch_dependents), and the runtime's
    # driver launcher, in a graph's capture, launches it with programmatic stream
    # serialization. The new kernel text has a new digest: the store's top three of every
    # tc_wgmma study measured again first; then both models benched and their graph forwards
    # profiled with the driver launcher (programmatic in graphs) beside the cupy launcher
    # (plain), one process each; then the runtime's GPU tests (a new one: a chain of three in
    # a captured graph, launched programmatically, against float64).
    # Predicted: ResNet-50's idle inside the graph 163 -> 50-80 us, ours in compile with graphs
    # 0.99 -> 0.90-0.93 ms (against cupy's plain launches in the same process); VGG-16's
    # 64 us -> 25-40 us (26 kernels), 2.1 -> 2.06-2.08 ms; without graphs nothing moves
    # (plain launches outside a capture); every test passes.
    install || exit 1
    restore_db
    clocks
    s=$SECONDS; timeout -k 5 200 python3 -m autotune remeasure --top 3 --family tc_wgmma --no-baseline --time-limit 150 > "$OUT/remeasure.md" 2> "$OUT/remeasure.log"
    say "remeasure --top 3 tc_wgmma: rc=$? $((SECONDS - s)) s: $(tail -1 "$OUT/remeasure.log")"
    for m in resnet50 vgg16; do
        bench_model "$m" 32 bf16 --cuda-graphs --launcher driver --launcher cupy
        s=$SECONDS; timeout -k 5 $(( $(left) - 15 )) python3 $HERE/graph_replay.py --model "$m" --batch 32 --launcher driver --launcher cupy > "$OUT/graph_$m.md" 2> "$OUT/graph_$m.log"
        say "graph_replay $m: rc=$? $((SECONDS - s)) s"; cat "$OUT/graph_$m.md" >> "$OUT/summary.txt"
    done
    CAP=$(( $(left) - 25 )) gpu_tests test_runtime_precision
    clocks
    save_db; pack ;;
4)  # Run on the tree with programmatic_launch.diff applied, as call 3.
    # The kernel's own GPU tests with the new text (odd shapes, every dtype and epilogue), and
    # the tuner's.
    install || exit 1
    clocks
    CAP=250 gpu_tests test_gpu_tc_wgmma test_gpu
    clocks
    pack ;;
esac
