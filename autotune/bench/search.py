"""`autotune bench search`: every strategy on every exhaustive recorded space, many seeds, fixed
budgets: mean fraction of the optimum, P score against random search, time per ask."""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import click
import pandas as pd

from autotune.bench.kt_search import (
    DEFAULT_WARM,
    KT_DEFAULT,
    KT_PREFIX,
    KT_SLOW,
    TRANSFER_GPU,
    kt_available,
    kt_unknown,
    other_device_cases,
    other_devices,
    run_kt,
    write_caches,
)
from autotune.bench.scoring import Case
from autotune.bench.search_report import summarise, write_outputs
from autotune.bench.search_runs import load_runs, save_runs
from autotune.cli.options import friendly_errors, writing
from autotune.cli.values import MAX_JOBS, RegularFile, StrictIntRange, file_stem
from autotune.model.problem import Problem
from autotune.model.quoting import quoted
from autotune.model.space import Config
from autotune.replay.recording import load_recordings
from autotune.strategies import (
    DEFAULT_STRATEGY,
    STRATEGIES,
    StrategyUnavailable,
    make_strategy,
)
from autotune.strategies.transfer import (
    PER_SHAPE,
    Transfer,
    device_seeds,
    transfer_seeds,
    warm_across_devices,
)

BUDGETS = (10, 20, 25, 50, 100, 200)  # 20: the target for transfer
TRANSFER = "transfer"  # the default strategy started at the neighbouring shapes' optima
# Seeds for strategies that take seconds per ask (GP refits on every ask)
SLOW = {"gp": 5, **KT_SLOW}


MAX_SEEDS = 10_000
MAX_BUDGET = 100_000  # evaluations of one run: every recorded space is far smaller

_CASES: list[Case] = []  # set before the worker pool forks, so spaces need no pickling


def neighbours_of(case: Case, cases: Sequence[Case]) -> list[tuple[Problem, list[Config]]]:
    """The best configs of every other recorded shape of the same family and device, fastest
    first (what the tuner finds in the store), for leave-one-shape-out transfer."""
    out = []
    for other in cases:
        if other is case or other.family != case.family or other.device != case.device:
            continue
        if other.problem.key == case.problem.key:
            continue
        ok = sorted((t, c.to_json(), c) for c, t in other.ok.items() if t is not None)
        out.append((other.problem, [c for _, _, c in ok[:PER_SHAPE]]))
    return out


def make_for(name: str, case: Case, seed: int, inner: str):
    if name == TRANSFER:
        seeds = transfer_seeds(case.problem, case.space, neighbours_of(case, _CASES))
        return Transfer(make_strategy(inner, case.space, seed), seeds)
    if name == TRANSFER_GPU:
        seeds = device_seeds(case.space, other_devices(case, _CASES))
        return Transfer(make_strategy(inner, case.space, seed), seeds)
    if name == DEFAULT_WARM:
        others = [o.times for o in other_device_cases(case, _CASES)]
        return warm_across_devices(make_strategy(inner, case.space, seed), case.space, others)
    return make_strategy(name, case.space, seed)


def run_one(task: tuple[str, int, int, int, str]) -> tuple[str, int, int, list[float], float, int]:
    """(strategy, case, seed, budget, inner) -> the best fraction after each evaluation, the
    seconds spent in ask() and tell(), and how many asks."""
    name, case_index, seed, budget, inner = task
    case = _CASES[case_index]
    if name.startswith(KT_PREFIX):
        trajectory, spent, evaluations = run_kt(name, case, case_index, seed, budget)
        return name, case_index, seed, trajectory, spent, evaluations
    strategy = make_for(name, case, seed, inner)
    best = math.inf
    trajectory: list[float] = []
    spent = 0.0
    for _ in range(min(budget, len(case.space))):
        start = time.perf_counter()
        config = strategy.ask()
        spent += time.perf_counter() - start
        if config is None:
            break
        told = case.times[config]  # KeyError here: the strategy left the valid space
        start = time.perf_counter()
        strategy.tell(config, told)
        spent += time.perf_counter() - start
        if case.ok[config] is not None:
            best = min(best, case.ok[config])
        trajectory.append(case.optimum_ms / best if math.isfinite(best) else 0.0)
    return name, case_index, seed, trajectory, spent, len(trajectory)


