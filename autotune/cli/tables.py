"""The commands that read the results database: `best`, `forget`, `plot` and `report`."""

from __future__ import annotations

from pathlib import Path

import click

from autotune.cli.options import (
    SHAPE_METAVAR,
    dtype_filter_option,
    fail,
    friendly_errors,
    kernels_option,
    output_option,
    protocol_option,
    reading_store,
    storage_option,
    writing,
)
from autotune.families import get_family, with_directories
from autotune.model.parsing import parse_shape
from autotune.model.problem import KINDS

READABLE_COLUMNS = ("device", "family", "shape", "config", "time_ms", "measurements", "gflops")
READABLE_COLUMNS += ("speedup", "efficiency")


def _problem_kind_option(help: str):
    """--problem-kind: only shapes of one kind (conv2d, gemm, conv3d)."""
    return click.option("--problem-kind", "problem_kind", type=click.Choice(KINDS), help=help)


@click.command()
@click.option(
    "--format", "fmt", type=click.Choice(["markdown", "csv"]), default="markdown", show_default=True
)
@click.option("--family", default=None, help="Only this family.")
@click.option("--device", default=None, help="Only this device (name as stored).")
@_problem_kind_option(
    "Only shapes of this kind (the table's shape columns follow the kinds it holds)."
)
@dtype_filter_option
@output_option("Write to this file instead of standard output.")
@click.option(
    "--columns",
    default=None,
    metavar="NAME,... | all",
    help="Columns to show, comma-separated, or all. Default: all for CSV; for Markdown "
    f"{', '.join(READABLE_COLUMNS[1:])} (and device when there are several, throttled when a "
    "best ran below the GPU's top clock, energy_j and baseline_energy_j when energy was observed).",
)
@kernels_option
@protocol_option
@storage_option
@friendly_errors
def best(
    fmt, family, device, problem_kind, dtype, output, columns, kernel_dirs, protocol, storage
) -> None:
    """Best verified configuration per (device, family, shape), beside its library (cuDNN for
    conv2d, cuBLAS for gemm; in the shape's dtype and layout) and the device ceilings, all
    measured under one timing protocol. A configuration's `time_ms` is the median of its
    `measurements` (a run measures its best again after the search: the fastest of many
    measured once reads low); `spread` is its first measurement's interquartile range over its
    median, `efficiency` the fraction of the peak of the units the shape's dtype uses (FMA for
    fp32, the dtype's tensor-core peak otherwise). dtype and layout columns appear when some
    shape is not fp32 NCHW (its key names them too)."""
    from autotune.reports import Scope, best_table, format_table

    if family is not None:
        get_family(family, with_directories(kernel_dirs))
    table = best_table(
        reading_store(storage, protocol, kernel_dirs),
        device=device,
        family=family,
        kind=problem_kind,
        dtype=dtype,
    )
    if not len(table):
        scope = Scope(device, family, problem_kind, dtype)
        fail(
            f"no successful evaluations of timing protocol {protocol} stored{scope} in {storage}",
            1,
        )
    text = format_table(_chosen_columns(table, columns, fmt), fmt)
    if output:
        with writing("--output", output):
            output.parent.mkdir(parents=True, exist_ok=True)
            output.write_text(text)
        click.echo(f"autotune: wrote {output}", err=True)
    else:
        click.echo(text, nl=False)


def _chosen_columns(table, columns: str | None, fmt: str):
    """The table cut to --columns; by default every column for CSV (programs read it) and a
    page-wide few for Markdown (people read it: all 26 made lines of over 1,000 characters)."""
    if columns == "all" or (columns is None and fmt == "csv"):
        return table
    if columns is None:
        names = [c for c in READABLE_COLUMNS if c in table.columns]
        if "device" in names and table["device"].nunique() == 1:
            names.remove("device")
        if "throttled" in table.columns and (table["throttled"] == "yes").any():
            names.insert(names.index("time_ms") + 1, "throttled")  # it ran held down: say so
        energies = [c for c in ("energy_j", "baseline_energy_j") if c in table.columns]
        if energies and table[energies].notna().any().any():  # observed: both sides, side by side
            names += energies
        return table[names]
    names = [c.strip() for c in columns.split(",") if c.strip()]
    unknown = [c for c in names if c not in table.columns]
    if unknown or not names:
        raise click.BadParameter(
            f"unknown column(s) {', '.join(unknown) or '(none given)'}; the columns are "
            f"{', '.join(table.columns)} or all",
            param_hint="'--columns'",
        )
    return table[names]


