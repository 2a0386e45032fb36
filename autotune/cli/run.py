"""`autotune run`: the command parses and prints; tune() composes the run."""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from autotune.cli.measure import Say, ceilings_and_baselines, say_on_stderr, start_gpu, versions
from autotune.cli.options import (
    DEFAULT_BUDGET,
    DEFAULT_CACHE,
    finite_seconds,
    friendly_errors,
    kernels_option,
    shape_options,
    storage_option,
)
from autotune.cli.progress import ProgressPrinter, format_duration
from autotune.families import get_family, with_directories
from autotune.gpu.interrupt import exit_code, terminate_as_interrupt
from autotune.gpu.timing import QUICK_TIMING, TimingPolicy
from autotune.model.shapes import collect_shapes, named_shapes
from autotune.strategies import DEFAULT_STRATEGY, STRATEGIES

if TYPE_CHECKING:
    import pandas as pd

    from autotune.tuning.tuner import CampaignOutcome

SUMMARY_COLUMNS = ("family", "shape", "config", "time_ms", "gflops", "speedup", "efficiency")


class NothingToTune(ValueError):
    """No (family, shape) pair can run; the message says why."""


@dataclass(frozen=True, slots=True)
class RunRequest:
    """What `autotune run` was asked, as plain values."""

    families: tuple[str, ...] = ()
    # Kernel directories whose families join the built-in ones.
    kernel_dirs: tuple[Path, ...] = ()
    shape_sets: tuple[str, ...] = ()
    shapes: tuple[str, ...] = ()
    shape_files: tuple[str, ...] = ()
    strategy: str = DEFAULT_STRATEGY
    budget: int | None = DEFAULT_BUDGET  # None: every valid configuration
    time_limit_s: float | None = None
    seed: int = 0
    gpu: int = 0
    cache_dir: Path | None = DEFAULT_CACHE
    baselines: bool = True
    jobs: int | None = None
    quick_timing: bool = False
    replay: Path | None = None
    subspace: Path | None = None
    storage: str | None = None  # None: a replay's results in memory only
    share: bool = False
    # Stored with the run, and shown by `status` to anyone who can read the database: the
    # caller hides its passwords.
    command: str = ""


@dataclass(frozen=True, slots=True)
class RunResult:
    """What a run did, for the command to print."""

    outcome: CampaignOutcome
    signals: list[int]  # the signals received while tuning (SIGTERM: exit 143)
    cache_error: str | None  # why cubins were not cached, if they were not
    summary: pd.DataFrame  # the best of each tuned study, possibly empty


