"""One convolution through PyTorch (cuDNN, benchmark mode) in a 16-bit or TF32 dtype and
channels-last, warmed up, then one call between cudaProfilerStart and Stop: run under
`ncu --profile-from-start off` to see the kernels cuDNN runs for the layer (names, grids,
clusters, registers, shared memory, duration). The input side is the one whose output side is
N at this stride without padding, as the shape sets have it.

    python3 cudnn_conv.py N K C F B STRIDE DTYPE
"""

import sys

import torch

n, k, c, f, b, stride = (int(v) for v in sys.argv[1:7])
dtype = sys.argv[7]
torch.backends.cudnn.benchmark = True
torch.backends.cudnn.allow_tf32 = dtype == "tf32"
storage = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32}[dtype]
side = (n - 1) * stride + k
x = torch.randn(b, c, side, side, device="cuda", dtype=storage).to(
    memory_format=torch.channels_last
)
w = torch.randn(f, c, k, k, device="cuda", dtype=storage).to(memory_format=torch.channels_last)
for _ in range(20):
    torch.nn.functional.conv2d(x, w, stride=stride)
torch.cuda.synchronize()
torch.cuda.profiler.start()
torch.nn.functional.conv2d(x, w, stride=stride)
torch.cuda.synchronize()
torch.cuda.profiler.stop()
