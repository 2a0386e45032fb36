"""`autotune run`: the command parses and prints; tune() composes the run."""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from autotune.cli.estimate import Eta, describe_estimate, plan_estimate
from autotune.cli.measure import say_on_stderr
from autotune.cli.options import (
    DEFAULT_BUDGET,
    DEFAULT_DTYPE,
    DEFAULT_LAYOUT,
    PRECISION_HELP,
    cache_dir_option,
    families_option,
    friendly_errors,
    gpu_option,
    jobs_option,
    kernels_option,
    seed_option,
    shape_options,
    storage_option,
    subspace_option,
    time_limit_option,
)
from autotune.cli.progress import ProgressPrinter, format_duration, time_limit_note
from autotune.cli.values import RegularFile, StrictIntRange, observe_option, ray_address
from autotune.gpu.interrupt import exit_code, terminate_as_interrupt
from autotune.model.campaigns import FULL, QUICK, campaign_names
from autotune.model.shapes import ShapeSelection
from autotune.strategies import DEFAULT_STRATEGY, STRATEGIES
from autotune.tuning.campaign import NothingToTune, RunRequest, Say, open_campaign

if TYPE_CHECKING:
    import pandas as pd

    from autotune.tuning.studies import CampaignOutcome

SUMMARY_COLUMNS = ("family", "shape", "config", "time_ms", "measurements", "gflops", "speedup")
SUMMARY_COLUMNS += ("efficiency",)
RUN_PRECISION_HELP = (
    PRECISION_HELP[0].removesuffix(f"Default: {DEFAULT_DTYPE}.")
    + "A family paired with a dtype it does not compute is skipped (one line; an error when "
    "no pair is left). Default: per family, fp32 where it computes fp32, else every dtype it "
    "declares (a tensor-core family: its tf32, bf16 and fp16).",
    PRECISION_HELP[1].removesuffix(f"Default: {DEFAULT_LAYOUT}.")
    + "Default: per family, NCHW where it reads NCHW, else every layout it declares (NHWC "
    "for a tensor-core family that reads only NHWC).",
)


@dataclass(frozen=True, slots=True)
class RunResult:
    """What a run did, for the command to print."""

    outcome: CampaignOutcome
    signals: list[int]  # the signals received while tuning (SIGTERM: exit 143)
    cache_error: str | None  # why cubins were not cached, if they were not
    summary: pd.DataFrame  # the best of each tuned study, possibly empty


