#!/usr/bin/env bash
# Session 77's GPU calls (H200): LIMIT=N OUT=$OUT bash results/h200/20261202i/calls.sh K, from
# the checkout root, with `( [ -d .whlmin ] && rm -rf .whl && mv .whlmin .whl ); . .whl/env.sh &&`
# before it and carry [".whlmin", ".dbcarry"]: `.whl` less Kernel Tuner's wheels, and session
# 75's store of ResNet-50 and VGG-16 tuned whole (../20261202g/call2/store.db.gz) as
# .dbcarry/autotune.db.gz. Sent with results/campaigns/20261129-h100.db.gz,
# results/recordings/h100.db.gz and ../20261201k/call3/store.db.gz moved out of the checkout,
# which is otherwise larger than one call carries.
set -u
. "$(dirname "$0")/../calls_lib.sh"
HERE=results/h200/20261202i
clocks() { nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader >> "$OUT/summary.txt"; }
script() {  # NAME SCRIPT [ARGS]: a results script run into $OUT/NAME.md, its log beside it
    local name=$1 s=$SECONDS; shift
    timeout -k 5 $(( $(left) - 15 )) python3 "$@" > "$OUT/$name.md" 2> "$OUT/$name.log"
    say "$name: rc=$? $((SECONDS - s)) s"; cat "$OUT/$name.md" >> "$OUT/summary.txt"
}
case "${1:?1}" in
1)  # Session 76 made three commits after its device time was spent: dc33b55 (Conv2d refreshes
    # its TF32-rounded weight before the call reads it), ceb0c7a (a pooling shape not yet run
    # during a CUDA graph's capture is PyTorch's; a new test) and 2c0649b (two tests of
    # test_runtime_precision on one helper). Their GPU tests, then test_runtime.py (the layer
    # both files use).
    # Predicted: all pass (165 + 35 + 17), about 3-4 minutes.
    install || exit 1
    clocks
    CAP=300 gpu_tests test_runtime_precision test_gpu_pool test_runtime
    clocks
    pack ;;
