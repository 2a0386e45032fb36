"""The host's time of one eager convolution of ours, piece by piece: ResNet-50 (bf16
channels-last, batch 32) through `optimize()` from the store, two of its layers (one fusing a
bias and ReLU, one a bias, residual and ReLU), each called whole and then by each layer of the
call beneath the last (the layer's forward, the runtime's call, the tensor call, the launch of
the prepared entry, its driver launches alone), beside PyTorch's own calls (an allocation, an
elementwise op, cuDNN's convolution, an empty module). Host time a call: `calls` calls after a
synchronize, short enough that the GPU's queue never fills, medians.

Call 3 found ResNet-50's eager forward of ours bound by the host, about 45 us a convolution.

    python3 call_cost.py [--storage URL] [--calls 200] [--repeats 30] > out.md
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch
import torchvision

from autotune.runtime.dispatch import Runtime, runtime_named
from autotune.runtime.models import optimize
from autotune.runtime.torch_layer import Conv2d
from autotune.runtime.torch_tensors import call, call_key, current_stream, epilogue_name


def host_us(fn, calls: int, repeats: int) -> float:
    """Median host microseconds a call of fn, `calls` calls a repeat after a synchronize."""
    for _ in range(calls):
        fn()
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t) * 1e6 / calls)
    return statistics.median(times)


def entry_of(m: Conv2d, x: torch.Tensor, residual: torch.Tensor | None):
    """The runtime's prepared entry of m's call on x."""
    epilogue = epilogue_name(m.bias is not None, residual is not None, m.activation)
    key = call_key(x, m.weight, m.stride, m.padding, epilogue, "NHWC")
    return runtime_named(m._runtime_key).entries[key]


def pieces(m: Conv2d, x: torch.Tensor, residual: torch.Tensor | None) -> dict:
    """Each layer of one call of m, as a function of nothing (an entry without a workspace or
    counters: its driver launches take the call's buffers alone)."""
    rt = runtime_named(m._runtime_key)
    w, b = m.weight, m.bias
    s, p, act, miss = m.stride, m.padding, m.activation, m.on_miss
    layout = "NHWC"
    entry = entry_of(m, x, residual)
    y = m(x, residual) if residual is not None else m(x)
    stream = current_stream(x.get_device())
    ptrs = {"x": x.data_ptr(), "w": w.data_ptr(), "y": y.data_ptr(), **entry.fixed}
    if entry.epilogue:
        ptrs["bias"] = b.data_ptr()
        if residual is not None:
            ptrs["residual"] = residual.data_ptr()
    dims, strides = tuple(y.shape), y.stride()
    r_ptr = None if residual is None else residual.data_ptr()
    extra = () if residual is None else (residual,)
    ident = torch.nn.Identity()

    def driver_launches():
        for op in entry.ops:
            op(ptrs, stream)

    return {
        "the layer, called (nn.Module's __call__)": lambda: m(x, *extra),
        "its forward": lambda: m.forward(x, *extra),
        "the runtime's conv2d": lambda: rt.conv2d(x, w, s, p, miss, b, residual, act),
        "the tensor call (torch_tensors.call)": lambda: call(
            rt, x, w, s, p, miss, b, residual, act
        ),
        "the prepared entry's launch (Runtime.launch)": lambda: rt.launch(
            entry, x.data_ptr(), w.data_ptr(), y.data_ptr(), stream, None, b.data_ptr(), r_ptr
        ),
        f"its driver launches alone ({len(entry.ops)})": driver_launches,
        "the call's key (call_key)": lambda: call_key(x, w, s, p, entry.epilogue, layout),
        "PyTorch: the output's allocation (new_empty_strided)": lambda: x.new_empty_strided(
            dims, strides
        ),
        "PyTorch: cuDNN's conv2d with the bias": lambda: torch.nn.functional.conv2d(x, w, b, s, p),
        "PyTorch: a ReLU (out of place)": lambda: torch.relu(x),
        "PyTorch: an empty module called": lambda: ident(x),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--storage", default=None)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    torch.manual_seed(0)
    base = torchvision.models.resnet50(weights=None).eval().cuda()
    model = base.to(dtype=torch.bfloat16, memory_format=torch.channels_last)
    x = torch.randn(32, 3, 224, 224, device="cuda", dtype=torch.bfloat16)
    x = x.contiguous(memory_format=torch.channels_last)
    ours = optimize(copy.deepcopy(model), x, runtime_=Runtime(args.storage))
    seen: dict[str, tuple] = {}

    def keep(name):
        def hook(module, inputs):
            seen.setdefault(name, tuple(inputs))

        return hook

    layers = {n: m for n, m in ours.named_modules() if isinstance(m, Conv2d)}
    handles = [m.register_forward_pre_hook(keep(n)) for n, m in layers.items()]
    with torch.no_grad():
        ours(x)
        for h in handles:
            h.remove()

        def simple(n):  # the entry reads and writes the call's buffers alone
            inputs = seen[n]
            e = entry_of(layers[n], inputs[0], inputs[1] if len(inputs) > 1 else None)
            return not (e.workspace_bytes or e.counters or e.pad is not None)

        plain = next(n for n, m in layers.items() if not m.takes_residual and simple(n))
        added = next(n for n, m in layers.items() if m.takes_residual and simple(n))
        print("# One eager convolution of ours, host time by layer of the call\n")
        print(
            f"{torch.cuda.get_device_name()}, PyTorch {torch.__version__}, ResNet-50 bf16 "
            f"channels-last batch 32, {args.calls} calls a repeat, medians of {args.repeats}.\n"
        )
        for name in (plain, added):
            m, inputs = layers[name], seen[name]
            xi, residual = inputs[0], (inputs[1] if len(inputs) > 1 else None)
            print(f"## `{name}`: {m.extra_repr()}, input {tuple(xi.shape)}\n")
            print("| what | host us a call |")
            print("|---|--:|")
            for what, fn in pieces(m, xi, residual).items():
                print(f"| {what} | {host_us(fn, args.calls, args.repeats):.2f} |")
            print()


if __name__ == "__main__":
    main()
