"""One convolution through PyTorch (cuDNN, benchmark mode, channels-last) as protocol 2 meets
it: warmed up, then rounds of a 256 MiB memset (the flush) and the convolution, the last
round's convolution alone between cudaProfilerStart and Stop. Run under `ncu
--profile-from-start off --cache-control none` to see what cuDNN's kernel reads from DRAM
after the flush, beside placement.py's run of ours (session 58's, which flushes the same way).

    python3 cudnn_flushed.py N K C F B STRIDE DTYPE [fill]

With `fill`, the flush is a kernel writing the buffer (PyTorch's fill_) instead of a memset.
Prints the device's persisting-L2 limit (cudaLimitPersistingL2CacheSize) after the rounds.
"""

import sys

import cupy as cp
import torch

n, k, c, f, b, stride = (int(v) for v in sys.argv[1:7])
dtype = sys.argv[7]
by_kernel = sys.argv[8:] == ["fill"]
torch.backends.cudnn.benchmark = True
torch.backends.cudnn.allow_tf32 = dtype == "tf32"
storage = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32}[dtype]
side = (n - 1) * stride + k
x = torch.randn(b, c, side, side, device="cuda", dtype=storage).to(
    memory_format=torch.channels_last
)
w = torch.randn(f, c, k, k, device="cuda", dtype=storage).to(memory_format=torch.channels_last)
flush = cp.empty(256 << 20, dtype=cp.uint8)
flush_t = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
stream = torch.cuda.current_stream().cuda_stream
for _ in range(20):
    torch.nn.functional.conv2d(x, w, stride=stride)
for last in (False, False, False, True):
    if by_kernel:
        flush_t.fill_(1)
    else:
        cp.cuda.runtime.memsetAsync(flush.data.ptr, 0, flush.nbytes, stream)
    if last:
        torch.cuda.profiler.start()
    torch.nn.functional.conv2d(x, w, stride=stride)
    torch.cuda.synchronize()
torch.cuda.profiler.stop()
PERSISTING_L2_LIMIT = 0x06  # cudaLimitPersistingL2CacheSize
print(f"persisting L2 limit: {cp.cuda.runtime.deviceGetLimit(PERSISTING_L2_LIMIT)} bytes")
