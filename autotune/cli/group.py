"""The click groups of `autotune`: click's own errors on one line, an option that takes one value
refused when given twice, and sub-groups imported when they are used."""

from __future__ import annotations

import importlib
import sys

import click

from autotune.model.quoting import one_line


class OneValueOnce(click.Group):
    """A group whose commands refuse an option that takes one value given twice (click keeps
    the last one silently: `best --family a --family b` showed only b)."""

    def resolve_command(self, ctx: click.Context, args: list[str]):
        name, command, rest = super().resolve_command(ctx, args)
        if command is not None and not isinstance(command, click.Group):
            twice = repeated_option(command, ctx, rest)
            if twice:
                raise click.UsageError(
                    f"option {twice} given twice: it takes one value "
                    f"(see '{ctx.command_path} {name} --help')"
                )
        return name, command, rest


def repeated_option(command: click.Command, ctx: click.Context, args: list[str]) -> str | None:
    """The first option of `command` that takes one value and appears twice in `args`."""
    options: dict[str, click.Option] = {}
    for param in command.params:  # not get_params: it would fix --help's names for good
        if isinstance(param, click.Option):
            options |= dict.fromkeys((*param.opts, *param.secondary_opts), param)
    seen: set[str | None] = set()
    at = 0
    while at < len(args):
        token = args[at]
        at += 1
        if token == "--":
            break  # arguments from here on
        spelt, has_value, _ = token.partition("=")
        option = options.get(spelt) if token.startswith("-") else None
        if option is None or option.is_flag or option.count:
            continue
        if not has_value:
            at += option.nargs  # its value, whatever it looks like
        if option.multiple:
            continue
        if option.name in seen:
            return option.opts[0]
        seen.add(option.name)
    return None


class OneLineErrors(OneValueOnce):
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


class LazyGroup(OneValueOnce):
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


__all__ = ["LazyGroup", "OneLineError", "OneLineErrors", "OneValueOnce", "repeated_option"]
