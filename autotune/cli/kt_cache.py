"""`autotune import-kt-cache`: Kernel Tuner cache files (or T4 results files) to recordings."""

from __future__ import annotations

import math
from pathlib import Path

import click

from autotune.cli.options import friendly_errors, output_option, writing
from autotune.cli.values import RegularFile
from autotune.model.quoting import printable


@click.command("import-kt-cache")
@click.argument("files", nargs=-1, required=True, type=RegularFile(path_type=Path))
@output_option(
    "Directory for the recordings, one <family>_<device>.jsonl.gz per file.",
    required=True,
    directory=True,
)
@click.option(
    "--family",
    default=None,
    help="Name of the recorded space's family. Default: the kernel's name in the file (a T4 "
    "file names none: its directory's name).",
)
@click.option(
    "--device",
    default=None,
    help="Device name. Default: the one in the file (a T4 file names none: its file name).",
)
@friendly_errors
def import_kt_cache(files, output, family, device):
    """Read Kernel Tuner cache files (JSON, gzip'd or not) or T4 results files and write each as
    a recording (problem kind "recorded") for `autotune run --replay` and `autotune bench
    search`. The configurations in a file are its space: a brute-force cache holds every
    configuration its restrictions allow; failures stay failures."""
    from autotune.kt.cache import read_kt_file, slug
    from autotune.model.records import Status
    from autotune.replay.recording import save_recording

    # Every file is read before any is written: a bad file among them leaves nothing half done.
    studies = [(path, read_kt_file(path, family, device)) for path in files]
    for path, study in studies:
        ran = sum(o.status is Status.OK for o in study.outcomes.values())
        product = math.prod(len(v) for _, v in study.tunables)
        target = output / f"{slug(study.family)}_{slug(study.device)}.jsonl.gz"
        with writing("--output", output):
            save_recording([study], target)
        click.echo(
            # The names come from the file: escaped, never obeyed by the terminal.
            f"{printable(path)}: {printable(study.family)} {study.problem.key} on "
            f"{printable(study.device)}: "
            f"{len(study.outcomes)} configurations of {product} in the product of the value "
            f"lists, {ran} ran, {len(study.outcomes) - ran} failed -> {printable(target)}"
        )
