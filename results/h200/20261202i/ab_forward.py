"""The eager call's leaner reads (session 77) against the code before them, in one process:
ResNet-50 (bf16 channels-last, batch 32) through `optimize()` from the store, its eager forward
timed on the host (synchronized) with Conv2d's forward and the stream getter as they are, then
as session 76 had them (copied below: the weight, bias and rounded weight read as attributes,
PyTorch's stream getter looked up on torch._C each call), rounds alternating, medians. Call 6
timed the new code on another start of the machine, whose host ran PyTorch's own calls in
17-62% less time than call 5's: no comparison across starts.

    python3 ab_forward.py [--storage URL] [--rounds 15] [--forwards 20] > out.md
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch
import torchvision

from autotune.runtime import torch_tensors
from autotune.runtime.dispatch import Runtime, runtime_named
from autotune.runtime.models import optimize
from autotune.runtime.torch_layer import _FX_TRACING, Conv2d
from autotune.runtime.torch_tensors import autocast_dtype, cast_to


def before_weight_for(self, x):  # session 76's Conv2d._weight_for
    if _FX_TRACING() or self.weight_tf32 is None or not x.is_cuda:
        return self.weight
    tf32 = x.dtype is torch.float32 and torch.backends.cudnn.allow_tf32
    return self.weight_tf32 if tf32 else self.weight


def before_forward(self, x, residual=None):  # session 76's Conv2d.forward, its eager path
    fx = _FX_TRACING()
    if not fx and x.requires_grad and torch.is_grad_enabled():
        raise RuntimeError("forward only")
    eager = not fx and not torch.compiler.is_compiling() and x.is_cuda
    assert eager, "this script times eager calls on the GPU"
    if eager and self._rounded_version != self.weight._version:
        self._round_weight()
    weight, bias = before_weight_for(self, x), self.bias
    cast = None if fx else autocast_dtype(x)
    if cast is not None:
        x, residual = cast_to(x, cast), cast_to(residual, cast)
        weight, bias = self._cast_parameters(cast)
    rt = runtime_named(self._runtime_key)
    return rt.conv2d(
        x, weight, self.stride, self.padding, self.on_miss, bias, residual, self.activation
    )


def before_current_stream(device):  # session 76's torch_tensors.current_stream
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw(device)
    return torch.cuda.current_stream(device).cuda_stream


NOW = {"forward": Conv2d.forward, "stream": torch_tensors.current_stream}
BEFORE = {"forward": before_forward, "stream": before_current_stream}


def use(code: dict) -> None:
    Conv2d.forward = code["forward"]
    torch_tensors.current_stream = code["stream"]


def host_ms(model, x, forwards: int) -> float:
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(forwards):
        model(x)
        torch.cuda.synchronize()
    return (time.perf_counter() - t) * 1000 / forwards


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--storage", default=None)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--forwards", type=int, default=20)
    args = parser.parse_args()
    torch.manual_seed(0)
    base = torchvision.models.resnet50(weights=None).eval().cuda()
    model = base.to(dtype=torch.bfloat16, memory_format=torch.channels_last)
    x = torch.randn(32, 3, 224, 224, device="cuda", dtype=torch.bfloat16)
    x = x.contiguous(memory_format=torch.channels_last)
    ours = optimize(copy.deepcopy(model), x, runtime_=Runtime(args.storage))
    times = {"now": [], "before": []}
    with torch.no_grad():
        outs = {}
        for name, code in (("now", NOW), ("before", BEFORE)):
            use(code)
            outs[name] = ours(x)
            host_ms(ours, x, 5)
        assert torch.equal(outs["now"], outs["before"]), "the two codes compute the same"
        for r in range(args.rounds):
            order = (("now", NOW), ("before", BEFORE))[:: 1 if r % 2 == 0 else -1]
            for name, code in order:
                use(code)
                times[name].append(host_ms(ours, x, args.forwards))
        use(NOW)
    print("# ResNet-50's eager forward of ours: the host's time, the code now and before\n")
    print(
        f"{torch.cuda.get_device_name()}, bf16 channels-last batch 32, {args.rounds} rounds "
        f"alternating, {args.forwards} synchronized forwards a round.\n"
    )
    print("| code | median ms | lowest ms | highest ms |")
    print("|---|--:|--:|--:|")
    for name, ms in times.items():
        print(f"| {name} | {statistics.median(ms):.3f} | {min(ms):.3f} | {max(ms):.3f} |")
    ratio = statistics.median(b / n for n, b in zip(times["now"], times["before"], strict=True))
    print(f"\nBefore over now, round by round (median): {ratio:.3f}")


if __name__ == "__main__":
    main()
