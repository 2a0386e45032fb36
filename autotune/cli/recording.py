"""`autotune export-recording`: studies of a results database to a recording file."""

from __future__ import annotations

import click

from autotune.cli.options import (
    PRECISION_HELP,
    SHAPE_METAVAR,
    families_option,
    friendly_errors,
    output_option,
    precision_options,
    protocol_option,
    reading_store,
    storage_option,
    subspace_option,
    writing,
)
from autotune.families import get_family
from autotune.model.shapes import collect_shapes


@click.command("export-recording")
@families_option("Only these families.")
@click.option("--shape", "shapes", multiple=True, metavar=SHAPE_METAVAR, help="Only these shapes.")
@precision_options(*PRECISION_HELP)
@click.option("--device", default=None, help="Only this device (name as stored).")
@subspace_option(
    "Recording subspaces (TOML of pinned value lists per family), as given to `run`: only "
    "evaluations inside them are kept, and exhaustiveness is judged against them."
)
@output_option(
    "The recording to write (gzip'd JSON lines, e.g. results/recordings/h100.jsonl.gz).",
    required=True,
)
@click.option("--exhaustive-only", is_flag=True, help="Leave out studies that miss a valid config.")
@protocol_option
@storage_option
@friendly_errors
def export_recording(
    families, shapes, dtypes, layouts, device, subspace, output, exhaustive_only, protocol, storage
):
    """Export stored evaluations (config, status, time) per study to a compact recording, for
    `autotune run --replay` and `autotune bench search`. Says which studies are exhaustive: every
    valid configuration of the (sub)space recorded."""
    from autotune.replay.recording import export_studies, save_recording
    from autotune.replay.subspaces import load_pins

    for name in families:
        get_family(name)
    keys = [p.key for p in collect_shapes((), shapes, (), dtypes, layouts)]
    pins = load_pins(subspace)
    store = reading_store(storage, protocol)
    studies = export_studies(store, device, families, keys, pins, protocol)
    kept = []
    for s in studies:
        space = s.space()
        missing = s.missing(space)
        state = "exhaustive" if not missing else f"{missing} valid configs missing"
        click.echo(f"{s.device} {s.name}: {len(s.outcomes)} of {len(space)} recorded, {state}")
        if missing == 0 or not exhaustive_only:
            kept.append(s)
    if not kept:
        raise click.ClickException("no study to export")
    with writing("--output", output):
        path = save_recording(kept, output)
    click.echo(f"autotune: wrote {len(kept)} studies to {path}", err=True)