def start_worker() -> None:
    """Pool initializer. The worker processes already share the cores, and a library's own
    thread pool (torch's, under Optuna's GP sampler) would oversubscribe them: two processes
    with two torch threads each on two cores made a 200-ask GP run take minutes, not 19 s.
    A forked worker also inherits the command's handlers, which turn SIGTERM into a
    KeyboardInterrupt: the pool ends its workers with SIGTERM once the work is done, and each
    one idle at that moment printed that interrupt's traceback. Workers end on SIGTERM as
    Python's default has it, and ignore Ctrl-C: the command, not each worker, stops the pool."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ["OMP_NUM_THREADS"] = "1"  # for a torch imported after the fork
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def benchmark(
    cases: list[Case],
    strategies: Sequence[str],
    seeds: int,
    budgets: Sequence[int] = BUDGETS,
    jobs: int = 1,
    inner: str = DEFAULT_STRATEGY,
    slow: dict[str, int] | None = None,
    on_done=None,
    runs: Path | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(results, ask times): results has COLUMNS plus per-space random expectations; ALL rows
    average the spaces; the default strategy's rows are repeated as 'default'. With `runs`, the
    runs that file holds (to the same top budget) are reused, and every run is written to it."""
    global _CASES
    _CASES = list(cases)
    slow = SLOW if slow is None else slow
    top = max(budgets)
    earlier = load_runs(runs, cases, top) if runs else []
    done = {(name, ci, seed) for name, ci, seed, *_ in earlier}
    tasks = []
    for name in strategies:
        for ci, case in enumerate(cases):
            if name == TRANSFER and not neighbours_of(case, cases):
                continue  # no other shape of the family: nothing to transfer from
            if name in (TRANSFER_GPU, DEFAULT_WARM) and not other_devices(case, cases):
                continue
            for seed in range(min(seeds, slow.get(name, seeds))):
                if (name, ci, seed) not in done:
                    tasks.append((name, ci, seed, top, inner))
    results = [r for r in earlier if r[0] in strategies]
    reused = len(results)
    caches = write_caches(cases) if any(n.startswith(KT_PREFIX) for n in strategies) else None
    if jobs > 1 and len(tasks) > 1:
        with mp.get_context("fork").Pool(jobs, initializer=start_worker) as pool:
            for r in pool.imap_unordered(run_one, tasks, chunksize=1):
                results.append(r)
                if runs:
                    save_runs(runs, cases, top, [r])
                if on_done:
                    on_done(len(results) - reused, len(tasks))
    else:
        for task in tasks:
            results.append(run_one(task))
            if runs:
                save_runs(runs, cases, top, results[-1:])
            if on_done:
                on_done(len(results) - reused, len(tasks))
    if caches is not None:
        caches.cleanup()
    return summarise(cases, results, budgets, inner)


def available(names: Sequence[str], cases: list[Case]) -> tuple[list[str], list[str]]:
    """The strategies that can run here, and why the others cannot."""
    ok, skipped = [], []
    probe = cases[0].space
    for name in names:
        if name in (TRANSFER, TRANSFER_GPU, DEFAULT_WARM):
            ok.append(name)
            continue
        if name.startswith(KT_PREFIX):
            missing = kt_available()
            why = f"{name}: {missing}" if missing else kt_unknown(name)
            if why:
                skipped.append(why)
            else:
                ok.append(name)
            continue
        try:
            make_strategy(name, probe, 0)
        except StrategyUnavailable as err:
            skipped.append(str(err))
            continue
        ok.append(name)
    return ok, skipped


def load_cases(paths: Sequence[str | Path]) -> tuple[list[Case], list[str]]:
    cases, left_out = [], []
    for study in load_recordings(paths):
        case = Case.of(study)
        if case is None:
            left_out.append(
                f"{study.name}: not exhaustive ({study.missing()} valid configs missing)"
            )
        else:
            cases.append(case)
    return cases, left_out


