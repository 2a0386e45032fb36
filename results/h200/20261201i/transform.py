"""What a space-to-depth transform of a first layer's input costs, by PyTorch's copy into that
layout (CUDA events, the median of 20 after 5 warm-ups, bf16): the pre-padded NHWC input (B, S,
S, 3) to (B, S/s, S/s, s*s*3) with its channels padded to a 16-byte chunk. A floor for what our
own transform kernel should cost. From the checkout root on the GPU machine:
    python3 results/h200/20261201i/transform.py"""

import torch

LAYERS = (  # name, B, S (pre-padded input side), s, channels after (padded)
    ("resnet50 conv1 7x7/2", 32, 229, 2, 16),
    ("alexnet conv1 11x11/4", 128, 227, 4, 48),
    ("overfeat conv1 11x11/4", 128, 231, 4, 48),
    ("vgg16 conv1 3x3/1", 32, 226, 1, 8),
)


def timed(fn, reps=20):
    for _ in range(5):
        fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[reps // 2]


print("| layer | input MB | output MB | copy ms | GB/s moved |\n|---|--:|--:|--:|--:|")
for name, b, side, s, cp in LAYERS:
    x = torch.randn(b, side, side, 3, device="cuda", dtype=torch.bfloat16)
    out_side = -(-side // s)
    out = torch.zeros(b, out_side, out_side, cp, device="cuda", dtype=torch.bfloat16)
    padded = torch.zeros(b, out_side * s, out_side * s, 3, device="cuda", dtype=torch.bfloat16)

    def copy():
        padded[:, :side, :side].copy_(x)
        v = padded.view(b, out_side, s, out_side, s, 3).permute(0, 1, 3, 2, 4, 5)
        out[..., : s * s * 3].copy_(v.reshape(b, out_side, out_side, s * s * 3))

    ms = timed(copy)
    mb_in, mb_out = x.numel() * 2 / 1e6, out.numel() * 2 / 1e6
    print(f"| {name} | {mb_in:.1f} | {mb_out:.1f} | {ms:.4f} | {(mb_in + mb_out) / ms:.0f} |")
