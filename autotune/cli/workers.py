"""The command-line side of campaigns over several GPUs: `run --gpus`, the scheduler's progress
and summary (also `run --ray`'s), and `autotune status`."""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path

import click

from autotune.cli.options import storage_option
from autotune.cli.progress import ProgressPrinter, campaign_line, format_duration, time_limit_note
from autotune.cli.values import StrictFloatRange, finite_number
from autotune.gpu.interrupt import terminate_as_interrupt

LOG_ROOT = Path("results") / "logs"


def run_on_gpus(gpus_text: str, request, log_root: Path = LOG_ROOT) -> int:
    """`autotune run ... --gpus LIST`: the campaign scheduled over one worker process per GPU of
    this host; returns the exit code (non-zero if a worker failed, 130 after Ctrl-C)."""
    from autotune.store import hide_passwords
    from autotune.tuning.processes import (
        GpuListError,
        LocalProcesses,
        parse_gpus,
        visible_gpu_count,
    )
    from autotune.tuning.worker_session import CampaignFactory

    try:
        gpus = parse_gpus(gpus_text, visible_gpu_count)
    except GpuListError as err:
        raise click.UsageError(str(err)) from None
    request = checked_request(request)
    log_dir = log_root / datetime.now().strftime("run-%Y%m%d-%H%M%S")
    transport = LocalProcesses(CampaignFactory(request), gpus, log_dir, jobs=request.jobs)
    click.echo(
        f"autotune: {len(gpus)} workers (GPUs {', '.join(map(str, gpus))}) on storage "
        f"{hide_passwords(request.storage)}; their output goes to {log_dir}/",
        err=True,
    )
    return schedule(transport, request)


def checked_request(request):
    """The request with absolute paths (a worker's working directory may be another), refused
    here, before any worker starts, where nothing can run or the storage cannot be opened."""
    from autotune.store import Store
    from autotune.tuning.campaign import NothingToTune, check_runnable
    from autotune.tuning.worker_session import absolute_paths

    request = absolute_paths(request)
    try:
        check_runnable(request)
    except NothingToTune as err:
        raise click.UsageError(str(err)) from None
    Store(request.storage, share=request.share).close()
    return request


def schedule(transport, request) -> int:
    """Run the campaign through the scheduler with one progress line, then its summary."""
    from autotune.tuning.campaign import NothingToTune
    from autotune.tuning.scheduler import run_campaign

    # A scheduler's SIGTERM stops the workers the way Ctrl-C does (each is told, then waited for).
    with terminate_as_interrupt():
        outcome = run_campaign(
            transport,
            request.storage,
            on_progress=ProgressPrinter(campaign_line),
            time_limit_s=request.time_limit_s,
            share=request.share,
            command=request.command,
        )
    if isinstance(outcome.plan_error, NothingToTune):  # on this GPU (its limits) nothing fits
        raise click.UsageError(str(outcome.plan_error))
    return report_outcome(outcome, len(outcome.returncodes))


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
        + time_limit_note(outcome.short)
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
@storage_option
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


__all__ = ["checked_request", "report_outcome", "run_on_gpus", "schedule", "status"]
