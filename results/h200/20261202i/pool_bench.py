"""The runtime's max pooling (autotune.MaxPool2d's kernel) on ResNet-50's and VGG-16's poolings
(bf16, channels-last, batch 32), against the same kernel walking its window at run time
(session 76's, "walked"), PyTorch's NHWC pooling, torch.compile's and a copy of
the same bytes (what reading the input once and writing the output takes): each the GPU's time
a call, calls queued back to back behind a spin of the GPU, one line a pooling. (Call 2 timed
each call alone, which timed the host's time a call on the small poolings.)

    python3 pool_bench.py [--batch 32] [--repeats 30] > out.md
"""

from __future__ import annotations

import argparse
import statistics

import torch

from autotune.runtime import pool_launch
from autotune.runtime.pool_launch import Pooling, PoolLaunches
from autotune.runtime.torch_pool import max_pool2d_nhwc

F = torch.nn.functional
# (name, channels, side, kernel, stride, padding)
POOLINGS = [
    ("resnet50", 64, 112, 3, 2, 1),
    ("vgg16 1", 64, 224, 2, 2, 0),
    ("vgg16 2", 128, 112, 2, 2, 0),
    ("vgg16 3", 256, 56, 2, 2, 0),
    ("vgg16 4", 512, 28, 2, 2, 0),
    ("vgg16 5", 512, 14, 2, 2, 0),
]


def timed_us(fn, repeats: int, calls: int = 20) -> float:
    """Median microseconds of one call on the GPU: `calls` calls queued behind a spin of the
    GPU (so that the host's time a call, which is longer than a small pooling's, does not
    count), timed by one pair of events around them, `repeats` times."""
    for _ in range(10):
        fn()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(4_000_000)  # about 2 ms of the GPU's time, while the host queues
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000 / calls)
    return statistics.median(times)


def walked(x, k, s, p):
    """The pooling by the entry that walks the window at run time (session 76's kernel, which
    every window had): a launch of its own, prepared with no window unrolled."""
    b, c, h, w = x.shape
    pooling = Pooling("bfloat16", b, c, h, w, (k, k), (s, s), (p, p))
    launches = PoolLaunches()
    unrolled, pool_launch.UNROLLED_WINDOWS = pool_launch.UNROLLED_WINDOWS, ()
    y = F.max_pool2d(x, k, s, p).contiguous(memory_format=torch.channels_last).zero_()
    stream = torch.cuda.current_stream().cuda_stream
    try:
        launches.run(pooling, x.get_device(), x.data_ptr(), y.data_ptr(), stream)
    finally:
        pool_launch.UNROLLED_WINDOWS = unrolled
    return y, lambda: launches.run(pooling, x.get_device(), x.data_ptr(), y.data_ptr(), stream)


def measure(x, k, s, p, repeats):
    """Ours, checked against PyTorch bit for bit, and the five figures of one pooling."""
    ours = max_pool2d_nhwc(x, k, s, p)
    assert ours is not None and torch.equal(ours, F.max_pool2d(x, k, s, p))
    old, run_old = walked(x, k, s, p)
    assert torch.equal(old, ours)
    compiled = torch.compile(lambda t: F.max_pool2d(t, k, s, p))
    # the copy: as many bytes read and written as the pooling reads and writes (half of
    # them copied: a copy reads and writes each)
    src = torch.empty((x.numel() + ours.numel()) // 2, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    return ours, [
        timed_us(lambda: max_pool2d_nhwc(x, k, s, p), repeats),
        timed_us(run_old, repeats),
        timed_us(lambda: F.max_pool2d(x, k, s, p), repeats),
        timed_us(lambda: compiled(x), repeats),
        timed_us(lambda: dst.copy_(src), repeats),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    print(
        "| pooling | shape | MB read + written | ours us | walked us | PyTorch us | compile us "
        "| copy us | ours / copy |"
    )
    print("|---|---|--:|--:|--:|--:|--:|--:|--:|")
    totals = [0.0] * 5
    for name, c, side, k, s, p in POOLINGS:
        x = torch.randn(args.batch, c, side, side, device="cuda", dtype=torch.bfloat16)
        x = x.contiguous(memory_format=torch.channels_last)
        ours, figures = measure(x, k, s, p, args.repeats)
        totals = [t + f for t, f in zip(totals, figures, strict=True)]
        mb = (x.numel() + ours.numel()) * 2 / 1e6
        shape = f"{c} x {side}^2, {k}x{k} / {s}, pad {p}"
        cells = " | ".join(f"{f:.1f}" for f in figures)
        print(f"| {name} | {shape} | {mb:.1f} | {cells} | {figures[0] / figures[4]:.2f} |")
    cells = " | ".join(f"{f:.1f}" for f in totals)
    print(f"| VGG-16's five + ResNet-50's | | | {cells} | {totals[0] / totals[4]:.2f} |")


if __name__ == "__main__":
    main()
