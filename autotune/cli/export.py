"""`autotune export`: the stored winners as a C++/CUDA tree, tune_kernel studies as kernel headers,
or the measurements as T4 files."""

from __future__ import annotations

from pathlib import Path

import click

from autotune.cli.options import (
    fail,
    families_option,
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
    type=click.Choice(["cuda", "kernel", "t4"]),
    default="cuda",
    show_default=True,
    help="cuda: per conv2d shape the fastest verified plan of any family, as kernel sources, "
    "a JSON and C++ table, a header that runs a plan and an example with its Makefile. kernel: "
    "per kernel tuned through tune_kernel, <kernel>.h with #define blocks of the best "
    "configuration and its launch per device and problem size (as Kernel Tuner's "
    "create_device_targets, chosen with -DTARGET_<device> -DPROBLEM_SIZE_<size>) and "
    "<kernel>.json (Kernel Tuner's store_results format). t4: "
    "every measurement, one Kernel Tuner T4 results file per study, with a Kernel Tuner cache "
    "file beside it for its simulation mode.",
)
@families_option("Only these families (--format kernel: these kernels, by kernel name).")
@shape_options("Default: every shape stored.")
@click.option(
    "--device",
    "devices",
    multiple=True,
    help="The device (name as stored); needed when several. --format kernel: only these "
    "devices (default: every one).",
)
@kernels_option
@protocol_option
@storage_option
@friendly_errors
def export(
    output,
    fmt,
    families,
    selection,
    devices,
    kernel_dirs,
    protocol,
    storage,
) -> None:
    """Export the results database for use outside the tool: a self-contained C++/CUDA tree of
    the tuned convolutions (--format cuda), or Kernel Tuner's T4 results files (--format t4)."""
    from autotune.export import ExportError, select, write_tree
    from autotune.store import hide_passwords

    if fmt == "kernel":
        _kernel_headers(output, families, devices, protocol, storage)
        return
    if len(devices) > 1:
        raise click.UsageError(f"--format {fmt} exports one device; name one --device")
    device = devices[0] if devices else None
    problems = selection.problems()
    if (selection.dtypes or selection.layouts) and not problems:
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


def _kernel_headers(output, kernels, devices, protocol, storage) -> None:
    """--format kernel: the tune_kernel studies' headers and JSON, from the store alone."""
    from autotune.kt.targets import TargetsError, write_targets
    from autotune.store import Store, hide_passwords

    store = Store(storage, create=False, protocol=protocol)
    try:
        with writing("--output", output):
            written, left_out = write_targets(
                store, output, devices, kernels, hide_passwords(storage)
            )
    except TargetsError as err:
        fail(str(err), 1)
    finally:
        store.close()
    for x in left_out:
        click.echo(f"autotune: left out {x['study']} on {x['device']}: {x['reason']}", err=True)
    names = ", ".join(f"{k}.h" for k in written)
    click.echo(f"autotune: wrote {names} (and their .json) to {output}", err=True)
