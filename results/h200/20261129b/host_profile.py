"""Where the host time of a forward goes: ResNet-50 (batch 32, bf16 channels-last) with
autotune's convolutions, each of the runtime's launchers, against eager PyTorch.

1. Per forward: wall time and the host's time to issue it (medians of 20, after warm-up).
2. Python's cProfile over 20 forwards per launcher: the functions by own time, so that the
   per-call cost of the runtime's path is named function by function.
3. One layer alone, called 500 times: host microseconds a call for our layer (with its bias
   add) and for torch.nn.Conv2d of the same shape (cuDNN), for a 3x3 padded and a 1x1 layer.
4. PyTorch's profiler: the GPU's busy time per forward and the top kernels.

Run on the GPU machine after `autotune tune-model --model resnet50 --batch 32 --dtype bf16`:
    python3 results/h200/20261129b/host_profile.py
"""

import copy
import cProfile
import pstats
import statistics
import time

import torch
import torchvision
from torch.profiler import ProfilerActivity, profile

from autotune.runtime.calls import LAUNCHER_NAMES
from autotune.runtime.dispatch import Runtime
from autotune.runtime.models import optimize
from autotune.runtime.torch_layer import Conv2d

FORWARDS = 20


def per_forward(name, forward, x):
    with torch.no_grad():
        for _ in range(5):
            forward(x)
        torch.cuda.synchronize()
        walls, issues = [], []
        for _ in range(FORWARDS):
            t = time.perf_counter()
            forward(x)
            issued = time.perf_counter()
            torch.cuda.synchronize()
            walls.append(time.perf_counter() - t)
            issues.append(issued - t)
    print(
        f"== {name}: wall {statistics.median(walls) * 1e3:.3f} ms, "
        f"host issue {statistics.median(issues) * 1e3:.3f} ms (medians of {FORWARDS})",
        flush=True,
    )


def python_profile(name, forward, x):
    with torch.no_grad():
        forward(x)
        torch.cuda.synchronize()
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(FORWARDS):
            forward(x)
        prof.disable()
        torch.cuda.synchronize()
    print(f"== cProfile, {name}, {FORWARDS} forwards (own time, then cumulative)", flush=True)
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(30)
    stats.sort_stats("cumulative").print_stats(30)


def one_layer(name, ours, theirs, x, calls=500):
    with torch.no_grad():
        for layer in (ours, theirs):
            for _ in range(20):
                layer(x)
        torch.cuda.synchronize()
        for label, layer in (("autotune", ours), ("torch", theirs)):
            t = time.perf_counter()
            for _ in range(calls):
                layer(x)
            issued = time.perf_counter() - t
            torch.cuda.synchronize()
            wall = time.perf_counter() - t
            print(
                f"== one layer {name}, {label}: host {issued / calls * 1e6:.1f} us a call, "
                f"wall {wall / calls * 1e6:.1f} us a call",
                flush=True,
            )


def gpu_profile(name, forward, x):
    with torch.no_grad():
        for _ in range(3):
            forward(x)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                forward(x)
            torch.cuda.synchronize()
    events = prof.key_averages()
    gpu_us = sum(e.self_device_time_total for e in events)
    print(f"== torch.profiler, {name}: GPU kernels {gpu_us / 5 / 1e3:.3f} ms a forward")
    print(events.table(sort_by="self_device_time_total", row_limit=12), flush=True)


def main():
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    dtype, fmt = torch.bfloat16, torch.channels_last
    model = (
        torchvision.models.resnet50(weights=None).eval().cuda().to(dtype=dtype, memory_format=fmt)
    )
    x = torch.randn(32, 3, 224, 224, device="cuda", dtype=dtype).contiguous(memory_format=fmt)
    ways = {"eager PyTorch": model}
    for launcher in LAUNCHER_NAMES:
        rt = Runtime(launcher=launcher)
        ways[f"ours, {launcher}"] = optimize(copy.deepcopy(model), x, runtime_=rt)
    for name, forward in ways.items():
        per_forward(name, forward, x)
    for name, forward in ways.items():
        if name != "eager PyTorch":
            python_profile(name, forward, x)
    for launcher in LAUNCHER_NAMES:
        rt = Runtime(launcher=launcher)
        for label, conv, size in (
            ("3x3 64->64 56x56 pad 1", torch.nn.Conv2d(64, 64, 3, padding=1), 56),
            ("1x1 256->64 56x56", torch.nn.Conv2d(256, 64, 1), 56),
        ):
            conv = conv.cuda().to(dtype=dtype, memory_format=fmt).eval()
            xi = torch.randn(32, conv.in_channels, size, size, device="cuda", dtype=dtype)
            xi = xi.contiguous(memory_format=fmt)
            ours = Conv2d.from_torch(conv, runtime_=rt)
            one_layer(f"{label}, {launcher}", ours, conv, xi)
    for name, forward in ways.items():
        gpu_profile(name, forward, x)


if __name__ == "__main__":
    main()
