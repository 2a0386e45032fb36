"""ResNet-50 batch 32 in tf32 (fp32 tensors, TF32 allowed): GPU kernels of one forward, eager
PyTorch against autotune's optimize(), by kernel name (PyTorch's profiler). Why ours was 0.54x."""
import copy
import torch
import torchvision
from torch.profiler import ProfilerActivity, profile
from autotune.runtime.models import optimize

torch.backends.cudnn.allow_tf32 = True
torch.backends.cuda.matmul.allow_tf32 = True
model = torchvision.models.resnet50().cuda().eval()
x = torch.randn(32, 3, 224, 224, device="cuda")
ways = {"eager": model, "ours": optimize(copy.deepcopy(model), x)}
for name, fwd in ways.items():
    with torch.no_grad():
        for _ in range(3):
            fwd(x)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as p:
            for _ in range(5):
                fwd(x)
            torch.cuda.synchronize()
    print(f"== {name}, 5 forwards")
    print(p.key_averages().table(sort_by="cuda_time_total", row_limit=14, max_name_column_width=90))
