"""Hold the GPU busy for SECONDS (BF16 8192^3 matrix products through PyTorch, back to back),
then print what it did: products a second at the start and at the end, so that a clock that
fell under the load shows as a rate that fell.

    python3 heat.py SECONDS
"""

import sys
import time

import torch

seconds = float(sys.argv[1])
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
rates = []
start = time.perf_counter()
while time.perf_counter() - start < seconds:
    t0 = time.perf_counter()
    for _ in range(20):
        torch.mm(a, b)
    torch.cuda.synchronize()
    rates.append(20 * 2 * 8192**3 / (time.perf_counter() - t0) / 1e12)
print(
    f"heat: {len(rates) * 20} products in {seconds:.0f} s; TFLOP/s first {rates[0]:.0f}, "
    f"last {rates[-1]:.0f}, min {min(rates):.0f}, max {max(rates):.0f}"
)
