"""The `autotune` command: the click group, with every command module's commands on it."""

from __future__ import annotations

import signal

import click

from autotune import __version__
from autotune.cli.catalogue import families, shapes, space
from autotune.cli.data import data
from autotune.cli.export import export
from autotune.cli.group import LazyGroup, OneLineErrors
from autotune.cli.kt_cache import import_kt_cache
from autotune.cli.measure import baseline, device, remeasure
from autotune.cli.merge import merge
from autotune.cli.models import tune_model_command
from autotune.cli.recording import export_recording
from autotune.cli.run import run
from autotune.cli.tables import best, forget, plot, report
from autotune.cli.workers import status
from autotune.gpu.compiler import compile_in_children
from autotune.gpu.interrupt import (
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    STOP_SIGNALS,
    arm_exit_watchdog,
    enable_watchdog,
    exit_code,
    stop_handler,
    watch_signals,
)


@click.group(cls=OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="autotune")
def main() -> None:
    """Autotune GPU convolution kernels: search tile and block parameters per kernel family and
    problem shape, verify every candidate against a float64 reference, time it on the GPU and
    keep every measurement in a results database."""


bench = LazyGroup(
    "autotune.bench:bench",
    name="bench",
    help="Measure the tool itself; figures go under results/bench/.",
    context_settings={"help_option_names": ["-h", "--help"]},
)

# Command modules define plain click commands and never import this module: the imports run one
# way (no import circle), and this is the one place that says which commands exist.
# `autotune --help` lists them by name (click's order), not in this order.
for command in (
    run,
    device,
    baseline,
    remeasure,
    best,
    forget,
    merge,
    plot,
    report,
    families,
    shapes,
    space,
    bench,
    export,
    export_recording,
    import_kt_cache,
    status,
    data,
    tune_model_command,
):
    main.add_command(command)


def entry() -> None:
    """The console script and `python -m autotune`: the commands, and once Ctrl-C or SIGTERM
    asked the process to stop, a watchdog that ends it within WATCHDOG_S whatever holds it."""
    finishing: list[bool] = []  # once exiting, a signal only arms the watchdog: a traceback else
    stop = stop_handler(STOP_SIGNALS, finishing=lambda: bool(finishing))
    enable_watchdog()
    compile_in_children()  # NVRTC's own handlers would take these signals while it compiles
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)  # as Ctrl-C, anywhere (run's own handler does the same)
    watch_signals()
    try:
        main()
    except SystemExit as done:
        finishing.append(True)
        if STOP_SIGNALS or done.code in (EXIT_INTERRUPTED, EXIT_TERMINATED):
            code = exit_code(STOP_SIGNALS) if STOP_SIGNALS else done.code
            arm_exit_watchdog(code)  # the interpreter's exit may wait on a stuck child
            raise SystemExit(code) from None
        raise


__all__ = ["entry", "main"]
