"""The error TF32 products alone give a convolution, rounding or truncating the FP32 inputs.

Per layer: inputs uniform in [-1, 1) in FP32, the float64 convolution of the inputs as given
(the reference) and of the inputs cut to TF32's 10 mantissa bits, either rounded to nearest
(cvt.rna, what cuDNN does) or truncated (FP32 bits handed to mma.sync as they are); accumulation
in float64, so only the input rounding shows. Prints a Markdown table.

    python results/h100/precision/tf32_truncation.py
"""

from __future__ import annotations

import torch

LAYERS = {  # (B, C, N, K, F, stride): one per set, the extremes of C*K*K
    "alexnet conv1": (128, 3, 55, 11, 64, 4),
    "alexnet conv3": (128, 192, 13, 3, 384, 1),
    "overfeat L5": (128, 1024, 12, 3, 1024, 1),
    "vgg16 conv1_1": (32, 3, 224, 3, 64, 1),
}


def tf32(x: torch.Tensor, rounded: bool) -> torch.Tensor:
    bits = x.view(torch.int32)
    if rounded:
        bits = bits + 0x1000  # half of the 13 dropped bits: to nearest, ties away
    return (bits & ~0x1FFF).view(torch.float32)


def rel(y: torch.Tensor, ref: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm(y - ref) / torch.linalg.vector_norm(ref))


def main() -> None:
    torch.backends.cudnn.allow_tf32 = False
    gen = torch.Generator(device="cuda").manual_seed(0)
    print("| layer | C*K*K | TF32 rounded | TF32 truncated | ratio |")
    print("|---|--:|--:|--:|--:|")
    for name, (b, c, n, k, f, s) in LAYERS.items():
        side = (n - 1) * s + k
        x = torch.rand((b, c, side, side), device="cuda", generator=gen) * 2 - 1
        w = torch.rand((f, c, k, k), device="cuda", generator=gen) * 2 - 1
        ref = torch.nn.functional.conv2d(x.double(), w.double(), stride=s)
        errors = []
        for rounded in (True, False):
            y = torch.nn.functional.conv2d(
                tf32(x, rounded).double(), tf32(w, rounded).double(), stride=s
            )
            errors.append(rel(y, ref))
        ratio = errors[1] / errors[0]
        print(f"| {name} | {c * k * k} | {errors[0]:.3e} | {errors[1]:.3e} | {ratio:.2f} |")


if __name__ == "__main__":
    main()
