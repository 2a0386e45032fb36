"""Where the host's time of an eager forward of ours goes: a torchvision model (bf16
channels-last, batch 32) through `optimize()` from the store, its forward timed on the host
(the GPU's own time beside it, from events behind a spin), then cProfile over forwards, the
functions by their own time and by the time under them.

Session 77's call 2: ResNet-50's eager forward of ours took 3.16 ms of events where its
kernels were busy 0.88 ms, host-bound by about 55 us a layer.

    python3 host_profile.py --model resnet50 [--storage URL] [--forwards 50] > out.md
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import io
import pstats
import statistics
import time

import torch
import torchvision

from autotune.runtime.dispatch import Runtime
from autotune.runtime.models import optimize


def gpu_ms(forward, x, calls=10) -> float:
    """The GPU's time a forward: `calls` forwards queued behind a spin, by events."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(100_000_000)  # about 50 ms: the host queues every forward meanwhile
    start.record()
    for _ in range(calls):
        forward(x)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--storage", default=None)
    parser.add_argument("--forwards", type=int, default=50)
    args = parser.parse_args()
    torch.manual_seed(0)
    base = getattr(torchvision.models, args.model)(weights=None).eval().cuda()
    model = base.to(dtype=torch.bfloat16, memory_format=torch.channels_last)
    x = torch.randn(args.batch, 3, 224, 224, device="cuda", dtype=torch.bfloat16)
    x = x.contiguous(memory_format=torch.channels_last)
    ways = {
        "eager": model,
        "ours": optimize(copy.deepcopy(model), x, runtime_=Runtime(args.storage)),
    }
    print(f"# {args.model} batch {args.batch} bf16 channels-last: the host's time a forward\n")
    print("| way | host ms a forward (synchronized) | GPU ms a forward |")
    print("|---|--:|--:|")
    with torch.no_grad():
        for way, forward in ways.items():
            for _ in range(5):
                forward(x)
            torch.cuda.synchronize()
            host = []
            for _ in range(args.forwards):
                t = time.perf_counter()
                forward(x)
                torch.cuda.synchronize()
                host.append((time.perf_counter() - t) * 1000)
            gpu = statistics.median(gpu_ms(forward, x) for _ in range(5))
            print(f"| {way} | {statistics.median(host):.3f} | {gpu:.3f} |")
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(args.forwards):
            ways["ours"](x)
        torch.cuda.synchronize()
        profile.disable()
    for order in ("tottime", "cumulative"):
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats(order).print_stats(35)
        print(f"\n## ours: cProfile over {args.forwards} forwards, by {order}\n\n```")
        print(text.getvalue().strip())
        print("```")


if __name__ == "__main__":
    main()
