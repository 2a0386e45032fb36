"""`device`, `baseline`, `remeasure`, and opening the store and GPU for a measuring command."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import click

from autotune.cli.options import (
    DEFAULT_CACHE,
    cache_dir_option,
    count_option,
    fail,
    families_option,
    friendly_errors,
    gpu_option,
    jobs_option,
    shape_options,
    storage_option,
    time_limit_option,
)
from autotune.cli.progress import ProgressPrinter, format_duration
from autotune.cli.values import observe_option
from autotune.families import get_family
from autotune.gpu.interrupt import exit_code, terminate_as_interrupt
from autotune.gpu.timing import TimingPolicy
from autotune.model.precision import CEILING_NAMES
from autotune.model.records import TIMING_PROTOCOL

Say = Callable[[str], None]  # where a command's messages go (stderr, as one line each)


def say_on_stderr(text: str) -> None:
    click.echo(text, err=True)


def start_gpu(gpu: int, storage: str, cache_dir: Path | None = DEFAULT_CACHE):
    """The session of a command that measures on the GPU (tuning/session.py)."""
    from autotune.tuning.session import open_gpu_session

    return open_gpu_session(storage, gpu=gpu, cache_dir=cache_dir, say=say_on_stderr)


@click.command()
@gpu_option
@click.option("--remeasure", is_flag=True, help="Measure again even if stored.")
@click.option(
    "--ceiling",
    "only",
    multiple=True,
    type=click.Choice(CEILING_NAMES),
    help="Only this ceiling (repeatable); with --remeasure, measure just these again.",
)
@storage_option
@friendly_errors
def device(gpu, remeasure, only, storage) -> None:
    """Measure (once) and print the device's ceilings: FP32 FMA peak, device-to-device copy
    bandwidth (bytes read plus written), cuBLAS SGEMM at 8192^3 and the dense tensor-core peak
    of each tensor-core dtype (tc_peak_tf32/bf16/fp16): our own loop of wgmma on sm_90 (the
    units' rate, as the FMA peak is), elsewhere cuBLAS's GEMM at 8192^3 where PyTorch is
    installed."""
    from autotune.tuning.baselines import ensure_ceilings

    session = start_gpu(gpu, storage)
    store, evaluator, compiler = session.store, session.runner.evaluator, session.runner.compiler
    try:
        info = evaluator.device
        result = ensure_ceilings(
            evaluator, compiler, store, session.device_id, TimingPolicy(), remeasure, only=only
        )
    finally:
        evaluator.close()
    if result is not None and not isinstance(result, list):
        fail(f"ceilings not measured: {result.error}", 1)
    click.echo(
        f"{info.name}: compute capability {info.compute_capability}, {info.sm_count} SMs, "
        f"{info.clock_mhz} MHz, {info.memory_bytes / 2**30:.0f} GiB, CUDA driver "
        f"{info.driver_version}, NVRTC {compiler.version}"
    )
    for _, row in store.ceilings(device=info.name).iterrows():
        click.echo(f"  {row['name']:<15} {row['value']:>12,.1f} {row['unit']:<8} {row['detail']}")


@click.command()
@shape_options()
@click.option("--remeasure", is_flag=True, help="Measure again shapes that are stored.")
@click.option(
    "--observe",
    default=None,
    callback=observe_option,
    metavar="power,energy,clocks,temperature",
    help="Record these of the GPU with every library measurement, as `autotune run --observe` "
    "does with ours (NVML, the nvidia-ml-py package): power and energy per run from a 1 s "
    "window of back-to-back runs after the timed ones, SM clocks and temperature during them "
    "(a throttled measurement timed again, as ours). Stored with the baseline, shown by "
    "`autotune best` beside ours; a shape measured already needs --remeasure.",
)
@gpu_option
@storage_option
@friendly_errors
def baseline(selection, remeasure, observe, gpu, storage) -> None:
    """Measure the libraries on shapes: cuDNN for convolutions in the shape's dtype and layout
    (through PyTorch, TF32 allowed for tf32 only, algorithm from cuDNN's own search), cuBLAS
    SGEMM for GEMMs (through CuPy, TF32 off), under the same timing protocol and check as the
    tuned kernels, and the device ceilings if missing. 3D convolutions have no library
    baseline."""
    from autotune.tuning.baselines import (
        ceiling_text,
        ensure_ceilings,
        library_name,
        measure_baselines,
        readings_text,
    )

    problems = selection.problems()
    if not problems:
        raise click.UsageError("name the shapes: --shapes SET, --shape ... or --shape-file F")
    session = start_gpu(gpu, storage)
    store, evaluator, compiler = session.store, session.runner.evaluator, session.runner.compiler
    device_id = session.device_id
    measured: dict[str, int] = {}
    for problem in problems:
        if library_name(problem):
            measured.setdefault(library_name(problem), 0)
    try:
        ceilings = ensure_ceilings(evaluator, compiler, store, device_id, TimingPolicy())
        if isinstance(ceilings, list):
            click.echo("autotune: measured " + ceiling_text(ceilings), err=True)

        def report(problem, result) -> None:
            nonlocal measured
            if result is None:
                click.echo(f"{problem.key}: stored already", err=True)
            elif result.available:
                measured[library_name(problem)] += 1
                m = result.measurement
                text = (
                    f"{m.time_ms:.4g} ms, {m.gflops(problem.flops):,.1f} GFlop/s" + readings_text(m)
                    if m.status.ok
                    else f"{m.status.value}: {m.error[:200]}"
                )
                library = library_name(problem)
                click.echo(f"{library} {problem.key}: {text}  [{result.algorithm[:80]}]", err=True)

        results = measure_baselines(
            evaluator,
            compiler,
            store,
            device_id,
            problems,
            TimingPolicy(observe=observe),
            remeasure,
            on_result=report,
        )
    finally:
        evaluator.close()
    missing = next(((p, r) for p, r in results if not r.available), None)
    if missing:
        fail(f"no {library_name(missing[0])} baseline: {missing[1].measurement.error}", 1)
    without = sorted({p.kind for p in problems if not library_name(p)})
    if without:
        click.echo(f"autotune: {', '.join(without)} shapes have no library baseline", err=True)
    counts = " and ".join(f"{n} {library}" for library, n in measured.items()) or "0"
    click.echo(f"autotune: {counts} baselines measured", err=True)


@click.command()
@families_option("Only this family's studies (repeatable). Default: every stored family.")
@shape_options("Default: every stored shape.")
@count_option(
    "--top", 5, 10_000, "How many of each study's fastest configurations to measure again."
)
@click.option(
    "--no-baseline",
    is_flag=True,
    help="Do not measure the ceilings and the studies' libraries again under this protocol.",
)
@click.option(
    "--again",
    is_flag=True,
    help="Instead: measure the TOP fastest configurations of every study of the current "
    "protocol and code twice more each, stored as repeats, so that their figures and each "
    "study's best follow (for bests chosen before the timer flushed every second sample "
    "twice, 2026-12-02). Each run adds two more measurements. The libraries: `autotune "
    "baseline --remeasure`.",
)
@click.option(
    "--observe",
    default=None,
    callback=observe_option,
    metavar="power,energy,clocks,temperature",
    help="Record these of the GPU with every measurement, as `autotune run --observe` does. "
    "With clocks, a measurement that ran throttled is timed again (twice at most): a table's "
    "two sides then both stand at the GPU's top clock.",
)
@time_limit_option("Stop after this many seconds (the same command resumes).")
@gpu_option
@jobs_option
@cache_dir_option
@storage_option
@friendly_errors
def remeasure(
    families,
    selection,
    top,
    no_baseline,
    again,
    observe,
    time_limit,
    gpu,
    jobs,
    cache_dir,
    storage,
) -> None:
    """Bring stored results to the current timing protocol and the current kernels without
    searching again: for each study of this GPU measured under an older protocol, or of a
    family's previous code (its kernel source changed since; the latest other version that
    study has), check and time its TOP fastest stored configurations under the current
    protocol with the current code, and measure the studies' libraries and the device
    ceilings likewise; then each study's best is measured
    again, as a run confirms it. Old measurements stay (they keep their protocol and code);
    rerunning resumes. Follow with `autotune run` where the best may have moved. With
    --again, the current protocol's and code's TOP configurations are measured again instead."""
    from autotune.families import kernel_digests
    from autotune.reports import format_table
    from autotune.store import hide_passwords, masked_command
    from autotune.tuning.baselines import ceilings_and_baselines
    from autotune.tuning.remeasure import (
        AGAIN_MEASUREMENTS,
        again_table,
        measure_again,
        protocol_comparison,
        remeasure_studies,
    )

    for name in families:
        get_family(name)
    keys = {p.key for p in selection.problems()}
    current = kernel_digests()
    session = start_gpu(gpu, storage, cache_dir)
    store, evaluator, compiler = session.store, session.runner.evaluator, session.runner.compiler
    device_id = session.device_id
    try:
        info = evaluator.device
        studies, skipped, unreadable = remeasure_studies(
            store,
            info.name,
            evaluator.limits,
            top,
            families,
            keys,
            dtypes=selection.dtypes,
            layouts=selection.layouts,
            kernels=current,
            again=again,
        )
        for line in unreadable:
            click.echo(f"autotune: skipping {line}", err=True)
        for s in skipped:
            click.echo(f"autotune: skipping {s.family} {s.problem.key}: {s.reason}", err=True)
        if not studies:
            fail(
                f"nothing to measure again: no study of {info.name} under timing protocol "
                f"{TIMING_PROTOCOL} with the current code"
                if again
                else f"nothing to re-measure: no study of {info.name} from an older protocol "
                "or of a kernel's previous code",
                1,
            )
        previous = store.previous_kernels(info.name, current)
        doing = (
            f"measuring the {top} fastest configurations of {len(studies)} studies "
            f"{AGAIN_MEASUREMENTS} more times each"
            if again
            else f"re-measuring the {top} fastest configurations of {len(studies)} studies"
        )
        click.echo(
            f"autotune: {info.name}; {doing} under timing protocol {TIMING_PROTOCOL} with the "
            f"current code of {', '.join(sorted({s.family.name for s in studies}))}; "
            f"storage {hide_passwords(storage)}",
            err=True,
        )
        tuner = session.tuner(
            masked_command(["autotune", *sys.argv[1:]]),
            timing=TimingPolicy(observe=observe),
            on_progress=ProgressPrinter(),
            jobs=jobs,
        )
        if not no_baseline:
            problems = [s.problem for s in studies]
            ceilings_and_baselines(evaluator, compiler, store, device_id, problems, observe=observe)
        with terminate_as_interrupt() as signals:
            if again:
                measured, interrupted = measure_again(
                    tuner, studies, top, AGAIN_MEASUREMENTS, time_limit, _say_again
                )
            else:
                outcome = tuner.run(studies, None, time_limit)
    finally:
        evaluator.close()
    if again:
        if measured:
            click.echo(format_table(again_table(measured), "markdown"))
        if not interrupted and len(measured) < len(studies):
            click.echo(
                f"autotune: time limit reached: {len(measured)} of {len(studies)} studies "
                "measured again; the same command starts again from the first (narrow it with "
                "--shapes, --shape or --family)",
                err=True,
            )
        if interrupted:
            click.echo("autotune: interrupted; the measurements so far are stored", err=True)
            sys.exit(exit_code(signals))
        return
    click.echo(
        f"autotune: {outcome.evaluated} configurations measured again in "
        f"{format_duration(outcome.elapsed_s)}"
        + ("; interrupted: run the same command to resume" if outcome.interrupted else ""),
        err=True,
    )
    for old in range(1, TIMING_PROTOCOL):
        table = protocol_comparison(
            store, info.name, studies, old, old_kernels=current, new_kernels=current
        )
        if len(table):
            click.echo(f"Best GFlop/s under protocol {old} and {TIMING_PROTOCOL}:")
            click.echo(format_table(table, "markdown"))
    for name, digests in previous.items():
        left = [s for s in studies if s.family.name == name]
        for digest in reversed(digests):  # the latest first: each study beside its own previous
            table = protocol_comparison(
                store,
                info.name,
                left,
                TIMING_PROTOCOL,
                old_kernels={name: digest},
                new_kernels=current,
            )
            if len(table):
                click.echo(f"Best GFlop/s of {name}'s previous code ({digest}) and its current:")
                click.echo(format_table(table, "markdown"))
                shown = set(table["shape"])
                left = [s for s in left if s.problem.key not in shown]
    if outcome.interrupted:
        sys.exit(exit_code(signals))


def _say_again(done) -> None:
    """One line per study measured again (remeasure --again): its best before and after."""
    before, after = done.before, done.after
    moved = after is not None and before is not None and after.config != before.config
    line = (
        f"autotune: {done.study.label}: {done.measurements} measurements; best "
        f"{before.time_ms:.5g} ms -> {after.time_ms:.5g} ms"
        + (", another configuration" if moved else "")
        if before is not None and after is not None
        else f"autotune: {done.study.label}: nothing stored to measure again"
    )
    click.echo(line + (f"; stopped short: {done.failed}" if done.failed else ""), err=True)