2)  # Call 1 passed all 217. New: the pooling kernel's 2 x 2 and 3 x 3 windows have entries of
    # their own that load every chunk of the window before comparing (the runtime loop's loads
    # were serial: a thread waited for memory once a pixel, nine times on ResNet-50's 3 x 3).
    # Its GPU tests (bit for bit against PyTorch, NaN, graphs, compile), the pooling timed
    # alone beside the walked entry, PyTorch's, compile's and a copy of the same bytes
    # (pool_bench.py), each model's eager forward split by kernel again (session 76's
    # eager_split.py), then Kernel Tuner's CUDA examples through tune_kernel, autotune alone
    # (last run on a GPU on 2026-11-30, baee226).
    # Predicted: all tests pass; ResNet-50's pooling 32 -> 17-22 us (the copy of its 64 MB
    # about 16-18), walked 29-33; VGG-16's five 150 -> 125-145 us (their bytes near the copy
    # already); the eager splits' pooling class down by those amounts; the eight examples run,
    # each within 1.3x its best of 2026-11-30.
    install || exit 1
    restore_db
    clocks
    CAP=120 gpu_tests test_gpu_pool
    script pool_bench $HERE/pool_bench.py
    script eager_resnet50 results/h200/20261202h/eager_split.py --model resnet50
    script eager_vgg16 results/h200/20261202h/eager_split.py --model vgg16
    s=$SECONDS
    timeout -k 5 $(( $(left) - 10 )) python3 -m autotune bench kt-examples --examples .kt_examples/cuda --max-fevals 20 --timeout 150 \
        --only vector_add.py --only matmul.py --only convolution_correct.py --only reduction.py --only stencil.py \
        --only zeromeanfilter.py --only sepconv.py --only spmv.py --output "$OUT/kt" > "$OUT/kt.log" 2>&1
    say "kt-examples (autotune alone): rc=$? $((SECONDS - s)) s"; cat "$OUT/kt"/*.md >> "$OUT/summary.txt" 2>/dev/null
    (cd "$OUT" && tar -czf kt.tgz kt kt.log && rm -rf kt kt.log)
    clocks
    pack ;;
3)  # Call 2: in the models' forwards (profiler) the unrolled entries took ResNet-50's pooling
    # 32 -> 29.7 us and VGG-16's five 152 -> 125 us, but pool_bench.py timed each call alone,
    # which timed the host's ~25 us a call of max_pool2d_nhwc on the small poolings; it now
    # queues 20 calls behind a spin of the GPU. And the host: ResNet-50's eager forward of ours
    # took 3.16 ms of events where its kernels were busy 0.88 ms. host_profile.py times each
    # model's forward on the host and on the GPU and profiles ours with cProfile.
    # Predicted: unrolled 10-20% under walked on every pooling, ResNet-50's 1.1-1.3x the copy
    # of its bytes; the host's forward of ours 2.5-3.5 ms on ResNet-50 (53 convolutions and a
    # pooling at 45-60 us each), mostly in our Python between PyTorch's calls (the layer's
    # checks, the plan's lookup, argument packing), the GPU's 0.9 ms.
    install || exit 1
    restore_db
    clocks
    script pool_bench $HERE/pool_bench.py
    script host_resnet50 $HERE/host_profile.py --model resnet50
    script host_vgg16 $HERE/host_profile.py --model vgg16
    clocks
    pack ;;
4)  # Call 3: ResNet-50's eager forward of ours took 2.45 ms of host time (GPU 0.96 ms), about
    # 45 us a convolution, with no one function holding it under cProfile. call_cost.py times
    # one convolution's call piece by piece (the layer, its forward, the runtime's call, the
    # tensor call, the prepared entry's launch, its driver launches alone, the key, the
    # output's allocation) beside PyTorch's own calls, on two of ResNet-50's layers. Then the
    # runtime's GPU tests on this session's last runtime code (the pooling's entries).
    # Predicted: the layer called 35-45 us; the driver launches alone 5-8 us, the allocation
    # 3-5 us, an empty module 2-4 us, cuDNN's conv2d with its bias 15-25 us; the tensor call
    # 20-30 us, so that our Python above the launch and the allocation is 15-25 us of it.
    # Tests: all pass (165, 35, 17).
    install || exit 1
    restore_db
    clocks
    script call_cost $HERE/call_cost.py
    CAP=200 gpu_tests test_gpu_pool test_runtime_precision test_runtime
    clocks
    pack ;;
5)  # Call 4's call_cost.py stopped at the first layer (conv1, whose entry has a workspace its
    # driver launches alone were not given); its tests passed (35, 165, 17). It now takes two
    # layers whose entries read and write the call's buffers alone. Predicted as call 4.
    install || exit 1
    restore_db
    clocks
    script call_cost $HERE/call_cost.py
    clocks
    pack ;;
6)  # Call 5: of one eager convolution's 33.5 us of host time, the layer's forward took 5.6,
    # much of it nn.Module's attribute lookups of the weight and bias (about 1 us each, measured
    # on the CPU here), and the tensor call looked up PyTorch's stream getter on torch._C (about
    # 1 us) each call. New: the eager call reads the parameters from the module's dictionary
    # (the attribute where they are parametrized or swapped in) and the getter is looked up
    # once. The runtime's GPU tests, then call_cost.py and host_profile.py on ResNet-50.
    # Predicted: all tests pass (165, 17); the layer's forward 5.6 -> 2-3 us, the layer called
    # 33.5 -> 28-31 us; ResNet-50's eager forward of ours 2.45 -> 2.2-2.35 ms of host time.
    install || exit 1
    restore_db
    clocks
    CAP=200 gpu_tests test_runtime_precision test_runtime
    script call_cost $HERE/call_cost.py
    script host_resnet50 $HERE/host_profile.py --model resnet50 --forwards 30
    clocks
    pack ;;
7)  # Call 6 (all tests passed) ran on a start of the machine whose host ran PyTorch's own
    # calls 10-45% faster than call 5's: its figures do not compare with call 5's. ab_forward.py
    # times ResNet-50's eager forward of ours with the code now and session 76's (copied in the
    # script), rounds alternating in one process.
    # Predicted: before / now 1.05-1.10 (about 4-5 us of 45 a convolution).
    install || exit 1
    restore_db
    clocks
    script ab_forward $HERE/ab_forward.py
    clocks
    pack ;;
esac
