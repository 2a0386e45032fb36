"""`autotune bench model`: whole torchvision models, PyTorch against autotune (issue 35).

Per model (random weights, inference mode), batch and precision (fp32 with TF32 off, tf32 as
PyTorch allows by default, bf16 channels-last, and amp: the fp32 model under torch.autocast in
bf16), four ways to run the forward:

- eager: PyTorch as it is (cuDNN, benchmark mode);
- compile: torch.compile(model);
- ours: autotune.optimize(model, x) (every servable Conv2d swapped, BatchNorm folded);
- ours+compile: torch.compile over the optimized model (the custom op inside one graph);
- with --cuda-graphs, both compiled ways also under mode="reduce-overhead"; with --launcher,
  our ways once per launcher of the runtime, named ours[driver]... where not the default.

Each: the median forward time (CUDA events, after warm-up), the logits' relative L2 error
against the same model in float64, and the fraction of the batch whose top-1 class agrees with
eager's. A CSV and a Markdown table under results/bench/, and a plot of the speedups.
"""

from __future__ import annotations

import copy
import csv
import statistics
import time
from pathlib import Path

import click

from autotune.cli.options import count_option, output_option
from autotune.cli.values import StrictIntRange
from autotune.runtime.calls import DEFAULT_LAUNCHER, LAUNCHER_NAMES

DEFAULT_OUTPUT = Path("results/bench")
MODELS = ("resnet50", "vgg16")
BATCHES = (1, 32)
# bf16 runs channels-last; amp, the fp32 NCHW model under torch.autocast("cuda", bfloat16)
PRECISIONS = ("fp32", "tf32", "bf16", "amp")
DEFAULT_PRECISIONS = ("fp32", "tf32", "bf16")
LABELS = {"bf16": " channels-last", "amp": " (bf16 autocast)"}  # the table's precision column
COLUMNS = ("model", "batch", "precision", "way", "median_ms", "host_ms", "rel_error", "top1_agree")
COLUMNS += ("speedup", "exact_plans")


def _requirements():
    """torch and torchvision with a CUDA device, or a one-line refusal (exit 1)."""
    try:
        import torch
        import torchvision
    except ImportError as err:
        raise click.ClickException(f"bench model needs PyTorch and torchvision ({err})") from None
    if not torch.cuda.is_available():
        raise click.ClickException("bench model needs a CUDA GPU")
    torch.backends.cudnn.benchmark = True
    return torch, torchvision


def _precision(torch, name: str):
    """Set PyTorch's TF32 switches for `name`; the dtype and memory format its inputs take."""
    tf32 = name == "tf32"
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    if name == "bf16":
        return torch.bfloat16, torch.channels_last
    return torch.float32, torch.contiguous_format


def _median_ms(torch, forward, x, warmup: int, repeats: int) -> tuple[float, float]:
    """Medians of the forward's time on the GPU (events around it) and of the host's time to
    issue it (the call's return, nothing waited for). Where the two are close, the GPU was
    waiting for the host's launches: the forward is bound by host time per call."""
    with torch.no_grad():
        for _ in range(warmup):
            forward(x)
        torch.cuda.synchronize()
        times, host = [], []
        for _ in range(repeats):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            issued = time.perf_counter()
            forward(x)
            host.append((time.perf_counter() - issued) * 1e3)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    return statistics.median(times), statistics.median(host)


def _rel_error(torch, logits, reference) -> float:
    diff = torch.linalg.vector_norm(logits.double() - reference).item()
    return diff / torch.linalg.vector_norm(reference).item()


