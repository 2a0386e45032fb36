"""The `autotune` command: the click group, with every command module's commands on it."""

from __future__ import annotations

import importlib
import signal
import sys

import click

from autotune import __version__
from autotune.cli.catalogue import families, shapes, space
from autotune.cli.data import data
from autotune.cli.export import export
from autotune.cli.kt_cache import import_kt_cache
from autotune.cli.measure import baseline, device, remeasure
from autotune.cli.merge import merge
from autotune.cli.recording import export_recording
from autotune.cli.run import run
from autotune.cli.tables import best, forget, plot, report
from autotune.cli.workers import status
from autotune.gpu.interrupt import (
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    arm_exit_watchdog,
    enable_watchdog,
    exit_code,
    watch_signals,
)
from autotune.model.quoting import one_line


class OneLineErrors(click.Group):
    """The top group: click's own errors (a bad option value, a missing argument, an unknown
    command, in any subcommand) as one line, `autotune: <what> (see '<command> --help')`, with
    click's exit code (2 for usage), instead of its usage block, hint and message on 4 lines."""

    def make_context(self, *args, **kwargs) -> click.Context:
        try:
            return super().make_context(*args, **kwargs)
        except click.ClickException as err:
            raise OneLineError(err) from None

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except click.ClickException as err:
            raise OneLineError(err) from None


class OneLineError(click.ClickException):
    """A click error shown on one line of stderr, its exit code kept."""

    def __init__(self, err: click.ClickException) -> None:
        super().__init__(err.format_message())
        self.exit_code = err.exit_code
        self.original = err

    def show(self, file=None) -> None:
        err = self.original
        if isinstance(err, click.exceptions.NoArgsIsHelpError):
            err.show(file)  # `autotune` or `autotune bench` alone: the help, not an error
            return
        text = one_line(err.format_message())
        ctx = getattr(err, "ctx", None)
        if isinstance(err, click.UsageError) and ctx is not None:
            text += f" (see '{ctx.command_path} --help')"
        click.echo(f"autotune: {text}", file=file or sys.stderr, err=True)


@click.group(cls=OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="autotune")
def main() -> None:
    """Autotune GPU convolution kernels: search tile and block parameters per kernel family and
    problem shape, verify every candidate against a float64 reference, time it on the GPU and
    keep every measurement in a results database."""


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
):
    main.add_command(command)


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


__all__ = ["entry", "main"]
