"""The `autotune` command: the click group, with every command module's commands on it."""

from __future__ import annotations

import click

from autotune import __version__
from autotune.bench import bench
from autotune.cli.catalogue import families, shapes, space
from autotune.cli.kt_cache import import_kt_cache
from autotune.cli.measure import baseline, device, remeasure
from autotune.cli.recording import export_recording
from autotune.cli.run import run
from autotune.cli.tables import best, forget, plot, report
from autotune.cli.workers import status


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="autotune")
def main() -> None:
    """Autotune GPU convolution kernels: search tile and block parameters per kernel family and
    problem shape, verify every candidate against a float64 reference, time it on the GPU and
    keep every measurement in a results database."""


# Command modules define plain click commands and never import this module: the imports run one
# way (no import circle), and this is the one place that says which commands exist.
# `autotune --help` lists them by name (click's order), not in this order.
for command in (
    run,
    device,
    baseline,
    remeasure,
    best,
    forget,
    plot,
    report,
    families,
    shapes,
    space,
    bench,
    export_recording,
    import_kt_cache,
    status,
):
    main.add_command(command)

__all__ = ["main"]
