"""ResNet-50 batch 32 in tf32 through optimize(): each convolution kernel's GPU time in one
forward, in order (PyTorch's profiler), median of 5 forwards. `--round-weights` rounds the
model's weights to TF32 first (what next/tf32-round's layer does), to tell a data effect from a
configuration one when the two trees' forwards differ."""
import copy
import sys

import torch
import torchvision
from torch.profiler import ProfilerActivity, profile

from autotune.runtime.models import optimize

torch.backends.cudnn.allow_tf32 = True
model = torchvision.models.resnet50().cuda().eval()
if "--round-weights" in sys.argv:
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.Conv2d):
                bits = m.weight.view(torch.int32)
                m.weight.copy_(((bits + 0x1000) & -0x2000).view(torch.float32))
x = torch.randn(32, 3, 224, 224, device="cuda")
with torch.no_grad():
    run = optimize(copy.deepcopy(model), x)
    for _ in range(3):
        run(x)
    torch.cuda.synchronize()
    per = []
    for _ in range(5):
        with profile(activities=[ProfilerActivity.CUDA]) as p:
            run(x)
            torch.cuda.synchronize()
        ks = [e for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA and e.name.startswith("tc_")]
        per.append([e.time_range.elapsed_us() for e in sorted(ks, key=lambda e: e.time_range.start)])
n = min(len(k) for k in per)
med = [sorted(k[i] for k in per)[2] for i in range(n)]
print("kernels", n, "total_us", round(sum(med), 1))
print(" ".join(f"{t:.1f}" for t in med))