@click.command()
@click.option(
    "--campaign",
    type=click.Choice(campaign_names()),
    default=None,
    help=f"A named set of studies. {QUICK!r}: the seeds' headline families on a few shapes and "
    f"one tensor-core study, about two minutes on an H100 (what a bare `autotune run` does); "
    f"{FULL!r}: every family on its own shape set ({FULL!r} takes --dtype and --layout). "
    "Not with --family or shape options.",
)
@families_option("Kernel family to tune (repeatable). Default: every registered family.")
@kernels_option
@shape_options("Default: each family's own set.", RUN_PRECISION_HELP)
@click.option(
    "--strategy",
    default=DEFAULT_STRATEGY,
    show_default=True,
    type=click.Choice(sorted(STRATEGIES)),
    help="Search strategy.",
)
@click.option(
    "--budget",
    type=StrictIntRange(min=1),
    default=DEFAULT_BUDGET,
    show_default=True,
    help="Evaluations per (family, shape), earlier runs included: rerunning resumes.",
)
@click.option("--exhaustive", is_flag=True, help="Evaluate every valid configuration (no budget).")
@time_limit_option("Stop the whole run after this many seconds.")
@seed_option("Seed of the strategy and inputs.")
@gpu_option
@click.option(
    "--gpus",
    default=None,
    metavar="0,1,... | all",
    help="One worker process per GPU of this host, each handed the next study (longest first) "
    "as it finishes one, with one progress display; workers' output goes to results/logs/.",
)
@click.option(
    "--ray",
    "ray_address",
    is_flag=False,
    flag_value="",
    default=None,
    callback=ray_address,
    metavar="[ADDRESS]",
    help="Tune on a Ray cluster: one actor per GPU, studies handed out longest first. ADDRESS: "
    "'auto' (the cluster this machine belongs to), host:6379 or ray://host:10001; alone, "
    "the cluster RAY_ADDRESS names, else a new one on this machine. Needs the 'ray' extra.",
)
@cache_dir_option
@click.option(
    "--no-baseline",
    is_flag=True,
    help="Do not measure the device ceilings and the libraries (cuDNN for convolutions, cuBLAS "
    "for GEMMs) on the tuned shapes (they are measured once per device and shape, then reused).",
)
@jobs_option
@click.option(
    "--quick-timing",
    is_flag=True,
    help="Fewer timing samples (3 warm-up, 5 samples, 20 ms): for smoke runs.",
)
@click.option(
    "--observe",
    default=None,
    callback=observe_option,
    metavar="power,energy,clocks,temperature",
    help="Record these of the GPU with every evaluation, through NVML (the nvidia-ml-py "
    "package): power and energy per run from a 1 s window of back-to-back runs after the timed "
    "ones, SM and memory clocks and temperature during them. With clocks, a measurement whose "
    "clock dropped, or stayed below the GPU's top, is timed again (twice at most) and flagged "
    "throttled in `autotune best` if it still was. The libraries' baselines this run measures "
    "are observed the same way; `autotune best` puts both energies side by side.",
)
@click.option(
    "--replay",
    type=RegularFile(dir_okay=True, path_type=Path),
    default=None,
    help="Answer from a recording (file or directory) instead of the GPU: no GPU, no NVRTC, "
    "no baselines; results go to --storage if given, else to memory.",
)
@subspace_option(
    "TOML of pinned value lists per family (autotune/data/recording/h100.toml): tune "
    "each family's space cut to those values (for exhaustive recordings)."
)
@storage_option
@click.option(
    "--share-database",
    is_flag=True,
    help="Add autotune's tables to a database that already holds another application's "
    "(refused otherwise, so that a mistyped --storage changes nothing).",
)
@friendly_errors
def run(
    campaign,
    families,
    kernel_dirs,
    selection,
    strategy,
    budget,
    exhaustive,
    time_limit,
    seed,
    gpu,
    gpus,
    ray_address,
    cache_dir,
    no_baseline,
    jobs,
    quick_timing,
    observe,
    replay,
    subspace,
    storage,
    share_database,
) -> None:
    """Tune kernel families on problem shapes and store every measurement.

    With no options: the quick campaign (--campaign quick), nine studies of 12 evaluations (58 s
    from a cold start on an H200); --campaign full tunes every family on its own shape set.
    Interrupt with Ctrl-C at any time; the same command resumes without evaluating anything
    again.
    """
    from autotune.reports import format_table
    from autotune.store import masked_command

    source = click.get_current_context().get_parameter_source
    if exhaustive and source("budget") != click.core.ParameterSource.DEFAULT:
        raise click.UsageError("--exhaustive evaluates every configuration: drop --budget")
    if ray_address is not None and (
        replay or gpus is not None or source("gpu") != click.core.ParameterSource.DEFAULT
    ):
        raise click.UsageError("--ray cannot be combined with --gpu, --gpus or --replay")
    if gpus is not None and (replay or source("gpu") != click.core.ParameterSource.DEFAULT):
        raise click.UsageError("--gpus cannot be combined with --gpu or --replay")
    campaign = _campaign(campaign, families, selection, replay, subspace)
    # A replay keeps its results in memory unless --storage is given.
    storage_given = source("storage") != click.core.ParameterSource.DEFAULT
    request = RunRequest(
        campaign=campaign,
        families=families,
        kernel_dirs=tuple(kernel_dirs),
        selection=selection,
        strategy=strategy,
        budget=None if exhaustive else budget,
        time_limit_s=time_limit,
        seed=seed,
        gpu=gpu,
        cache_dir=cache_dir,
        baselines=not no_baseline,
        jobs=jobs,
        quick_timing=quick_timing,
        observe=observe,
        replay=replay,
        subspace=subspace,
        storage=storage if storage_given or not replay else None,
        share=share_database,
        command=masked_command(["autotune", *sys.argv[1:]]),
    )
    if gpus is not None:  # the driver of one worker process per GPU; the workers tune
        from autotune.cli.workers import run_on_gpus

        sys.exit(run_on_gpus(gpus, request))
    if ray_address is not None:  # the driver: Ray's actors do the rest
        from autotune.cli.ray_run import run_on_ray

        sys.exit(run_on_ray(ray_address or None, request))
    try:
        result = tune(request, on_progress=ProgressPrinter())
    except NothingToTune as err:
        raise click.UsageError(str(err)) from None
    outcome = result.outcome
    failures = sum(s.failures for s in outcome.studies)
    click.echo(
        f"autotune: {outcome.evaluated} new evaluations in {format_duration(outcome.elapsed_s)}"
        f" ({failures} failed in total across the studies)"
        + time_limit_note(outcome.short)
        + ("; interrupted: run the same command to resume" if outcome.interrupted else ""),
        err=True,
    )
    unsearched = [s for s in outcome.studies if s.predates and not s.evaluated]
    if unsearched:
        names = sorted({name for s in unsearched for name in s.predates})
        click.echo(
            f"autotune: {len(unsearched)} studies were searched before {', '.join(names)} "
            "became tunable (their evaluations ran at the old value) and have spent their "
            f"budget: raise --budget to search {'it' if len(names) == 1 else 'them'}",
            err=True,
        )
    if result.cache_error:
        click.echo(
            f"autotune: cubins not cached ({result.cache_error}); compiled each time", err=True
        )
    if outcome.gpu_busy_fraction is not None:
        click.echo(
            f"autotune: GPU busy {outcome.gpu_busy_fraction:.0%} of the "
            f"{format_duration(outcome.compile_wall_s)} since compilation started",
            err=True,
        )
    if len(result.summary):
        click.echo(format_table(result.summary, "markdown"))
    if not replay or storage_given:
        click.echo(next_steps(request.storage or "", storage_given), err=True)
    if outcome.interrupted:
        sys.exit(exit_code(result.signals))


