"""Why torch.compile under torch.autocast took 5-6 ms of host time a ResNet-50 forward (section
5): each compiled way (PyTorch's model, and ours from optimize() inside the autocast) timed on
the host and the GPU as `bench model` times it, with Dynamo's recompilations and graph breaks
counted (torch._dynamo.utils.counters) after warm-up and after the timed forwards.

    python3 amp_compile.py [--storage URL] > out.md
"""

from __future__ import annotations

import argparse
import copy

import torch
import torchvision

from autotune.bench.model import _median_ms
from autotune.runtime.dispatch import Runtime
from autotune.runtime.models import optimize


def counted() -> dict:
    from torch._dynamo.utils import counters

    return {
        "frames": sum(counters["frames"].values()),
        "graph breaks": sum(counters["graph_break"].values()),
        "recompiles": sum(counters["recompiles"].values()) if "recompiles" in counters else 0,
        "unique graphs": counters["stats"].get("unique_graphs", 0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--storage", default=None)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).eval().cuda()
    x = torch.randn(32, 3, 224, 224, device="cuda")
    print("# ResNet-50 batch 32 under torch.autocast('cuda', bfloat16): compiled ways\n")
    print("| way | autocast | median ms | host ms | counters after warm-up | after timing |")
    print("|---|---|--:|--:|---|---|")
    for amp in (False, True):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            base = model if amp else copy.deepcopy(model).to(torch.bfloat16)
            given = x if amp else x.to(torch.bfloat16)
            ours = optimize(copy.deepcopy(base), given, runtime_=Runtime(args.storage))
            for way, module in (("compile", base), ("ours+compile", ours)):
                torch._dynamo.reset()
                compiled = torch.compile(module)
                with torch.no_grad():
                    for _ in range(3):
                        compiled(given)
                warm = counted()
                ms, host = _median_ms(torch, compiled, given, 2, 30)
                print(f"| {way} | {amp} | {ms:.3f} | {host:.3f} | {warm} | {counted()} |")


if __name__ == "__main__":
    main()