def bench_one(
    torch,
    torchvision,
    name,
    batch,
    precision,
    database,
    warmup,
    repeats,
    say,
    graphs=False,
    launchers=(DEFAULT_LAUNCHER,),
    layers_to: Path | None = None,
):
    torch.manual_seed(0)
    base = getattr(torchvision.models, name)(weights=None).eval().cuda()
    x32 = torch.randn(batch, 3, 224, 224, device="cuda")
    with torch.no_grad():
        reference = copy.deepcopy(base).double()(x32.double())
    # amp: the fp32 model under torch.autocast, optimize() and every way inside it, as
    # PyTorch's mixed precision runs a model (the float64 reference above, outside it).
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "amp"):
        dtype, fmt = _precision(torch, precision)
        model = base.to(dtype=dtype, memory_format=fmt)
        x = x32.to(dtype=dtype).contiguous(memory_format=fmt)
        from autotune.runtime.calls import CallError
        from autotune.runtime.dispatch import Runtime
        from autotune.runtime.lookup import LookupMiss
        from autotune.runtime.models import optimize

        # The eager ways are measured first, before any compiled way leaves its state in the
        # process (Dynamo's caches, CUDA-graph memory pools), as a user running eagerly has none.
        ways = {"eager": model}
        compiled = {"compile": torch.compile(model)}
        if graphs:  # no host time per call left: the kernels' own speed against PyTorch's
            compiled["compile+graphs"] = torch.compile(model, mode="reduce-overhead")
        plans, runtimes = {}, {}
        for launcher in launchers:
            rt = Runtime(database, launcher=launcher)  # a runtime of this model's calls alone
            try:
                ours = optimize(copy.deepcopy(model), x, runtime_=rt)
            except (LookupMiss, CallError) as err:
                raise click.ClickException(f"{name} batch {batch} {precision}: {err}") from None
            choices = rt.prepared().values()
            # The way's name says the launcher where it is not the runtime's default.
            tag = "ours" if launcher == DEFAULT_LAUNCHER else f"ours[{launcher}]"
            ways[tag], runtimes[tag] = ours, rt
            compiled[f"{tag}+compile"] = torch.compile(ours)
            if graphs:
                compiled[f"{tag}+compile+graphs"] = torch.compile(ours, mode="reduce-overhead")
            plans[tag] = f"{sum(c.exact for c in choices)}/{len(choices)}"
        if layers_to is not None:  # before any compiled way runs, as the eager ways are timed
            from autotune.bench.model_layers import write_layers

            tag = next(iter(runtimes))  # the first launcher's way
            title = f"{name} batch {batch} {precision}, {tag}"
            say(f"autotune: {title}: each convolution's time in the model ...")
            table = _layer_rows(torch, model, ways[tag], runtimes[tag], x, repeats)
            write_layers(table, layers_to / f"layers_{name}_b{batch}_{precision}", title)
        ways.update(compiled)
        rows, eager_top1, eager_ms = [], None, None
        for way, forward in ways.items():
            say(f"autotune: {name} batch {batch} {precision} {way} ...")
            with torch.no_grad():
                logits = forward(x).clone()  # a CUDA graph's output is overwritten by its next run
            ms, host_ms = _median_ms(torch, forward, x, warmup, repeats)
            top1 = logits.argmax(dim=1)
            if eager_top1 is None:
                eager_top1, eager_ms = top1, ms
            rows.append(
                {
                    "model": name,
                    "batch": batch,
                    "precision": precision + LABELS.get(precision, ""),
                    "way": way,
                    "median_ms": f"{ms:.3f}",
                    "host_ms": f"{host_ms:.3f}",
                    "rel_error": f"{_rel_error(torch, logits, reference):.2e}",
                    "top1_agree": f"{(top1 == eager_top1).float().mean().item():.3f}",
                    "speedup": f"{eager_ms / ms:.2f}",
                    # How many of the model's distinct convolutions ran a plan tuned on their own
                    # shape (the others borrowed the nearest stored shape's: runtime/lookup.py).
                    "exact_plans": plans.get(way.split("+")[0], ""),
                }
            )
            torch._dynamo.reset()
    return rows


def _layer_rows(torch, eager, ours, rt, x, repeats: int) -> list[dict]:
    """The layer table of `ours` (optimize()'s module) against `eager`'s convolutions."""
    from autotune.bench.model_layers import LayerCall, layer_ms, layer_rows
    from autotune.model.epilogue import epilogue_name
    from autotune.runtime.pricing import padding_ms
    from autotune.runtime.torch_layer import Conv2d
    from autotune.runtime.torch_tensors import call_key

    def entry(layer, args):
        x, residual = args[0], (args[1] if len(args) > 1 else None)
        fused = epilogue_name(layer.bias is not None, residual is not None, layer.activation)
        key = call_key(x, layer._weight_for(x), layer.stride, layer.padding, fused)
        found = rt.entries.get(key)
        if found is None:
            return None
        if not found.pad or found.choice.padding_ms:  # priced by the choice (calls.Request)
            return LayerCall(found.choice)
        copy_gbps = rt.catalogue(x.device.index or 0).copy_gbps
        height, width = x.shape[-2:]  # a copy that drops rows past the last window
        return LayerCall(found.choice, padding_ms(found.choice.problem, height, width, copy_gbps))

    mine = [(n, m) for n, m in ours.named_modules() if isinstance(m, Conv2d)]
    theirs = [(n, m) for n, m in eager.named_modules() if isinstance(m, torch.nn.Conv2d)]
    return layer_rows(
        layer_ms(torch, ours, x, mine, repeats, entry), layer_ms(torch, eager, x, theirs, repeats)
    )