@click.command()
@click.option(
    "--family",
    "families",
    multiple=True,
    metavar="NAME",
    help="Kernel family to tune (repeatable). Default: every registered family.",
)
@kernels_option
@shape_options("Default: each family's own set.")
@click.option(
    "--strategy",
    default=DEFAULT_STRATEGY,
    show_default=True,
    type=click.Choice(sorted(STRATEGIES)),
    help="Search strategy.",
)
@click.option(
    "--budget",
    type=click.IntRange(min=1),
    default=DEFAULT_BUDGET,
    show_default=True,
    help="Evaluations per (family, shape), earlier runs included: rerunning resumes.",
)
@click.option("--exhaustive", is_flag=True, help="Evaluate every valid configuration (no budget).")
@click.option(
    "--time-limit",
    type=click.FloatRange(min=1),
    callback=finite_seconds,
    default=None,
    metavar="SECONDS",
    help="Stop the whole run after this many seconds.",
)
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Seed of the strategy and inputs."
)
@click.option(
    "--gpu", type=click.IntRange(min=0), default=0, show_default=True, help="CUDA device index."
)
@click.option(
    "--gpus",
    default=None,
    metavar="0,1,... | all",
    help="One worker process per GPU on the same storage (each this command with its own "
    "--gpu), with one progress display; workers' output goes to results/logs/.",
)
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_CACHE,
    show_default=True,
    help="Cubin cache shared between runs.",
)
@click.option(
    "--no-baseline",
    is_flag=True,
    help="Do not measure the device ceilings and the libraries (cuDNN for convolutions, cuBLAS "
    "for GEMMs) on the tuned shapes (they are measured once per device and shape, then reused).",
)
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    help="Compile processes working ahead of the GPU. Default: one per CPU core.",
)
@click.option(
    "--quick-timing",
    is_flag=True,
    help="Fewer timing samples (3 warm-up, 5 samples, 20 ms): for smoke runs.",
)
@click.option(
    "--replay",
    type=click.Path(exists=True, path_type=Path),
    default=None,
    help="Answer from a recording (file or directory) instead of the GPU: no GPU, no NVRTC, "
    "no baselines; results go to --storage if given, else to memory.",
)
@click.option(
    "--subspace",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="TOML of pinned value lists per family (autotune/data/recording/h100.toml): tune "
    "each family's space cut to those values (for exhaustive recordings).",
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
    families,
    kernel_dirs,
    shape_sets,
    shapes,
    shape_files,
    strategy,
    budget,
    exhaustive,
    time_limit,
    seed,
    gpu,
    gpus,
    cache_dir,
    no_baseline,
    jobs,
    quick_timing,
    replay,
    subspace,
    storage,
    share_database,
) -> None:
    """Tune kernel families on problem shapes and store every measurement.

    With no options: every family on its own default shape set, a budget of 12 evaluations per
    (family, shape), which takes a few minutes on an H100. Interrupt with Ctrl-C at any time; the
    same command resumes without evaluating anything again.
    """
    from autotune.reports import format_table
    from autotune.store import hide_passwords

    source = click.get_current_context().get_parameter_source
    if gpus is not None:  # the parent of one worker per GPU; the workers do the rest
        from autotune.cli.workers import run_on_gpus

        if replay or source("gpu") != click.core.ParameterSource.DEFAULT:
            raise click.UsageError("--gpus cannot be combined with --gpu or --replay")
        sys.exit(run_on_gpus(gpus, storage, sys.argv[1:], share=share_database))
    # A replay keeps its results in memory unless --storage is given.
    storage_given = source("storage") != click.core.ParameterSource.DEFAULT
    request = RunRequest(
        families=families,
        kernel_dirs=tuple(kernel_dirs),
        shape_sets=shape_sets,
        shapes=shapes,
        shape_files=shape_files,
        strategy=strategy,
        budget=None if exhaustive else budget,
        time_limit_s=time_limit,
        seed=seed,
        gpu=gpu,
        cache_dir=cache_dir,
        baselines=not no_baseline,
        jobs=jobs,
        quick_timing=quick_timing,
        replay=replay,
        subspace=subspace,
        storage=storage if storage_given or not replay else None,
        share=share_database,
        command=hide_passwords(shlex.join(["autotune", *sys.argv[1:]])),
    )
    try:
        result = tune(request, on_progress=ProgressPrinter())
    except NothingToTune as err:
        raise click.UsageError(str(err)) from None
    outcome = result.outcome
    failures = sum(s.failures for s in outcome.studies)
    click.echo(
        f"autotune: {outcome.evaluated} new evaluations in {format_duration(outcome.elapsed_s)}"
        f" ({failures} failed in total across the studies)"
        + ("; interrupted: run the same command to resume" if outcome.interrupted else ""),
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
    if outcome.interrupted:
        sys.exit(exit_code(result.signals))


def tune(request: RunRequest, say: Say = say_on_stderr, on_progress=None) -> RunResult:
    """Open the replay or the GPU, plan the studies (cut to their pins, dropping what cannot fit),
    measure the device's ceilings and libraries, run the tuner and read the summary back."""
    from autotune.reports import best_table
    from autotune.store import hide_passwords
    from autotune.tuning.tuner import Skipped, Tuner, plan_studies

    registry = with_directories(request.kernel_dirs)

    def tuned_pairs():
        chosen = [get_family(name, registry) for name in request.families]
        chosen = chosen or list(registry.values())
        explicit = collect_shapes(request.shape_sets, request.shapes, request.shape_files)
        return [
            (family, problem)
            for family in chosen
            for problem in (explicit or named_shapes(family.default_shape_set))
        ]

    # A bad family or shape fails before a GPU starts; a replay's recording may name families
    # of its own (spaces recorded elsewhere), so there they are resolved once it is open.
    pairs = None if request.replay else tuned_pairs()
    device_id = None  # a replay's device is registered by the tuner
    if request.replay:
        from autotune.replay.evaluator import open_replay

        store, evaluator, compiler = open_replay(
            request.replay, request.storage, share=request.share
        )
        storage, baselines = request.storage or "memory", False
    else:
        storage, baselines = request.storage, request.baselines
        store, evaluator, compiler, device_id = start_gpu(
            request.gpu, storage, request.cache_dir, request.share, say
        )
    try:
        info = evaluator.device
        # Spaces recorded elsewhere (Kernel Tuner's caches) bring their own studies.
        recorded = evaluator.recorded_studies(request.families) if request.replay else None
        if recorded is not None:
            studies, skipped = recorded, []
        else:
            pairs = tuned_pairs() if pairs is None else pairs
            studies, skipped = plan_studies(pairs, evaluator.limits)
            if request.replay:  # a study the recording does not hold cannot be replayed
                held = [s for s in studies if evaluator.study(s.family.name, s.problem)]
                skipped += [
                    Skipped(s.family.name, s.problem, "not in the recording")
                    for s in studies
                    if s not in held
                ]
                studies = held
        # A replay searches the subspaces its recording was made over unless told otherwise.
        pins = evaluator.pins
        if request.subspace or pins:
            from autotune.replay.subspaces import load_pins, restrict_studies

            pins = load_pins(request.subspace) if request.subspace else pins
            studies, cut = restrict_studies(studies, pins, evaluator.limits)
            skipped += cut
        studies, too_large = _fitting(studies, info.memory_bytes)
        skipped += too_large
        for s in skipped:
            say(f"autotune: skipping {s.family} {s.problem.key}: {s.reason}")
        if not studies:
            raise NothingToTune(
                "nothing to tune: no (family, shape) pair can run (" + _reasons(skipped) + ")"
            )
        budget = request.budget
        say(
            f"autotune: {info.name} (sm_{info.compute_capability.replace('.', '')}, "
            f"{info.sm_count} SMs, CUDA driver {info.driver_version}, NVRTC {compiler.version}); "
            f"{len(studies)} studies, strategy {request.strategy}, "
            f"budget {'exhaustive' if budget is None else budget} per study; "
            f"storage {hide_passwords(storage)}"
        )
        tuner = Tuner(
            compiler,
            evaluator,
            store,
            strategy=request.strategy,
            seed=request.seed,
            timing=QUICK_TIMING if request.quick_timing else TimingPolicy(),
            command=request.command,
            versions=versions(info, compiler),
            on_progress=on_progress,
            jobs=request.jobs,
            compile_processes=not request.replay,
            device_id=device_id,
        )
        if baselines:
            problems = [s.problem for s in studies]
            ceilings_and_baselines(evaluator, compiler, store, tuner.device_id, problems, say)
        with terminate_as_interrupt() as signals:
            outcome = tuner.run(studies, budget, request.time_limit_s, skipped)
    finally:
        evaluator.close()
    table = best_table(store, device=info.name, family=None)
    tuned = {(s.study.family.name, s.study.problem.key) for s in outcome.studies}
    table = table[[(f, k) in tuned for f, k in zip(table["family"], table["shape"], strict=True)]]
    table = table[[c for c in SUMMARY_COLUMNS if c in table.columns]]
    return RunResult(outcome, signals, getattr(compiler, "cache_error", None), table)


def _fitting(studies: list, memory_bytes: int) -> tuple[list, list]:
    """The studies whose problem's own arrays fit in the device's memory, and the others as
    skipped (they would only fail, one candidate after another, out of memory)."""
    from autotune.tuning.tuner import Skipped

    if not memory_bytes:  # not known (a replay, an evaluator that does not say)
        return studies, []
    kept, skipped = [], []
    for study in studies:
        need = study.problem.min_bytes
        if need > memory_bytes:
            reason = (
                f"its inputs and outputs alone take {need / 1e9:,.1f} GB, the device has "
                f"{memory_bytes / 1e9:,.1f} GB"
            )
            skipped.append(Skipped(study.family.name, study.problem, reason))
        else:
            kept.append(study)
    return kept, skipped


def _reasons(skipped: list, shown: int = 3) -> str:
    """Why nothing can run, in one line: the distinct reasons, the first few of them."""
    reasons = list(dict.fromkeys(f"{s.family} {s.problem.key}: {s.reason}" for s in skipped))
    if not reasons:
        return "no shapes"
    more = f"; {len(reasons) - shown} more above" if len(reasons) > shown else ""
    return "; ".join(reasons[:shown]) + more


__all__ = ["NothingToTune", "RunRequest", "RunResult", "run", "tune"]
