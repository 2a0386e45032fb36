"""The command-line side of campaigns over several GPUs: `run --gpus`, `run --ray`'s summary and
`autotune status`."""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path

import click

from autotune.cli.options import (
    STORAGE_DEFAULT_TEXT,
    StrictFloatRange,
    default_storage,
    finite_number,
)
from autotune.cli.progress import ProgressPrinter, campaign_line, format_duration
from autotune.gpu.interrupt import terminate_as_interrupt

LOG_ROOT = Path("results") / "logs"


def run_on_gpus(
    gpus_text: str, storage: str, argv: list[str], log_root: Path = LOG_ROOT, share: bool = False
) -> int:
    """`autotune run ... --gpus LIST`: one `autotune run ... --gpu i` per GPU on the same
    storage; returns the exit code (non-zero if any worker failed, 130 after Ctrl-C)."""
    from autotune.store import hide_passwords
    from autotune.tuning.workers import (
        GpuListError,
        gpu_worker_specs,
        parse_gpus,
        run_workers,
        visible_gpu_count,
    )

    try:
        gpus = parse_gpus(gpus_text, visible_gpu_count)
    except GpuListError as err:
        raise click.UsageError(str(err)) from None
    if not argv or argv[0] != "run":
        raise click.UsageError("--gpus: cannot tell the run command's own arguments")
    log_dir = log_root / datetime.now().strftime("run-%Y%m%d-%H%M%S")
    specs = gpu_worker_specs(argv, gpus, log_dir)
    click.echo(
        f"autotune: {len(specs)} workers (GPUs {', '.join(map(str, gpus))}) on storage "
        f"{hide_passwords(storage)}; their output goes to {log_dir}/",
        err=True,
    )
    # A scheduler's SIGTERM stops the workers the way Ctrl-C does (each is told, then waited for).
    with terminate_as_interrupt():
        outcome = run_workers(
            specs, storage, on_progress=ProgressPrinter(campaign_line), share=share
        )
    return report_outcome(outcome, len(specs))


def report_outcome(outcome, workers: int) -> int:
    """A campaign's last lines (each failed worker with why, then the totals) and its exit code:
    the same for `--gpus` and `--ray`."""
    for name in outcome.failed:
        code = outcome.returncodes[name]
        click.echo(f"autotune: worker {name} failed (exit code {code}); its log ends:", err=True)
        click.echo(outcome.errors.get(name, ""), err=True)
    click.echo(
        f"autotune: {outcome.evaluations} new evaluations by {workers} workers in "
        f"{format_duration(outcome.elapsed_s)}"
        + ("; interrupted: run the same command to resume" if outcome.interrupted else "")
        + (f"; {len(outcome.failed)} failed" if outcome.failed else ""),
        err=True,
    )
    return outcome.exit_code


MAX_MINUTES = 60 * 24 * 366 * 10  # ten years: more is no window, and 1e300 overflowed


@click.command()
@click.option(
    "--minutes",
    type=StrictFloatRange(min=0, min_open=True, max=MAX_MINUTES),
    callback=finite_number,
    default=5.0,
    show_default=True,
    help="Count each run's evaluations of this many last minutes.",
)
@click.option("--all", "all_runs", is_flag=True, help="Every run, not only the active ones.")
@click.option(
    "--storage",
    default=default_storage,
    show_default=STORAGE_DEFAULT_TEXT,
    help="Results database: a SQLite file path or any SQLAlchemy URL.",
)
def status(minutes, all_runs, storage) -> None:
    """Per-run (per-worker) progress from the database: the runs that are unfinished, hold a
    study or recorded lately, with host, command, evaluations and lease left; then the studies
    claimed now."""
    from autotune.reports import claims_status, format_status, run_status
    from autotune.store import Store, StoreError

    try:
        with Store(storage, create=False) as store:
            runs = run_status(store, minutes, all_runs)
            claims = claims_status(store)
    except StoreError as err:
        click.echo(f"autotune: {err}", err=True)
        sys.exit(1)
    click.echo(format_status(runs, claims, minutes), nl=False)


__all__ = ["report_outcome", "run_on_gpus", "status"]
