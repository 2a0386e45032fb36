"""Where one runtime call's host time goes (issue 35: ours 27.0 us a call against cuDNN's 25.2,
ResNet-50's bf16 shapes on the H200). Each step of `runtime/torch_tensors.py`'s `call` and
`Runtime.launch` timed alone on the GPU machine, beside the whole call and PyTorch's conv2d.

Run from the checkout root, after ResNet-50's bf16 shapes are tuned into AUTOTUNE_DB:
    python3 results/h200/20261130e/host_steps.py > host_steps.md

A timing is the median over REPEATS loops of CALLS calls, the GPU synchronised before each loop:
20 calls of a launch stay well inside the launch queue, so what is timed is the host's issue,
never a wait for the queue to drain. cProfile is not used: its hook costs about what a small
step does."""

import statistics
import sys
import time

import torch

from autotune.runtime import torch_tensors as tt
from autotune.runtime.dispatch import Runtime

CALLS, REPEATS = 20, 300
SHAPES = [  # (B, C, H, F, K, stride, epilogue): ResNet-50 layers at batch 32, pre-padded
    (32, 64, 56, 256, 1, 1, ""),
    (32, 64, 58, 64, 3, 1, ""),
    (32, 512, 14, 2048, 1, 1, ""),
    (32, 64, 56, 64, 1, 1, "bias_relu"),
    (32, 256, 56, 64, 1, 1, "bias_relu"),
]


def timed(fn, launches: bool) -> float:
    samples = []
    for _ in range(REPEATS):
        if launches:
            torch.cuda.synchronize()
        began = time.perf_counter()
        for _ in range(CALLS):
            fn()
        samples.append((time.perf_counter() - began) / CALLS)
    if launches:
        torch.cuda.synchronize()
    return statistics.median(samples) * 1e6


def main() -> None:
    torch.backends.cudnn.benchmark = True
    rt = Runtime(None)
    dev = torch.cuda.current_device()
    print(
        f"# Host time of one call's steps, us ({torch.cuda.get_device_name()}, python "
        f"{sys.version.split()[0]}, torch {torch.__version__})\n"
    )
    print("Medians of 300 loops of 20 calls; bf16, channels-last, padding 0.\n")
    rows = [measure_shape(rt, dev, *shape) for shape in SHAPES]
    names = list(dict.fromkeys(n for _, result in rows for n in result))
    print("| step | " + " | ".join(r[0] for r in rows) + " |")
    print("|---|" + "--:|" * len(rows))
    for n in names:
        print(f"| {n} | " + " | ".join(f"{r[1][n]:.2f}" if n in r[1] else "" for r in rows) + " |")


def measure_shape(rt, dev, b, c, h, f, k, s, epi):
    """(the column's title, {step: host us}) for one shape."""
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.rand(b, c, h, h, device="cuda", generator=g).to(torch.bfloat16)
    w = torch.rand(f, c, k, k, device="cuda", generator=g).to(torch.bfloat16)
    x = x.contiguous(memory_format=torch.channels_last)
    w = w.contiguous(memory_format=torch.channels_last)
    bias = torch.rand(f, device="cuda").to(torch.bfloat16) if epi else None
    act = "relu" if epi else ""
    y = rt.conv2d(x, w, s, 0, "nearest", bias, None, act)  # prepares the shape
    key = tt.call_key(x, w, s, 0, epi, "NHWC")
    entry = rt.entries[key]
    stream = tt.current_stream(dev)
    ptrs = {"x": x.data_ptr(), "w": w.data_ptr(), "y": y.data_ptr()}
    if entry.fixed:
        ptrs.update(entry.fixed)
    if entry.epilogue:
        ptrs["bias"] = bias.data_ptr()
    fmt = torch.channels_last
    conv = torch.nn.functional.conv2d
    for _ in range(3):
        conv(x, w, bias, stride=s)
    steps = {
        "PyTorch conv2d (cuDNN)": (lambda: conv(x, w, bias, stride=s), True),
        "ours: Runtime.conv2d, whole": (
            lambda: rt.conv2d(x, w, s, 0, "nearest", bias, None, act),
            True,
        ),
        "ours: torch_tensors.call": (
            lambda: tt.call(rt, x, w, s, 0, "nearest", bias, None, act),
            True,
        ),
        "layout_of(x)": (lambda: tt.layout_of(x), False),
        "call_key(...)": (lambda: tt.call_key(x, w, s, 0, epi, "NHWC"), False),
        "rt.entries.get(key)": (lambda: rt.entries.get(key), False),
        "torch.empty (the output)": (
            lambda: torch.empty(entry.out_dims, dtype=x.dtype, device=x.device, memory_format=fmt),
            False,
        ),
        "empty_like_layout": (lambda: tt.empty_like_layout(x, entry.out_dims, "NHWC"), False),
        "w.contiguous(channels_last)": (lambda: w.contiguous(memory_format=fmt), False),
        "x.data_ptr() % 16": (lambda: x.data_ptr() % 16, False),
        "x.get_device()": (lambda: x.get_device(), False),
        "current_stream": (lambda: tt.current_stream(dev), False),
        "torch.compiler.is_compiling()": (torch.compiler.is_compiling, False),
        "cupy getDevice": (lambda: __import__("cupy").cuda.runtime.getDevice(), False),
        "rt.launch (all ops)": (
            lambda: rt.launch(
                entry, ptrs["x"], ptrs["w"], ptrs["y"], stream, None, ptrs.get("bias")
            ),
            True,
        ),
    }
    for i, op in enumerate(entry.ops):
        steps[f"op {i}: {type(op).__name__}"] = (lambda op=op: op(ptrs, stream), True)
    steps.update(raw_launches(entry.ops[-1], stream))
    strides = torch.empty(entry.out_dims, device="cuda", memory_format=fmt).stride()
    steps["torch.empty_strided (the output)"] = (
        lambda: torch.empty_strided(entry.out_dims, strides, dtype=x.dtype, device=x.device),
        False,
    )
    steps["x.new_empty_strided (the output)"] = (
        lambda: x.new_empty_strided(entry.out_dims, strides),
        False,
    )
    result = {name: timed(fn, launches) for name, (fn, launches) in steps.items()}
    title = (
        f"C={c} H={h} F={f} K={k} {epi or 'plain'} ({entry.choice.family}, "
        f"{len(entry.ops)} ops, workspace {entry.workspace_bytes} B)"
    )
    return title, result


def raw_launches(op, stream) -> dict:
    """The last op's kernel launched with its own argument list, two ways: ctypes with C values
    made once, and CuPy's compiled binding with ints (either tree's DriverLaunch has fn, dims
    and params)."""
    import ctypes

    from cupy_backends.cuda.api import driver

    if not hasattr(op, "params"):
        return {}
    dims = [getattr(d, "value", d) for d in op.dims]
    lib = ctypes.CDLL("libcuda.so.1")
    launch = lib.cuLaunchKernel
    launch.restype = ctypes.c_int
    c_args = (ctypes.c_void_p(op.fn), *(ctypes.c_uint(d) for d in dims), ctypes.c_void_p(stream))
    params, address = op.params, ctypes.addressof(op.params)
    return {
        "raw: ctypes cuLaunchKernel, C values made once": (
            lambda: launch(*c_args, params, None),
            True,
        ),
        "raw: CuPy's binding launchKernel, ints": (
            lambda: driver.launchKernel(op.fn, *dims, stream, address, 0),
            True,
        ),
    }


if __name__ == "__main__":
    main()
