"""Where one forward of ResNet-50 (batch 32, bf16 channels-last) with autotune's convolutions
spends its time: PyTorch's profiler around 5 eager forwards after warm-up, against eager
PyTorch's, with each of the runtime's launchers. Prints the GPU's busy time per forward (sum of
kernel times), the host's time to issue it, the wall time, and the top operators by host and by
GPU time.
Run on the GPU machine after `autotune tune-model --model resnet50 --batch 32 --dtype bf16`."""

import copy
import time

import torch
import torchvision
from torch.profiler import ProfilerActivity, profile

from autotune.runtime.calls import LAUNCHER_NAMES
from autotune.runtime.dispatch import Runtime
from autotune.runtime.models import optimize

FORWARDS = 5


def measure(name, forward, x):
    with torch.no_grad():
        for _ in range(5):
            forward(x)
        torch.cuda.synchronize()
        t = time.perf_counter()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(FORWARDS):
                forward(x)
            issued = time.perf_counter() - t
            torch.cuda.synchronize()
        wall = time.perf_counter() - t
    events = prof.key_averages()
    gpu_us = sum(e.self_device_time_total for e in events)
    print(
        f"== {name}: per forward: wall {wall / FORWARDS * 1e3:.3f} ms (profiled), "
        f"host issue {issued / FORWARDS * 1e3:.3f} ms, GPU kernels {gpu_us / FORWARDS / 1e3:.3f} ms"
    )
    print(events.table(sort_by="self_device_time_total", row_limit=15))
    print(events.table(sort_by="self_cpu_time_total", row_limit=15))


def main():
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).eval().cuda()
    model = model.to(dtype=torch.bfloat16, memory_format=torch.channels_last)
    x = torch.randn(32, 3, 224, 224, device="cuda", dtype=torch.bfloat16)
    x = x.contiguous(memory_format=torch.channels_last)
    measure("eager PyTorch", model, x)
    for launcher in LAUNCHER_NAMES:
        ours = optimize(copy.deepcopy(model), x, runtime_=Runtime(launcher=launcher))
        measure(f"autotune's convolutions, eager, {launcher} launcher", ours, x)


if __name__ == "__main__":
    main()
