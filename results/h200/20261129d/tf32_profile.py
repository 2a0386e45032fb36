"""ResNet-50 batch 32 in tf32 through optimize(): the module it returns, how often a layer
rounded its weight, and the GPU kernels of 5 forwards by name (PyTorch's profiler). Run from
each tree (main, next/tf32-round) over one store: why the rounding branch's forward was 4.75 ms
against main's 2.77."""
import copy

import torch
import torchvision
from torch.profiler import ProfilerActivity, profile

from autotune.runtime import torch_layer
from autotune.runtime.models import optimize

rounded = [0]
if hasattr(torch_layer.Conv2d, "_round_weight"):
    plain = torch_layer.Conv2d._round_weight

    def counted(self, *args):
        rounded[0] += 1
        return plain(self, *args)

    torch_layer.Conv2d._round_weight = counted
torch.backends.cudnn.allow_tf32 = True
torch.backends.cuda.matmul.allow_tf32 = True
model = torchvision.models.resnet50().cuda().eval()
x = torch.randn(32, 3, 224, 224, device="cuda")
with torch.no_grad():
    run = optimize(copy.deepcopy(model), x)
    print("module:", type(run).__name__, "roundings after optimize:", rounded[0])
    for _ in range(3):
        run(x)
    torch.cuda.synchronize()
    print("roundings after 3 forwards:", rounded[0])
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(5):
            run(x)
        torch.cuda.synchronize()
print(p.key_averages().table(sort_by="cuda_time_total", row_limit=16, max_name_column_width=90))
