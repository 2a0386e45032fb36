"""cuDNN's convolution as protocol 2 meets it, for Nsight Compute's application replay: warmed
up, then rounds of a 256 MiB memset (the flush) and the convolution, the last round's
convolution alone between cudaProfilerStart and Stop. Session 70's `cudnn_flushed.py` with
cuDNN's algorithm chosen by its heuristics unless `benchmark` is given: each pass of an
application replay is a fresh process, and a choice by timing may differ between them.

    python3 cudnn_app.py N K C F B STRIDE DTYPE [benchmark]
"""

import sys

import cupy as cp
import torch

n, k, c, f, b, stride = (int(v) for v in sys.argv[1:7])
dtype = sys.argv[7]
torch.backends.cudnn.benchmark = sys.argv[8:] == ["benchmark"]
torch.backends.cudnn.allow_tf32 = dtype == "tf32"
storage = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32}[dtype]
side = (n - 1) * stride + k
x = torch.randn(b, c, side, side, device="cuda", dtype=storage).to(
    memory_format=torch.channels_last
)
w = torch.randn(f, c, k, k, device="cuda", dtype=storage).to(memory_format=torch.channels_last)
flush = cp.empty(256 << 20, dtype=cp.uint8)
stream = torch.cuda.current_stream().cuda_stream
for _ in range(20):
    torch.nn.functional.conv2d(x, w, stride=stride)
for last in (False, False, False, True):
    cp.cuda.runtime.memsetAsync(flush.data.ptr, 0, flush.nbytes, stream)
    if last:
        torch.cuda.profiler.start()
    torch.nn.functional.conv2d(x, w, stride=stride)
    torch.cuda.synchronize()
torch.cuda.profiler.stop()