@click.command()
@click.option("--family", required=True, help="The family whose evaluations go.")
@click.option("--device", default=None, help="Only this device's (name as stored).")
@click.option("--shape", "shape_text", default=None, metavar=SHAPE_METAVAR, help="Only this shape.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@kernels_option
@storage_option
@friendly_errors
def forget(family, device, shape_text, yes, kernel_dirs, storage) -> None:
    """Delete a family's stored evaluations, for example after its kernel changed: they measured
    another binary, and a later `autotune run` tunes the family again from nothing. Baselines and
    ceilings stay."""
    from autotune.store import Store, hide_passwords

    get_family(family, with_directories(kernel_dirs))
    problem = parse_shape(shape_text) if shape_text else None
    what = f"every {family} evaluation" + (f" on {device}" if device else "")
    what += f" at {problem.key}" if problem else ""
    where = hide_passwords(storage)
    if not yes and not click.confirm(f"Delete {what} from {where}?", default=False):
        fail("nothing deleted", 1)
    count = Store(storage, create=False, read_only=False).forget(
        family, device, problem.key if problem else None
    )
    click.echo(f"autotune: deleted {count} evaluations ({what})", err=True)


@click.command()
@click.option("--family", default=None, help="Only this family.")
@click.option("--device", default=None, help="Only this device (name as stored).")
@click.option(
    "--kind",
    type=click.Choice(["gflops", "roofline", "speedup"]),
    default="gflops",
    show_default=True,
    help="gflops: best GFlop/s per shape beside the library (cuDNN, cuBLAS) and the FMA peak; "
    "roofline: arithmetic intensity against GFlop/s under the measured ceilings; speedup: over "
    "the library per shape.",
)
@output_option("Path without suffix; a .png and a .svg are written.  [default: results/KIND]")
@_problem_kind_option("Only shapes of this kind (conv2d, gemm, conv3d).")
@dtype_filter_option
@kernels_option
@protocol_option
@storage_option
@friendly_errors
def plot(family, device, kind, output, problem_kind, dtype, kernel_dirs, protocol, storage) -> None:
    """Plot the best configurations from the results database (no GPU needed): one panel per
    (device, family, dtype and layout), each against the peak of its dtype's units (a roofline:
    one panel per device and dtype)."""
    from autotune import reports as report

    if family is not None:
        get_family(family, with_directories(kernel_dirs))
    output = output or Path("results") / kind
    draw = {"gflops": report.plot_gflops, "roofline": report.plot_roofline}
    draw = draw.get(kind, report.plot_speedup)
    store = reading_store(storage, protocol, kernel_dirs)
    with writing("--output", output):
        output.parent.mkdir(parents=True, exist_ok=True)
        paths = draw(store, output, report.Scope(device, family, problem_kind, dtype))
    for path in paths:
        click.echo(f"autotune: wrote {path}", err=True)


@click.command()
@click.option("--device", default=None, help="Device (name as stored). Default: the only one.")
@click.option(
    "--output-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("results"),
    show_default=True,
    help="REPORT.md goes here, its images in report/ below it.",
)
@protocol_option
@storage_option
@friendly_errors
def report(device, output_dir, protocol, storage) -> None:
    """Write REPORT.md: ceilings, best configurations beside cuDNN, Chen's Table 1 and maxDNN's
    Table 1 forms, plots (these in fp32), a section per other dtype stored (best per layer
    beside cuDNN in that dtype, percent of its tensor-core peak, its roofline), and each seed
    paper's experiment beside our figures, all from the measurements of one timing protocol.
    Where the runs observed them (`--observe energy,clocks`), the tables of bests add the joules
    a run of ours and of cuDNN, and which best ran throttled."""
    from autotune.reports import write_report

    store = reading_store(storage, protocol)
    with writing("--output-dir", output_dir):
        path = write_report(store, output_dir, device)
    click.echo(f"autotune: wrote {path}", err=True)
