"""One convolution through PyTorch (cuDNN, benchmark mode) in bf16 channels-last, warmed up, then
one call between cudaProfilerStart and Stop: run under `ncu --profile-from-start off` to see the
kernel cuDNN picks for the layer (its name, grid, block, registers, shared memory, speed).

    python3 cudnn_layer.py N K C F B [PADDING]
"""

import sys

import torch

n, k, c, f, b = (int(v) for v in sys.argv[1:6])
padding = int(sys.argv[6]) if len(sys.argv) > 6 else 0
torch.backends.cudnn.benchmark = True
side = n + k - 1 - 2 * padding  # the input side whose output side is n at stride 1
x = torch.randn(b, c, side, side, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
w = torch.randn(f, c, k, k, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
for _ in range(20):
    torch.nn.functional.conv2d(x, w, padding=padding)
torch.cuda.synchronize()
torch.cuda.profiler.start()
torch.nn.functional.conv2d(x, w, padding=padding)
torch.cuda.synchronize()
torch.cuda.profiler.stop()
print("ok")