def write_table(rows, output: Path) -> list[Path]:
    output.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = output / "model.csv", output / "model.md"
    with csv_path.open("w", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    lines = [
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "|".join("---" if c in COLUMNS[:4] else "--:" for c in COLUMNS) + "|",
    ]
    lines += ["| " + " | ".join(str(r[c]) for c in COLUMNS) + " |" for r in rows]
    md_path.write_text("\n".join(lines) + "\n")
    return [csv_path, md_path]


def write_plot(rows, output: Path) -> Path:
    """Speedup over eager PyTorch per (model, batch, precision), one bar per way."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = list(dict.fromkeys((r["model"], r["batch"], r["precision"]) for r in rows))
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(groups)), 4))
    ways = list(dict.fromkeys(r["way"] for r in rows))
    width = 0.8 / len(ways)
    for i, way in enumerate(ways):
        values = [
            next(
                (
                    float(r["speedup"])
                    for r in rows
                    if (r["model"], r["batch"], r["precision"]) == g and r["way"] == way
                ),
                0.0,
            )
            for g in groups
        ]
        ax.bar([j + i * width for j in range(len(groups))], values, width, label=way)
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(groups))])
    ax.set_xticklabels([f"{m}\nB={b}\n{p}" for m, b, p in groups], fontsize=7)
    ax.set_ylabel("forward speedup over eager PyTorch")
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = output / "model.png"
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return path


@click.command("model")
@click.option("--model", "models", multiple=True, type=click.Choice(MODELS), help="Default: both.")
@click.option(
    "--batch",
    "batches",
    multiple=True,
    type=StrictIntRange(1, 4096),
    help="Batch size (repeatable). Default: 1 and 32.",
)
@click.option(
    "--precision",
    "precisions",
    multiple=True,
    type=click.Choice(PRECISIONS),
    help="fp32 (TF32 off), tf32, bf16 (the model and input channels-last) or amp (the fp32 "
    "model and NCHW input under torch.autocast('cuda', bfloat16), as PyTorch's mixed precision "
    "runs them; optimize() called inside it). Default: fp32, tf32 and bf16.",
)
@count_option("--warmup", 5, 1000, "Forwards before timing each way (compiles included).")
@count_option("--repeats", 30, 10_000, "Timed forwards per way; the median is reported.")
@click.option(
    "--cuda-graphs",
    "graphs",
    is_flag=True,
    help="Also both compiled ways under CUDA graphs (mode='reduce-overhead'): no host time per "
    "call left, the kernels against PyTorch's.",
)
@click.option(
    "--launcher",
    "launchers",
    multiple=True,
    type=click.Choice(LAUNCHER_NAMES),
    help=f"How our kernels are launched (repeatable: one set of our ways each). Default: "
    f"{DEFAULT_LAUNCHER}. 'cupy': CuPy's kernel call; 'driver': cuLaunchKernel with the "
    "arguments' storage made once, less host time a call.",
)
@click.option(
    "--layers",
    is_flag=True,
    help="Also time each convolution of our forward inside the model (GPU time: the forward "
    "is launched while the GPU is kept busy) beside its plan's stored time, its expected time "
    "(stored, plus the padding copy, unfused epilogue and layout copies the call pays, at the "
    "copy bandwidth) and eager PyTorch's convolution (layers_MODEL_bBATCH_PRECISION.md and "
    ".csv): where the model's time goes, and which plans run slower in it than expected.",
)
@click.option("--storage", default=None, help="Results database (default: the user's).")
@output_option(
    "Directory of model.csv, model.md and model.png.", directory=True, default=DEFAULT_OUTPUT
)
def model(models, batches, precisions, warmup, repeats, graphs, launchers, layers, storage, output):
    """Whole torchvision models (ResNet-50, VGG-16) forward: eager PyTorch, torch.compile,
    autotune's convolutions, and those inside torch.compile; fp32 (TF32 off), tf32 and bf16
    channels-last; median time on the GPU and the host's time to issue a forward (close to it:
    bound by host time per call), logits' error against float64, top-1 agreement with eager,
    and how many of the convolutions ran plans tuned on their own shape."""
    torch, torchvision = _requirements()
    say = lambda line: click.echo(line, err=True)  # noqa: E731
    rows = []
    for name in models or MODELS:
        for batch in batches or BATCHES:
            for precision in precisions or DEFAULT_PRECISIONS:
                rows += bench_one(
                    torch,
                    torchvision,
                    name,
                    batch,
                    precision,
                    storage,
                    warmup,
                    repeats,
                    say,
                    graphs,
                    tuple(dict.fromkeys(launchers)) or (DEFAULT_LAUNCHER,),
                    output if layers else None,
                )
    paths = [*write_table(rows, output), write_plot(rows, output)]
    click.echo((output / "model.md").read_text())
    click.echo("wrote " + ", ".join(str(p) for p in paths))