def tune(request: RunRequest, say: Say = say_on_stderr, on_progress=None) -> RunResult:
    """Open the replay or the GPU, plan the studies, measure the device's ceilings and libraries,
    run the tuner and read the summary back."""
    from autotune.reports import best_table

    campaign = open_campaign(request, say)
    eta: list[Eta] = []  # set once the plan is known; the tuner reports through it

    def progress(p) -> None:
        on_progress(eta[0](p) if eta else p)

    try:
        tuner = campaign.tuner(request, progress if on_progress else None)
        studies = campaign.studies
        if not request.replay:  # a recording answers at once: nothing to estimate
            estimate = plan_estimate(campaign, tuner, request.budget)
            say(describe_estimate(estimate))
            eta.append(Eta(estimate))
        campaign.measure_libraries([s.problem for s in studies], say)
        with terminate_as_interrupt() as signals:
            outcome = tuner.run(studies, request.budget, request.time_limit_s, campaign.skipped)
    finally:
        campaign.stop()
    # The summary reads the tuned families' current code only, as `autotune best` does: a
    # faster row of a kernel's older text is no result of this run's code.
    runner = tuner.runner
    campaign.store.read_current({s.family.name: runner.kernel_digest(s.family) for s in studies})
    table = best_table(campaign.store, device=campaign.info.name, family=None)
    tuned = {(s.study.family.name, s.study.problem.key) for s in outcome.studies}
    table = table[[(f, k) in tuned for f, k in zip(table["family"], table["shape"], strict=True)]]
    table = table[[c for c in SUMMARY_COLUMNS if c in table.columns]]
    return RunResult(outcome, signals, campaign.cache_error, table)


def _campaign(campaign, families, selection: ShapeSelection, replay, sub):
    """The campaign a run tunes: the one named, or the quick one where nothing else says what
    to tune (a replay or a subspace keeps tuning every family, as its recording was made)."""
    chosen = families or selection.named
    precisions = selection.dtypes or selection.layouts
    if campaign is None:
        nothing_named = not (chosen or precisions or replay or sub)
        return QUICK if nothing_named else None
    if chosen:
        raise click.UsageError(
            "--campaign names its families and shapes itself: not with --family, --shapes, "
            "--shape or --shape-file"
        )
    if campaign != FULL and precisions:
        raise click.UsageError(
            f"the {campaign} campaign names its own dtypes and layouts: --dtype and --layout "
            f"go with --campaign {FULL} or with --family and shape options"
        )
    return campaign


def next_steps(storage: str, storage_given: bool) -> str:
    """Where the results went and the commands that read them (they need no GPU)."""
    from autotune.store import hide_passwords

    where = f" --storage {shlex.quote(hide_passwords(storage))}" if storage_given else ""
    commands = [
        (f"autotune best{where}", "the best configuration per shape, beside cuDNN"),
        (f"autotune plot{where}", "GFlop/s per shape beside cuDNN (PNG and SVG)"),
        (f"autotune report{where} --output-dir report", "REPORT.md with tables and plots"),
        (f"autotune run --campaign {FULL}{where}", "every family on its own shape set"),
    ]
    width = max(len(command) for command, _ in commands)
    return "\n".join(
        [f"autotune: results stored in {hide_passwords(storage)}; next (only run needs a GPU):"]
        + [f"  {command:<{width}}  {what}" for command, what in commands]
    )


__all__ = ["NothingToTune", "RunRequest", "RunResult", "open_campaign", "run", "tune"]
