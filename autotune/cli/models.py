"""`autotune tune-model`: tune every convolution of a torchvision model (runtime/model_tuning)."""

from __future__ import annotations

import click

from autotune.cli.options import (
    count_option,
    fail,
    friendly_errors,
    gpu_option,
    storage_option,
    time_limit_option,
)
from autotune.cli.progress import ProgressPrinter, time_limit_note
from autotune.cli.values import StrictIntRange
from autotune.model.precision import DTYPES


def torchvision_model(name: str):
    """A torchvision model by its constructor's name, random weights, in inference mode; a
    one-line exit when PyTorch or torchvision is missing (1) or no such model exists (2)."""
    try:
        import torch  # noqa: F401
        import torchvision
    except ImportError as err:
        fail(f"this command needs PyTorch and torchvision ({err})", 1)
    builder = getattr(torchvision.models, name, None)
    if name.startswith("_") or not callable(builder):
        fail(f"torchvision has no model {name!r} (for example resnet50, vgg16)", 2)
    return builder(weights=None).eval()


@click.command("tune-model")
@click.option(
    "--model", "model_name", required=True, help="A torchvision model: resnet50, vgg16, ..."
)
@click.option(
    "--batch",
    type=StrictIntRange(1, 4096),
    default=32,
    show_default=True,
    help="Images per forward: the model's convolutions are tuned at this batch size.",
)
@click.option("--dtype", type=click.Choice(DTYPES), default="fp32", show_default=True)
@count_option("--budget", 60, 100_000, "Evaluations per (family, shape); a run again resumes.")
@click.option("--family", "families", multiple=True, help="Tune only these families (repeatable).")
@gpu_option
@time_limit_option(
    "Stop tuning after this many seconds of it (the GPU worker's start and the device's "
    "measurements come before the tuning and are not counted); the same command resumes."
)
@storage_option
@friendly_errors
def tune_model_command(model_name, batch, dtype, budget, families, gpu, time_limit, storage):
    """Tune every distinct convolution of a torchvision model at an input of BATCH x 3 x 224 x
    224, in DTYPE, with every family that computes it; the results are ordinary studies in the
    results database, which autotune.optimize(model) then runs."""
    model = torchvision_model(model_name)
    import torch

    from autotune.runtime.calls import CallError
    from autotune.runtime.model_tuning import tune_model

    x = torch.randn(batch, 3, 224, 224)
    try:
        done = tune_model(
            model,
            x,
            dtype,
            database=storage,
            budget=budget,
            families=list(families) or None,
            gpu=gpu,
            time_limit_s=time_limit,
            say=lambda line: click.echo(line, err=True),
            on_progress=ProgressPrinter(),  # a study's evaluations and the run's, as `run` shows
        )
    except CallError as err:  # no family computes the model's convolutions in that dtype
        fail(str(err), 2)
    refused = [c for c in done.convolutions if c.problem is None]
    click.echo(
        f"{model_name}: {len(done.convolutions)} convolutions, {done.studies} studies, "
        f"{done.evaluated} new evaluations in {dtype}"
        + time_limit_note(done.short)
        + (
            f"; not served: {', '.join(f'{c.name} ({c.refused})' for c in refused)}"
            if refused
            else ""
        )
    )
