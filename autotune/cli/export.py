"""`autotune export`: the stored winners as a C++/CUDA tree, or the measurements as T4 files."""

from __future__ import annotations

from pathlib import Path

import click

from autotune.cli.options import (
    fail,
    friendly_errors,
    kernels_option,
    protocol_option,
    reading_store,
    shape_options,
    storage_option,
    writing,
)
from autotune.families import with_directories
from autotune.model.problem import ConvProblem
from autotune.model.shapes import collect_shapes


@click.command("export")
@click.option(
    "--output",
    type=click.Path(path_type=Path),
    required=True,
    help="The directory to write: new, empty, or an earlier export (whose kernels and build "
    "outputs are replaced).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["cuda", "t4"]),
    default="cuda",
    show_default=True,
    help="cuda: per conv2d shape the fastest verified plan of any family, as kernel sources, "
    "a JSON and C++ table, a header that runs a plan and an example with its Makefile. t4: "
    "every measurement, one Kernel Tuner T4 results file per study, with a Kernel Tuner cache "
    "file beside it for its simulation mode.",
)
@click.option("--family", "families", multiple=True, metavar="NAME", help="Only these families.")
@shape_options("Default: every shape stored.")
@click.option("--device", default=None, help="The device (name as stored); needed when several.")
@kernels_option
@protocol_option
@storage_option
@friendly_errors
def export(
    output,
    fmt,
    families,
    shape_sets,
    shapes,
    shape_files,
    dtypes,
    layouts,
    device,
    kernel_dirs,
    protocol,
    storage,
) -> None:
    """Export the results database for use outside the tool: a self-contained C++/CUDA tree of
    the tuned convolutions (--format cuda), or Kernel Tuner's T4 results files (--format t4)."""
    from autotune.export import ExportError, select, write_tree
    from autotune.store import hide_passwords

    problems = collect_shapes(shape_sets, shapes, shape_files, dtypes, layouts)
    if (dtypes or layouts) and not problems:
        raise click.UsageError("--dtype and --layout apply to the shapes named: name them too")
    registry = with_directories(kernel_dirs)
    store = reading_store(storage, protocol, kernel_dirs)
    try:
        if fmt == "t4":
            from autotune.kt.t4 import write_t4

            with writing("--output", output):
                written = write_t4(store, output, device, families, problems, registry)
            click.echo(f"autotune: wrote {written} T4 results files under {output}", err=True)
            return
        others = [p for p in problems if not isinstance(p, ConvProblem)]
        if others:
            fail(f"--format cuda exports 2D convolutions; {others[0].key} is a {others[0].kind}", 2)
        selection = select(store, device, families, problems, registry)
        with writing("--output", output):
            write_tree(selection, output, hide_passwords(storage))
    except ExportError as err:
        fail(str(err), 1)
    count = len(selection.plans)
    click.echo(
        f"autotune: wrote {count} plan{'' if count == 1 else 's'} ({len(selection.excluded)} left "
        f"out) to {output}; build with `make -C {output} -j`",
        err=True,
    )
