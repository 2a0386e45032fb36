"""`autotune bench dispatch`: a call of autotune.conv2d beside one of PyTorch's conv2d (issue 19).

Per shape, on PyTorch tensors of one dtype and memory format (FP32 with TF32 off by default;
tf32, bf16 or fp16, channels-last or not, as `--dtype` and `--layout` say), for
autotune.conv2d and for torch.nn.functional.conv2d (cuDNN, benchmark mode, TF32 as the dtype
says), three figures, each the median over repeats of `calls` calls:

- host_us: the host's time to issue one call (nothing waits for the GPU);
- gpu_us: the GPU's time per call when the calls run back to back (the host queued them all
  behind a GPU sleep first): the kernels' own time, padding and conversions included;
- call_us: the wall time per call of a loop of calls, synchronised at its end: what a program
  calling it in a loop sees (the larger of the two above, roughly).

Each output is checked against PyTorch's float64 conv2d first.
"""

from __future__ import annotations

import csv
import statistics
import time
from dataclasses import replace
from pathlib import Path

import click

from autotune.cli.options import count_option, output_option, precision_option, storage_option
from autotune.cli.values import file_stem
from autotune.model.precision import DEFAULT_DTYPE, DEFAULT_LAYOUT
from autotune.model.problem import ConvProblem, ProblemError
from autotune.model.shapes import named_shapes
from autotune.runtime.calls import DEFAULT_LAUNCHER, LAUNCHER_NAMES

DEFAULT_SETS = ("general", "alexnet", "overfeat")
DEFAULT_OUTPUT = Path("results/bench")
GPU_CLOCK_HZ = 2.0e9  # cycles per second for torch.cuda._sleep; a longer sleep only idles
COLUMNS = (
    "set",
    "shape",
    "family",
    "exact",
    "stored_ms",
    "first_call_s",
    "rel_error",
    "ours_gpu_us",
    "ours_call_us",
    "ours_host_us",
    "cudnn_gpu_us",
    "cudnn_call_us",
    "cudnn_host_us",
    "speedup",
)


def _measure(torch, fn, calls: int, repeats: int) -> dict[str, float]:
    host, gpu, wall = [], [], []
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(repeats):
        torch.cuda.synchronize()
        began = time.perf_counter()
        for _ in range(calls):
            fn()
        host.append((time.perf_counter() - began) / calls)
        torch.cuda.synchronize()
        # Back to back on the GPU: the calls are all queued while it sleeps.
        torch.cuda._sleep(int(GPU_CLOCK_HZ * (2e-3 + calls * 4 * host[-1])))
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        gpu.append(start.elapsed_time(end) * 1e-3 / calls)
        torch.cuda.synchronize()
        began = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        wall.append((time.perf_counter() - began) / calls)
    return {
        "host_us": statistics.median(host) * 1e6,
        "gpu_us": statistics.median(gpu) * 1e6,
        "call_us": statistics.median(wall) * 1e6,
    }


