"""The `data` commands: the committed campaign files, the shipped bests, the kernel digests."""

from __future__ import annotations

from datetime import timezone
from pathlib import Path

import click

from autotune.cli.options import fail, friendly_errors, kernels_option, storage_option, writing
from autotune.cli.values import RegularFile


@click.group()
def data() -> None:
    """The project's committed results (campaign files under results/campaigns/, read beneath
    the default database), the best configurations shipped as package data, and the kernel
    digests stored with every evaluation."""


@data.command()
@click.argument("output", type=RegularFile(must_exist=False, path_type=Path))
@click.option(
    "--since",
    type=click.DateTime(),
    default=None,
    help="Only runs started (baselines, ceilings measured) at or after this UTC time.",
)
@click.option(
    "--best-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Also write each device's best configurations here (autotune/data/best in the tree).",
)
@kernels_option
@storage_option
@friendly_errors
def pack(output: Path, since, best_dir, kernel_dirs, storage: str) -> None:
    """Write the runs of --storage (those since --since) into OUTPUT, a new gzip'd campaign file
    (results/campaigns/<name>.db.gz) that is committed and never rewritten; with --best-dir,
    the package data of best configurations too (current code only)."""
    from autotune.families import kernel_digests, with_directories
    from autotune.store import Store
    from autotune.store.campaigns import pack_campaign, write_best_files

    when = since.replace(tzinfo=timezone.utc) if since is not None else None
    registry = with_directories(kernel_dirs)  # a bad directory is refused before any write
    if best_dir is not None:
        with writing("--best-dir", best_dir):
            best_dir.mkdir(parents=True, exist_ok=True)
    with Store(storage, create=False) as store:
        with writing("OUTPUT", output):
            counts = pack_campaign(store, output, when)
        click.echo(
            f"autotune: wrote {output} ({output.stat().st_size} bytes): "
            + ", ".join(f"{n} {name}" for name, n in counts.items())
        )
        if best_dir is not None:
            store.read_current(kernel_digests(registry))
            with writing("--best-dir", best_dir):
                written = write_best_files(store, best_dir)
            for path in written:
                click.echo(f"autotune: wrote {path}")
            if not written:
                click.echo(
                    "autotune: no best configurations of the current code to ship (rows without "
                    "a kernel digest are stale until `autotune data backfill`)",
                    err=True,
                )


@data.command()
@click.option("--yes", is_flag=True, help="Assert that the rows are of the current code.")
@kernels_option
@storage_option
@friendly_errors
def backfill(yes: bool, kernel_dirs, storage: str) -> None:
    """Give every evaluation stored without a kernel digest (before schema version 6) its
    family's current digest. This asserts that those measurements are of the code as it is
    now: run it once, on results known to be, with --yes."""
    from autotune.families import kernel_digests, with_directories
    from autotune.store import Store

    if not yes:
        fail("backfill asserts the stored rows measured the current code: add --yes", 2)
    digests = kernel_digests(with_directories(kernel_dirs))  # before the file is opened
    with Store(storage, create=False, read_only=False) as store:
        changed = store.backfill_digests(digests)
    click.echo(f"autotune: gave {changed} evaluations their family's current kernel digest")
