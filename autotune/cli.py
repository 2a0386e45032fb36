"""The command line: click commands that wire the rooms together, nothing more."""

from __future__ import annotations

import contextlib
import functools
import importlib
import math
import platform
import shlex
import signal
import sys
import time
from pathlib import Path

import click

from autotune import __version__
from autotune.compiler import Compiler, CompilerUnavailable
from autotune.device import TimingPolicy
from autotune.families import FAMILIES, UnknownFamily, UnsupportedProblem, get_family
from autotune.interrupt import (
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    arm_exit_watchdog,
    enable_watchdog,
    exit_code,
    terminate_as_interrupt,
    watch_signals,
)
from autotune.problem import KINDS, ProblemError, parse_shape
from autotune.shapes import (
    collect_shapes,
    describe_shape_sets,
    named_shapes,
    shape_set_kinds,
    shape_set_names,
)
from autotune.space import ARCH_LIMITS, SpaceError
from autotune.strategies import DEFAULT_STRATEGY, STRATEGIES, StrategyUnavailable, UnknownStrategy

DEFAULT_STORAGE = "results/autotune.db"
DEFAULT_BUDGET = 12
DEFAULT_CACHE = Path.home() / ".cache" / "autotune" / "cubins"
SHAPE_METAVAR = (
    "N=..,K=..,C=..,F=..[,B=..,stride=..] | M=..,N=..,K=.. | D=..,R=..,Cc=..,Kd=..,Kr=..,Kc=.."
)
LIBRARY_NAMES = {"cudnn": "cuDNN", "cublas": "cuBLAS"}
READABLE_COLUMNS = ("device", "family", "shape", "config", "time_ms", "gflops", "speedup")
READABLE_COLUMNS += ("efficiency",)

# Errors that describe bad input: one line, exit 2. Everything here is expected, never a traceback.
USAGE_ERRORS = (ProblemError, SpaceError, UnknownFamily, UnknownStrategy, UnsupportedProblem)


def _fail(message: str, code: int) -> None:
    from autotune.store import hide_passwords  # messages may quote --storage

    click.echo(f"autotune: {hide_passwords(message)}", err=True)
    sys.exit(code)


@contextlib.contextmanager
def writing(option: str, path: Path):
    """A place the user named that cannot be written (read-only, a directory, no space) ends the
    command in one line, exit 2, as a bad value of that option."""
    try:
        yield
    except OSError as err:
        where = err.filename or path
        _fail(f"cannot write {option} {str(where)!r}: {err.strerror or err}", 2)