def _inputs(torch, problem: ConvProblem, seed: int):
    """x and w as a PyTorch user holds them for `problem`: its storage type, channels-last for
    NHWC (the filters too, as torch.nn.Module.to(memory_format=...) leaves them)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    s = problem.input_size
    x = torch.rand(problem.B, problem.C, s, s, device="cuda", generator=g) * 2 - 1
    w = torch.rand(problem.F, problem.C, problem.K, problem.K, device="cuda", generator=g) * 2 - 1
    dtype = getattr(torch, problem.precision.storage)
    fmt = torch.channels_last if problem.nhwc else torch.contiguous_format
    return tuple(t.to(dtype).contiguous(memory_format=fmt) for t in (x, w))


def _rel_error(torch, y, x, w, stride: int) -> float:
    ref = torch.nn.functional.conv2d(x.double(), w.double(), stride=stride)
    return (torch.linalg.vector_norm(y.double() - ref) / torch.linalg.vector_norm(ref)).item()


def bench_shape(torch, rt, set_name: str, problem: ConvProblem, calls: int, repeats: int) -> dict:
    x, w = _inputs(torch, problem, seed=len(problem.key))
    s = problem.stride
    began = time.perf_counter()
    y = rt.conv2d(x, w, s, 0, "nearest")  # compiles (or reads the cubin cache) and loads
    torch.cuda.synchronize()
    first_s = time.perf_counter() - began
    error = _rel_error(torch, y, x, w, s)
    # The plan this call prepared (it may compute another layout than the call's tensors, or
    # FP32 for a tf32 call).
    served = (problem.B, problem.C, problem.input_size, problem.F, problem.K, s)
    choice = next(
        c
        for call, c in rt.prepared().items()
        if (call.B, call.C, call.H, call.F, call.KH, call.stride) == served
        and call.storage == problem.precision.storage
        and call.layout == problem.layout
    )
    del y
    ours = _measure(torch, lambda: rt.conv2d(x, w, s, 0, "nearest"), calls, repeats)
    conv = torch.nn.functional.conv2d
    for _ in range(3):  # cuDNN's benchmark mode picks its algorithm on the first calls
        conv(x, w, stride=s)
    cudnn = _measure(torch, lambda: conv(x, w, stride=s), calls, repeats)
    return {
        "set": set_name,
        "shape": problem.key,
        "family": choice.family,
        "exact": choice.exact,
        "stored_ms": round(choice.time_ms, 5) if choice.exact else None,
        "first_call_s": round(first_s, 3),
        "rel_error": float(f"{error:.2e}"),
        **{f"ours_{k}": round(v, 2) for k, v in ours.items()},
        **{f"cudnn_{k}": round(v, 2) for k, v in cudnn.items()},
        "speedup": round(cudnn["call_us"] / ours["call_us"], 3),
    }


def _geomean(values: list[float]) -> float:
    import math

    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def write(rows: list[dict], output: Path, name: str, command: str, device: str) -> list[Path]:
    output.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = output / f"{name}.csv", output / f"{name}.md"
    with csv_path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    lines = [
        "# autotune.conv2d beside PyTorch's conv2d, per call",
        "",
        f"Device: {device}. Command: `{command}`.",
        "",
        "Per shape, on PyTorch tensors in the shape's dtype and layout (pre-padded input,",
        "padding=0; cuDNN in benchmark mode, TF32 only for tf32), medians over repeats: `host`",
        "is the host's time to issue one call,",
        "`gpu` the GPU's time per call when calls run back to back (the kernels' own time, any",
        "conversion included), `call` the wall time per call of a synchronised loop. `stored` is",
        "the chosen configuration's stored median (timing protocol 2: cold L2, one run).",
        "",
    ]
    lines += _summary(rows)
    lines += [
        "",
        "| set | shape | family | stored ms | ours gpu us | ours call us | ours host us | "
        "cuDNN gpu us | cuDNN call us | cuDNN host us | speedup | rel. error |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        stored = "" if r["stored_ms"] is None else f"{r['stored_ms']:.4f}"
        lines.append(
            f"| {r['set']} | {r['shape']} | {r['family']}{'' if r['exact'] else ' (nearest)'} "
            f"| {stored} | {r['ours_gpu_us']:.1f} | {r['ours_call_us']:.1f} | "
            f"{r['ours_host_us']:.1f} | {r['cudnn_gpu_us']:.1f} | {r['cudnn_call_us']:.1f} | "
            f"{r['cudnn_host_us']:.1f} | {r['speedup']:.2f} | {r['rel_error']:.1e} |"
        )
    md_path.write_text("\n".join(lines) + "\n")
    return [csv_path, md_path]


def _summary(rows: list[dict]) -> list[str]:
    lines = [
        "| set | shapes | host us, ours (median) | host us, cuDNN (median) | "
        "shapes where ours issues no slower | speedup per call (geomean) | "
        "ours call / ours gpu (geomean) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name in dict.fromkeys(r["set"] for r in rows):
        part = [r for r in rows if r["set"] == name]
        lines.append(
            f"| {name} | {len(part)} | "
            f"{statistics.median(r['ours_host_us'] for r in part):.1f} | "
            f"{statistics.median(r['cudnn_host_us'] for r in part):.1f} | "
            f"{sum(r['ours_host_us'] <= r['cudnn_host_us'] for r in part)} | "
            f"{_geomean([r['speedup'] for r in part]):.2f} | "
            f"{_geomean([r['ours_call_us'] / r['ours_gpu_us'] for r in part]):.2f} |"
        )
    return lines


@click.command("dispatch")
@storage_option
@click.option(
    "--shape-set",
    "shape_sets",
    multiple=True,
    default=DEFAULT_SETS,
    show_default=True,
    help="Named shape sets to run (repeatable).",
)
@count_option("--calls", 20, 100_000, "Calls per measured loop.")
@count_option("--repeats", 5, 1_000, "Loops per figure (median).")
@output_option("Directory of NAME.csv and NAME.md.", directory=True, default=DEFAULT_OUTPUT)
@click.option(
    "--name",
    default="dispatch",
    show_default=True,
    callback=file_stem,
    help="Name of the files: NAME.csv and NAME.md.",
)
@click.option(
    "--launcher",
    type=click.Choice(LAUNCHER_NAMES),
    default=DEFAULT_LAUNCHER,
    show_default=True,
    help="How autotune.conv2d launches: CuPy's Function call, or cuLaunchKernel directly.",
)
@precision_option(
    "dtype",
    f"The tensors' precision: fp32 (TF32 off), tf32 (PyTorch's TF32 convolutions, ours and "
    f"cuDNN's), bf16 or fp16. Default: {DEFAULT_DTYPE}.",
)
@precision_option(
    "layout",
    f"The tensors' memory format: NCHW (contiguous) or NHWC (channels-last). Default: "
    f"{DEFAULT_LAYOUT}.",
)
def dispatch(storage, shape_sets, calls, repeats, output, name, launcher, dtype, layout) -> None:
    """Per-call cost of autotune.conv2d beside PyTorch's conv2d (cuDNN) on the same shapes;
    writes NAME.csv and NAME.md under OUTPUT. Needs a GPU and PyTorch."""
    dtype, layout = dtype or DEFAULT_DTYPE, layout or DEFAULT_LAYOUT
    try:
        problems = [
            (s, replace(p, dtype=dtype, layout=layout)) for s in shape_sets for p in named_shapes(s)
        ]
    except ProblemError as err:
        raise click.UsageError(f"--shape-set: {err}") from None
    try:
        import torch
    except ImportError:
        raise click.ClickException("bench dispatch needs PyTorch (pip install torch)") from None
    if not torch.cuda.is_available():
        raise click.ClickException("bench dispatch needs a CUDA GPU")
    from autotune.runtime.dispatch import Runtime

    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = dtype == "tf32"  # the call's TF32, and cuDNN's
    torch.backends.cuda.matmul.allow_tf32 = False
    rt = Runtime(storage, launcher=launcher)
    began = time.perf_counter()
    compiled = rt.compile_ahead([p for _, p in problems])
    click.echo(
        f"autotune: {compiled} plans compiled ahead in {time.perf_counter() - began:.1f} s",
        err=True,
    )
    device = torch.cuda.get_device_name()
    command = (
        f"autotune bench dispatch --storage {storage} "
        + " ".join(f"--shape-set {s}" for s in shape_sets)
        + f" --calls {calls} --repeats {repeats} --launcher {launcher}"
        + f" --dtype {dtype} --layout {layout}"
    )
    rows, paths = [], []
    for set_name, problem in problems:
        row = bench_shape(torch, rt, set_name, problem, calls, repeats)
        click.echo(
            f"{set_name} {problem.key}: {row['family']} call {row['ours_call_us']:.1f} us "
            f"(host {row['ours_host_us']:.1f}), cuDNN call {row['cudnn_call_us']:.1f} us "
            f"(host {row['cudnn_host_us']:.1f}), error {row['rel_error']:.1e}",
            err=True,
        )
        rows.append(row)
        # Written after every shape: a run cut short keeps what it measured.
        paths = write(rows, output, name, command, device)
    for path in paths:
        click.echo(str(path))
