"""Where an eager forward's time goes besides the convolutions: a torchvision model (bf16
channels-last), eager PyTorch against ours (`optimize()` from the store), each forward split by
PyTorch's profiler into its kernels' classes and the kernels by time, with session 75's
`graph_replay.py` (forward_stats: each forward after a synchronize and a 2 ms sleep).

VGG-16's eager forward of ours took 2.409 ms where its convolutions take 1.594 (session 75),
and eager PyTorch's 4.031 where cuDNN's take 2.857: this names the rest.

    python3 eager_split.py --model vgg16 [--storage URL] [--forwards 20] > out.md
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import torch
import torchvision

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "20261202g"))
from graph_replay import CLASSES, COLUMNS, forward_stats, med  # noqa: E402  (as it ran)

from autotune.runtime.dispatch import Runtime  # noqa: E402
from autotune.runtime.models import optimize  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="vgg16")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--storage", default=None)
    parser.add_argument("--forwards", type=int, default=20)
    args = parser.parse_args()
    torch.manual_seed(0)
    base = getattr(torchvision.models, args.model)(weights=None).eval().cuda()
    model = base.to(dtype=torch.bfloat16, memory_format=torch.channels_last)
    x = torch.randn(args.batch, 3, 224, 224, device="cuda", dtype=torch.bfloat16)
    x = x.contiguous(memory_format=torch.channels_last)
    ways = {
        "eager": model,
        "ours": optimize(copy.deepcopy(model), x, runtime_=Runtime(args.storage)),
    }
    print(f"# {args.model} batch {args.batch} bf16 channels-last: an eager forward's kernels\n")
    print(f"{torch.cuda.get_device_name()}, PyTorch {torch.__version__}, medians.\n")
    print("| way | events ms | " + " | ".join(COLUMNS) + " | " + " us | ".join(CLASSES) + " us |")
    print("|---|" + "--:|" * (1 + len(COLUMNS) + len(CLASSES)))
    tops = {}
    for way, forward in ways.items():
        rows, by_kernel, _ = forward_stats(forward, x, args.forwards)
        cells = [f"{med(r['event_ms'] for r in rows):.3f}"]
        cells += [f"{med(r[key] for r in rows):.1f}" for key in COLUMNS.values()]
        cells += [f"{med(r['classes'].get(c, 0.0) for r in rows):.1f}" for c in CLASSES]
        print(f"| {way} | " + " | ".join(cells) + " |")
        tops[way] = (by_kernel, len(rows))
    for way, (by_kernel, n) in tops.items():
        print(f"\n## {way}: kernels besides ours by time a forward (us)\n")
        print("| class | kernel | us a forward | launches' share of forwards |")
        print("|---|---|--:|--:|")
        ranked = sorted(by_kernel.items(), key=lambda kv: -sum(kv[1]) / n)
        for (klass, name), per in [kv for kv in ranked if kv[0][0] != "ours"][:20]:
            print(f"| {klass} | `{name}` | {sum(per) / n:.1f} | {len(per)}/{n} |")


if __name__ == "__main__":
    main()