@click.command("search")
@click.option(
    "--recordings",
    "recordings",
    multiple=True,
    type=RegularFile(dir_okay=True, path_type=Path),  # a FIFO would block the read forever
    default=[Path("results/recordings")],
    show_default=True,
    help="Recording files or directories of *.jsonl.gz (repeatable); only exhaustive studies "
    "count.",
)
@click.option(
    "--strategies",
    default=",".join(
        [*STRATEGIES, TRANSFER, TRANSFER_GPU, DEFAULT_WARM, *(KT_PREFIX + k for k in KT_DEFAULT)]
    ),
    show_default=True,
    help="Comma-separated strategies; kt_<name> is Kernel Tuner's strategy <name> in its "
    "simulation mode (needs the 'bench' extra); 'default_warm' is the default strategy as run "
    "starts it when the store holds the same space on other GPUs (their results as seeds and "
    "prior); 'transfer_gpu' is the default strategy seeded from the same space's best configs "
    "on the other GPUs; 'transfer' is the default strategy seeded leave-one-shape-out.",
)
@click.option("--seeds", type=StrictIntRange(1, MAX_SEEDS), default=20, show_default=True)
@click.option(
    "--budgets",
    default=",".join(map(str, BUDGETS)),
    show_default=True,
    help="Comma-separated evaluation budgets.",
)
@click.option("--jobs", type=StrictIntRange(1, MAX_JOBS), default=None, help="Worker processes.")
@click.option(
    "--output-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("results/bench"),
    show_default=True,
)
@click.option(
    "--name",
    "stem",
    default="search",
    show_default=True,
    callback=file_stem,
    help="Output file stem: <name>.csv, .md, .png, .svg under --output-dir.",
)
@click.option(
    "--runs",
    type=RegularFile(must_exist=False, path_type=Path),
    default=None,
    help="Keep every run's trajectory in this file (gzip'd JSON lines) and reuse the runs it "
    "already holds, so that a later call can add or redo strategies.",
)
@click.option(
    "--few-seeds",
    default=",".join(f"{n}={k}" for n, k in SLOW.items()),
    show_default=True,
    metavar="NAME=SEEDS,...",
    help="Fewer seeds for the strategies that take seconds per run.",
)
@friendly_errors
def search(recordings, strategies, seeds, budgets, jobs, output_dir, stem, runs, few_seeds):
    """Every strategy on every exhaustive recorded space: search.csv, search.md, search.png."""
    from autotune.replay.recording import RecordingError

    try:
        cases, left_out = load_cases(recordings)
    except RecordingError as err:
        raise click.ClickException(str(err)) from None
    for line in left_out:
        click.echo(f"autotune: leaving out {line}", err=True)
    if not cases:
        raise click.ClickException("no exhaustive recorded space to benchmark on")
    names = [s.strip() for s in strategies.split(",") if s.strip()]
    ours = {*STRATEGIES, TRANSFER, TRANSFER_GPU, DEFAULT_WARM}
    unknown = [n for n in names if n not in ours and not n.startswith(KT_PREFIX)]
    if unknown:
        raise click.BadParameter(
            f"unknown strategy {quoted(unknown[0], 40)}", param_hint="--strategies"
        )
    budget_list = sorted({_count(b, "--budgets", MAX_BUDGET) for b in budgets.split(",") if b})
    if not budget_list:
        raise click.BadParameter("no budget given", param_hint="--budgets")
    slow = _few_seeds(few_seeds)
    if runs:
        load_runs(runs, cases, max(budget_list))  # a file that is none refused before any work
    with writing("--output-dir", output_dir):  # before the work, not after it
        output_dir.mkdir(parents=True, exist_ok=True)
    names, skipped = available(names, cases)
    for why in skipped:
        click.echo(f"autotune: leaving out {why}", err=True)
    jobs = jobs or os.cpu_count() or 1
    click.echo(
        f"autotune: {len(names)} strategies x {len(cases)} spaces x {seeds} seeds, budgets "
        f"{budget_list}, {jobs} processes",
        err=True,
    )
    start = time.monotonic()
    last = [0.0]

    def progress(done: int, total: int) -> None:
        if time.monotonic() - last[0] > 15 or done == total:
            last[0] = time.monotonic()
            click.echo(f"autotune: {done}/{total} runs, {time.monotonic() - start:.0f} s", err=True)

    frame, ask = benchmark(
        cases, names, seeds, budget_list, jobs, slow=slow, on_done=progress, runs=runs
    )
    meta = (
        f"{len(cases)} exhaustive spaces ({', '.join(sorted({c.device for c in cases}))}), "
        f"{seeds} seeds per strategy and space"
        + "".join(f" ({n}: {s} seeds)" for n, s in slow.items() if n in names)
        + f"; the default strategy is `{DEFAULT_STRATEGY}`; `transfer` is it started at the best"
        " configs of the nearest other recorded shapes of the family (leave-one-shape-out)."
    )
    if TRANSFER_GPU in names:
        meta += (
            " `transfer_gpu` is it started at the best configs of the same space recorded on the"
            " other GPUs (leave-one-GPU-out)."
        )
    if DEFAULT_WARM in names:
        meta += (
            f" `{DEFAULT_WARM}` is the default as `autotune run` starts it when the store holds"
            " the same space measured on other GPUs (leave-one-GPU-out): their consensus best"
            " and each GPU's best first, and their mean rank per configuration as its"
            " model's prior mean."
        )
    if any(n.startswith(KT_PREFIX) for n in names):
        meta += (
            " `kt_<name>`: Kernel Tuner's strategy <name> with its default options in its"
            " simulation mode on the same configurations (failures included) and budget"
            " (max_fevals); its ms/ask is its whole run's time per evaluation, start-up"
            " (reading the cache, building the space) included."
        )
    with writing("--output-dir", output_dir):
        written = write_outputs(frame, ask, cases, output_dir, meta, stem)
    for path in written:
        click.echo(f"autotune: wrote {path}", err=True)
    every = frame[(frame["space"] == "ALL") & (frame["strategy"] != "default")]
    table = every.pivot_table(index="strategy", columns="budget", values="fraction_of_optimum")
    click.echo(table.round(3).to_string())


def _count(text: str, option: str, most: int) -> int:
    """One positive whole number of a comma-separated option, ASCII decimal."""
    try:
        return StrictIntRange(1, most).convert(text.strip(), None, None)
    except click.BadParameter as err:
        raise click.BadParameter(err.format_message(), param_hint=option) from None


def _few_seeds(text: str) -> dict[str, int]:
    """--few-seeds: NAME=SEEDS,... to a table; a name given twice is refused."""
    slow: dict[str, int] = {}
    for part in (p for p in text.split(",") if p.strip()):
        name, sep, count = part.partition("=")
        if not sep or not name.strip():
            raise click.BadParameter(
                f"{quoted(part, 40)} is not NAME=SEEDS", param_hint="--few-seeds"
            )
        if name.strip() in slow:
            raise click.BadParameter(
                f"{quoted(name.strip(), 40)} given twice", param_hint="--few-seeds"
            )
        slow[name.strip()] = _count(count, "--few-seeds", MAX_SEEDS)
    return slow