def friendly_errors(fn):
    """Turn the package's expected errors into one-line messages with the right exit code."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from autotune.device import NoGpu
        from autotune.recording import MalformedRecording, RecordingError
        from autotune.report import ReportError
        from autotune.store import StoreError

        try:
            return fn(*args, **kwargs)
        except (*USAGE_ERRORS, MalformedRecording) as err:
            _fail(str(err).splitlines()[0] if str(err) else type(err).__name__, 2)
        except NoGpu as err:
            _fail(f"no usable CUDA GPU: {str(err).splitlines()[0]}", 1)
        except (
            StoreError,
            ReportError,
            CompilerUnavailable,
            StrategyUnavailable,
            RecordingError,
        ) as err:
            _fail(str(err).splitlines()[0], 1)

    return wrapper


storage_option = click.option(
    "--storage",
    default=DEFAULT_STORAGE,
    show_default=True,
    help="Results database: a SQLite file path or any SQLAlchemy URL.",
)


def shape_options(default: str = ""):
    """--shapes, --shape and --shape-file, as every command that takes problem shapes has them."""
    try:
        sets = ", ".join(shape_set_names())
    except ProblemError as err:  # the command that reads them says so, in one line
        sets = f"(unreadable: {err})"

    def decorate(fn):
        fn = click.option(
            "--shape-file",
            "shape_files",
            multiple=True,
            type=click.Path(),
            help="CSV (columns N,K,C,F[,B,stride] for conv2d, M,N,K for gemm, D,R,Cc,Kd,Kr,Kc "
            "for conv3d) or TOML file of shapes (repeatable).",
        )(fn)
        fn = click.option(
            "--shape",
            "shapes",
            multiple=True,
            metavar=SHAPE_METAVAR,
            help="One problem shape (repeatable); its field names give its kind: M= a GEMM, "
            "D= a 3D convolution, otherwise a 2D convolution.",
        )(fn)
        return click.option(
            "--shapes",
            "shape_sets",
            multiple=True,
            metavar="SET",
            help=f"Named shape set (repeatable): {sets}. {default}".strip(),
        )(fn)

    return decorate


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="autotune")
def main() -> None:
    """Autotune GPU convolution kernels: search tile and block parameters per kernel family and
    problem shape, verify every candidate against a float64 reference, time it on the GPU and
    keep every measurement in a results database."""


def entry() -> None:
    """The console script and `python -m autotune`: the commands, and once Ctrl-C or SIGTERM
    asked the process to stop, a watchdog that ends it within WATCHDOG_S whatever holds it."""
    received: list[int] = []
    finishing = []

    def stop(signum: int, _frame: object) -> None:
        received.append(signum)
        arm_exit_watchdog(exit_code(received))
        # Once: a second one would break off the clean stop the first began, and one during
        # the interpreter's exit would only print a traceback.
        if len(received) == 1 and not finishing:
            raise KeyboardInterrupt

    enable_watchdog()
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)  # as Ctrl-C, anywhere (run's own handler does the same)
    watch_signals()
    try:
        main()
    except SystemExit as done:
        finishing.append(True)
        if received or done.code in (EXIT_INTERRUPTED, EXIT_TERMINATED):
            code = exit_code(received) if received else done.code
            arm_exit_watchdog(code)  # the interpreter's exit may wait on a stuck child
            raise SystemExit(code) from None
        raise


# ---------------------------------------------------------------------------------------------
# run


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "--"
    seconds = int(seconds)
    return (
        f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
        if seconds >= 3600
        else (f"{seconds // 60}m{seconds % 60:02d}s")
    )


def _finite(param, value: float | None) -> float | None:
    # FloatRange lets nan through (every comparison with nan is false) and inf means no limit.
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a number of seconds", param=param)
    return value


class ProgressPrinter:
    """One status line on a terminal; a line per finished study (and every 15 s) otherwise."""

    def __init__(self, stream=None) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.last_print = 0.0
        self.width = 0

    def __call__(self, p) -> None:
        best = f"{p.best_gflops:,.1f} GFlop/s" if p.best_gflops else "--"
        line = (
            f"{p.study}: {p.done}/{p.planned} evals, {p.failures} failed, best {best} | "
            f"run {p.campaign_done}/{p.campaign_planned}, elapsed "
            f"{format_duration(p.elapsed_s)}, ETA {format_duration(p.eta_s)}"
        )
        if self.tty:
            pad = max(0, self.width - len(line))
            self.stream.write("\r" + line + " " * pad)
            self.width = len(line)
            if p.event == "end":
                self.stream.write("\n")
                self.width = 0
            self.stream.flush()
            return
        now = time.monotonic()
        if p.event == "end" or now - self.last_print >= 15:
            self.stream.write(line + "\n")
            self.stream.flush()
            self.last_print = now


@main.command()
@click.option(
    "--family",
    "families",
    multiple=True,
    metavar="NAME",
    help="Kernel family to tune (repeatable). Default: every registered family.",
)
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
    callback=lambda ctx, param, value: _finite(param, value),
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
    help="TOML of pinned value lists per family (search_spaces/recording/h100.toml): tune "
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
    from autotune.report import best_table, format_table
    from autotune.store import hide_passwords
    from autotune.tuner import Tuner, plan_studies

    if gpus is not None:  # the parent of one worker per GPU; the workers do the rest
        from autotune.workers_cli import run_on_gpus

        source = click.get_current_context().get_parameter_source
        if replay or source("gpu") != click.core.ParameterSource.DEFAULT:
            raise click.UsageError("--gpus cannot be combined with --gpu or --replay")
        sys.exit(run_on_gpus(gpus, storage, sys.argv[1:], share=share_database))
    chosen = [get_family(name) for name in families] or list(FAMILIES.values())
    explicit = collect_shapes(shape_sets, shapes, shape_files)
    pairs = [
        (family, problem)
        for family in chosen
        for problem in (explicit or named_shapes(family.default_shape_set))
    ]
    if replay:
        from autotune.replay import open_replay

        given = click.get_current_context().get_parameter_source("storage")
        storage = storage if given != click.core.ParameterSource.DEFAULT else None
        store, evaluator, compiler = open_replay(replay, storage, share=share_database)
        storage, no_baseline = storage or "memory", True
    else:
        store, evaluator, compiler, _ = _start_gpu(gpu, storage, cache_dir, share_database)
    try:
        info = evaluator.device
        studies, skipped = plan_studies(pairs, evaluator.limits)
        # A replay searches the subspaces its recording was made over unless told otherwise.
        pins = getattr(evaluator, "pins", {})
        if subspace or pins:
            from autotune.recording import load_pins, restrict_studies

            pins = load_pins(subspace) if subspace else pins
            studies, cut = restrict_studies(studies, pins, evaluator.limits)
            skipped += cut
        studies, too_large = _fitting(studies, info.memory_bytes)
        skipped += too_large
        for s in skipped:
            click.echo(f"autotune: skipping {s.family} {s.problem.key}: {s.reason}", err=True)
        if not studies:
            raise click.UsageError(
                "nothing to tune: no (family, shape) pair can run (" + _reasons(skipped) + ")"
            )
        click.echo(
            f"autotune: {info.name} (sm_{info.compute_capability.replace('.', '')}, "
            f"{info.sm_count} SMs, CUDA driver {info.driver_version}, NVRTC {compiler.version}); "
            f"{len(studies)} studies, strategy {strategy}, "
            f"budget {'exhaustive' if exhaustive else budget} per study; "
            f"storage {hide_passwords(storage)}",
            err=True,
        )
        versions = {
            "autotune": __version__,
            "nvrtc": compiler.version,
            "driver": info.driver_version,
            "cuda_runtime": info.runtime_version,
            "cupy": str(info.extra.get("cupy", "")),
            "python": platform.python_version(),
        }
        timing = (
            TimingPolicy(warmup=3, min_repeats=5, min_time_s=0.02)
            if quick_timing
            else (TimingPolicy())
        )
        tuner = Tuner(
            compiler,
            evaluator,
            store,
            strategy=strategy,
            seed=seed,
            timing=timing,
            # Stored, and shown by `status` to anyone who can read the database.
            command=hide_passwords(shlex.join(["autotune", *sys.argv[1:]])),
            versions=versions,
            on_progress=ProgressPrinter(),
            jobs=jobs,
            compile_processes=not replay,
        )
        if not no_baseline:
            _ceilings_and_baselines(
                evaluator, compiler, store, tuner.device_id, [s.problem for s in studies]
            )
        with terminate_as_interrupt() as signals:
            outcome = tuner.run(studies, None if exhaustive else budget, time_limit, skipped)
    finally:
        evaluator.close()
    failures = sum(s.failures for s in outcome.studies)
    click.echo(
        f"autotune: {outcome.evaluated} new evaluations in {format_duration(outcome.elapsed_s)}"
        f" ({failures} failed in total across the studies)"
        + ("; interrupted: run the same command to resume" if outcome.interrupted else ""),
        err=True,
    )
    if getattr(compiler, "cache_error", None):
        click.echo(
            f"autotune: cubins not cached ({compiler.cache_error}); compiled each time", err=True
        )
    if outcome.gpu_busy_fraction is not None:
        click.echo(
            f"autotune: GPU busy {outcome.gpu_busy_fraction:.0%} of the "
            f"{format_duration(outcome.compile_wall_s)} since compilation started",
            err=True,
        )
    table = best_table(store, device=info.name, family=None)
    tuned = {(s.study.family.name, s.study.problem.key) for s in outcome.studies}
    table = table[[(f, k) in tuned for f, k in zip(table["family"], table["shape"], strict=True)]]
    if len(table):
        summary = ["family", "shape", "config", "time_ms", "gflops", "speedup", "efficiency"]
        click.echo(format_table(table[[c for c in summary if c in table.columns]], "markdown"))
    if outcome.interrupted:
        sys.exit(exit_code(signals))


def _fitting(studies: list, memory_bytes: int) -> tuple[list, list]:
    """The studies whose problem's own arrays fit in the device's memory, and the others as
    skipped (they would only fail, one candidate after another, out of memory)."""
    from autotune.tuner import Skipped

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


def _library_name(problem) -> str:
    from autotune.campaign import baseline_library

    library = baseline_library(problem) or ""
    return LIBRARY_NAMES.get(library, library)


def _ceilings_and_baselines(evaluator, compiler, store, device_id, problems) -> None:
    """Measure what this device lacks: its ceilings once, each shape's library once (cuDNN for a
    convolution, cuBLAS for a GEMM)."""
    from autotune.campaign import ensure_ceilings, measure_baselines

    ceilings = ensure_ceilings(evaluator, compiler, store, device_id, TimingPolicy())
    if ceilings is not None and not isinstance(ceilings, list):
        click.echo(f"autotune: ceilings not measured: {ceilings.error}", err=True)
    elif ceilings:
        click.echo("autotune: measured " + _ceiling_text(ceilings), err=True)

    def report(problem, result) -> None:
        if result is None or not result.available:
            return
        m = result.measurement
        if m.status.ok:
            text = f"{m.gflops(problem.flops):,.1f} GFlop/s"
        else:
            text = f"{m.status.value}: {m.error.splitlines()[0] if m.error else ''}"
        click.echo(f"autotune: {_library_name(problem)} {problem.key}: {text}", err=True)

    results = measure_baselines(
        evaluator, compiler, store, device_id, problems, TimingPolicy(), on_result=report
    )
    for problem, result in results:
        if not result.available:
            text = result.measurement.error
            click.echo(
                f"autotune: no {_library_name(problem)} baseline ({text}); going on without",
                err=True,
            )


def _ceiling_text(ceilings) -> str:
    return ", ".join(f"{c.name} {c.value:,.0f} {c.unit}" for c in ceilings)


def _start_gpu(gpu: int, storage: str, cache_dir: Path | None = DEFAULT_CACHE, share: bool = False):
    """Open the store, start the GPU worker and register the device: (store, evaluator,
    compiler, device_id)."""
    import dataclasses

    from autotune.evaluator import GpuEvaluator
    from autotune.store import Store

    # A database that exists is opened before the GPU, so that a bad URL or a foreign database
    # fails fast; a new SQLite file only once the GPU is up, so that a machine without one is
    # left without an empty results/autotune.db.
    new_file = "://" not in storage and not Path(storage).expanduser().exists()
    store = None if new_file else Store(storage, share=share)
    click.echo("autotune: starting the GPU worker ...", err=True)
    evaluator = GpuEvaluator(gpu)
    if store is None:
        try:
            store = Store(storage, share=share)
        except BaseException:
            evaluator.close()
            raise
    compiler = Compiler(arch=evaluator.device.arch, cache_dir=cache_dir)
    device = dataclasses.replace(evaluator.device, nvrtc_version=compiler.version)
    return store, evaluator, compiler, store.register_device(device)


@main.command()
@click.option(
    "--gpu", type=click.IntRange(min=0), default=0, show_default=True, help="CUDA device index."
)
@click.option("--remeasure", is_flag=True, help="Measure again even if stored.")
@storage_option
@friendly_errors
def device(gpu, remeasure, storage) -> None:
    """Measure (once) and print the device's ceilings: FP32 FMA peak, device-to-device copy
    bandwidth (bytes read plus written) and cuBLAS SGEMM at 8192^3."""
    from autotune.campaign import ensure_ceilings

    store, evaluator, compiler, device_id = _start_gpu(gpu, storage)
    try:
        info = evaluator.device
        result = ensure_ceilings(evaluator, compiler, store, device_id, TimingPolicy(), remeasure)
    finally:
        evaluator.close()
    if result is not None and not isinstance(result, list):
        _fail(f"ceilings not measured: {result.error}", 1)
    click.echo(
        f"{info.name}: compute capability {info.compute_capability}, {info.sm_count} SMs, "
        f"{info.clock_mhz} MHz, {info.memory_bytes / 2**30:.0f} GiB, CUDA driver "
        f"{info.driver_version}, NVRTC {compiler.version}"
    )
    for _, row in store.ceilings(device=info.name).iterrows():
        click.echo(f"  {row['name']:<15} {row['value']:>12,.1f} {row['unit']:<8} {row['detail']}")


@main.command()
@shape_options()
@click.option("--remeasure", is_flag=True, help="Measure again shapes that are stored.")
@click.option(
    "--gpu", type=click.IntRange(min=0), default=0, show_default=True, help="CUDA device index."
)
@storage_option
@friendly_errors
def baseline(shape_sets, shapes, shape_files, remeasure, gpu, storage) -> None:
    """Measure the libraries on shapes: cuDNN for convolutions (through PyTorch, TF32 off,
    algorithm from cuDNN's own search), cuBLAS SGEMM for GEMMs (through CuPy, TF32 off), under
    the same timing protocol and check as the tuned kernels, and the device ceilings if missing.
    3D convolutions have no library baseline."""
    from autotune.campaign import ensure_ceilings, measure_baselines

    problems = collect_shapes(shape_sets, shapes, shape_files)
    if not problems:
        raise click.UsageError("name the shapes: --shapes SET, --shape ... or --shape-file F")
    store, evaluator, compiler, device_id = _start_gpu(gpu, storage)
    measured: dict[str, int] = {}
    for problem in problems:
        if _library_name(problem):
            measured.setdefault(_library_name(problem), 0)
    try:
        ceilings = ensure_ceilings(evaluator, compiler, store, device_id, TimingPolicy())
        if isinstance(ceilings, list):
            click.echo("autotune: measured " + _ceiling_text(ceilings), err=True)

        def report(problem, result) -> None:
            nonlocal measured
            if result is None:
                click.echo(f"{problem.key}: stored already", err=True)
            elif result.available:
                measured[_library_name(problem)] += 1
                m = result.measurement
                text = (
                    f"{m.time_ms:.4g} ms, {m.gflops(problem.flops):,.1f} GFlop/s"
                    if m.status.ok
                    else f"{m.status.value}: {m.error[:200]}"
                )
                library = _library_name(problem)
                click.echo(f"{library} {problem.key}: {text}  [{result.algorithm[:80]}]", err=True)

        results = measure_baselines(
            evaluator,
            compiler,
            store,
            device_id,
            problems,
            TimingPolicy(),
            remeasure,
            on_result=report,
        )
    finally:
        evaluator.close()
    missing = next(((p, r) for p, r in results if not r.available), None)
    if missing:
        _fail(f"no {_library_name(missing[0])} baseline: {missing[1].measurement.error}", 1)
    without = sorted({p.kind for p in problems if not _library_name(p)})
    if without:
        click.echo(f"autotune: {', '.join(without)} shapes have no library baseline", err=True)
    counts = " and ".join(f"{n} {library}" for library, n in measured.items()) or "0"
    click.echo(f"autotune: {counts} baselines measured", err=True)


# ---------------------------------------------------------------------------------------------
# best, plot


@main.command()
@click.option(
    "--format", "fmt", type=click.Choice(["markdown", "csv"]), default="markdown", show_default=True
)
@click.option("--family", default=None, help="Only this family.")
@click.option("--device", default=None, help="Only this device (name as stored).")
@click.option(
    "--problem-kind",
    "problem_kind",
    type=click.Choice(KINDS),
    default=None,
    help="Only shapes of this kind (the table's shape columns follow the kinds it holds).",
)
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write to this file instead of standard output.",
)
@click.option(
    "--columns",
    default=None,
    metavar="NAME,... | all",
    help="Columns to show, comma-separated, or all. Default: all for CSV; for Markdown "
    f"{', '.join(READABLE_COLUMNS[1:])} (and device when there are several).",
)
@storage_option
@friendly_errors
def best(fmt, family, device, problem_kind, output, columns, storage) -> None:
    """Best verified configuration per (device, family, shape), beside its library (cuDNN for
    conv2d, cuBLAS for gemm) and the device ceilings."""
    from autotune.report import best_table, format_table
    from autotune.store import Store

    if family is not None:
        get_family(family)
    table = best_table(
        Store(storage, create=False), device=device, family=family, kind=problem_kind
    )
    if not len(table):
        _fail(f"no successful evaluations stored in {storage}", 1)
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


@main.command()
@click.option("--family", required=True, help="The family whose evaluations go.")
@click.option("--device", default=None, help="Only this device's (name as stored).")
@click.option("--shape", "shape_text", default=None, metavar=SHAPE_METAVAR, help="Only this shape.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@storage_option
@friendly_errors
def forget(family, device, shape_text, yes, storage) -> None:
    """Delete a family's stored evaluations, for example after its kernel changed: they measured
    another binary, and a later `autotune run` tunes the family again from nothing. Baselines and
    ceilings stay."""
    from autotune.store import Store, hide_passwords

    get_family(family)
    problem = parse_shape(shape_text) if shape_text else None
    what = f"every {family} evaluation" + (f" on {device}" if device else "")
    what += f" at {problem.key}" if problem else ""
    where = hide_passwords(storage)
    if not yes and not click.confirm(f"Delete {what} from {where}?", default=False):
        _fail("nothing deleted", 1)
    count = Store(storage, create=False).forget(family, device, problem.key if problem else None)
    click.echo(f"autotune: deleted {count} evaluations ({what})", err=True)


@main.command()
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
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Path without suffix; a .png and a .svg are written.  [default: results/KIND]",
)
@click.option(
    "--problem-kind",
    "problem_kind",
    type=click.Choice(KINDS),
    default=None,
    help="Only shapes of this kind (conv2d, gemm, conv3d).",
)
@storage_option
@friendly_errors
def plot(family, device, kind, output, problem_kind, storage) -> None:
    """Plot the best configurations from the results database (no GPU needed)."""
    from autotune import report
    from autotune.store import Store

    if family is not None:
        get_family(family)
    output = output or Path("results") / kind
    store = Store(storage, create=False)
    with writing("--output", output):
        output.parent.mkdir(parents=True, exist_ok=True)
        if kind == "roofline":
            paths = report.plot_roofline(store, output, device=device, kind=problem_kind)
        else:
            draw = report.plot_gflops if kind == "gflops" else report.plot_speedup
            paths = draw(store, output, device=device, family=family, kind=problem_kind)
    for path in paths:
        click.echo(f"autotune: wrote {path}", err=True)


@main.command()
@click.option("--device", default=None, help="Device (name as stored). Default: the only one.")
@click.option(
    "--output-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("results"),
    show_default=True,
    help="REPORT.md goes here, its images in report/ below it.",
)
@storage_option
@friendly_errors
def report(device, output_dir, storage) -> None:
    """Write REPORT.md: ceilings, best configurations beside cuDNN, Chen's Table 1 and maxDNN's
    Table 1 forms, plots, and each seed paper's experiment beside our figures."""
    from autotune.report_md import write_report
    from autotune.store import Store

    store = Store(storage, create=False)
    with writing("--output-dir", output_dir):
        path = write_report(store, output_dir, device)
    click.echo(f"autotune: wrote {path}", err=True)


# ---------------------------------------------------------------------------------------------
# families, shapes, space


@main.command()
def families() -> None:
    """List the kernel families with their sources and tunables."""
    for family in FAMILIES.values():
        space = family.load_space()
        click.echo(f"{family.name}: {family.description}")
        click.echo(f"    paper: {family.paper}; default shapes: {family.default_shape_set}")
        click.echo(f"    layout: {family.layout}; precision: {family.precision}")
        tunables = ", ".join(f"{p.name} {list(p.values)}" for p in space.parameters)
        click.echo(f"    tunables: {tunables}")


@main.command()
@click.argument("name", required=False)
@friendly_errors
def shapes(name) -> None:
    """List the named shape sets, or the shapes of one set."""
    if name is None:
        kinds = shape_set_kinds()
        for set_name, description in describe_shape_sets().items():
            click.echo(
                f"{set_name}: {len(named_shapes(set_name))} shapes ({kinds[set_name]}); "
                f"{description}"
            )
        return
    for problem in named_shapes(name):
        click.echo(
            f"{problem.key}  ({problem.flops / 1e9:,.2f} GFLOP, "
            f"{problem.min_bytes / 1e6:,.1f} MB minimum)"
        )


@main.command()
@click.argument("family_name", metavar="FAMILY")
@click.option(
    "--shape",
    "shape_text",
    required=True,
    metavar=SHAPE_METAVAR,
    help="The problem the space is bound to.",
)
@click.option(
    "--arch",
    default="sm_90",
    show_default=True,
    type=click.Choice(sorted(ARCH_LIMITS)),
    help="Device limits to bind against (no GPU needed).",
)
@click.option(
    "--samples",
    type=click.IntRange(min=0),
    default=5,
    show_default=True,
    help="How many valid configurations to show.",
)
@click.option(
    "--compile",
    "do_compile",
    is_flag=True,
    help="Compile the samples with NVRTC and show their resource usage.",
)
@friendly_errors
def space(family_name, shape_text, arch, samples, do_compile) -> None:
    """Size of a family's valid space for one shape, with sample configurations."""
    import random

    family = get_family(family_name)
    problem = parse_shape(shape_text)
    family.check(problem)
    search_space = family.load_space()
    start = time.perf_counter()
    bound = search_space.bind(problem.fields(), ARCH_LIMITS[arch])
    took = time.perf_counter() - start
    click.echo(
        f"{family.name} {problem.key} on {arch}: {len(bound)} valid of "
        f"{search_space.cartesian_size} configurations (enumerated in {took * 1e3:.1f} ms)"
    )
    if not len(bound):
        _fail(f"{family.name} has no valid configuration at {problem.key} on {arch}", 2)
    picks = random.Random(0).sample(bound.configs, min(samples, len(bound)))
    compiler = Compiler(arch=arch) if do_compile else None
    for config in picks:
        line = f"  {config}"
        if compiler is not None:
            compiled = compiler.compile(family.plan(problem, config))
            line += (
                f"  -> {compiled.max_registers} registers, {compiled.max_smem_bytes} B smem, "
                f"{compiled.spills} B spilled, {compiled.compile_s:.2f} s"
            )
        click.echo(line)


# ---------------------------------------------------------------------------------------------
# bench: the group lives in autotune.bench, each benchmark in a module of its own.


class LazyGroup(click.Group):
    """A command group imported when it is used rather than when the command line loads:
    `bench` pulls in pandas and SQLAlchemy, 0.8 s of the 1.2 s every `--help` waited."""

    def __init__(self, target: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self._target = target  # "module:attribute"

    def _group(self) -> click.Group:
        module, _, name = self._target.partition(":")
        return getattr(importlib.import_module(module), name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return self._group().list_commands(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self._group().get_command(ctx, cmd_name)


main.add_command(
    LazyGroup(
        "autotune.bench:bench",
        name="bench",
        help="Measure the tool itself; figures go under results/bench/.",
        context_settings={"help_option_names": ["-h", "--help"]},
    )
)

from autotune.recording_cli import export_recording  # noqa: E402

main.add_command(export_recording)

from autotune.workers_cli import status  # noqa: E402

main.add_command(status)
