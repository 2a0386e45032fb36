"""The value types and checks of the commands' options: whole and decimal numbers as ASCII text,
finite numbers of seconds, regular files, and the limits they are held to."""

from __future__ import annotations

import math
import os
import re

import click

MAX_SEED = 2**32 - 1  # NumPy's legacy generators and CuPy's take seeds below 2**32
MAX_JOBS = 1024  # compile processes: each is a Python process with NVRTC loaded
MAX_SECONDS = 10 * 366 * 86400  # a time limit: ten years is no limit, 1e300 s is a mistake


def finite_number(_ctx, param, value: float | None) -> float | None:
    """A click callback for a count or a time given as a float: FloatRange lets nan through."""
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a finite number", param=param)
    return value


_INT_TEXT = re.compile(r"[+-]?[0-9]+")
_FLOAT_TEXT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


class StrictIntRange(click.IntRange):
    """IntRange over ASCII decimal text: int() also reads 1_024 and other scripts' digits."""

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not _INT_TEXT.fullmatch(value.strip()):
            self.fail(f"{value!r} is not a whole number", param, ctx)
        return super().convert(value, param, ctx)


class StrictFloatRange(click.FloatRange):
    """FloatRange over ASCII decimal text, finite: float() also reads 1_0, nan and inf."""

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not _FLOAT_TEXT.fullmatch(value.strip()):
            self.fail(f"{value!r} is not a finite decimal number", param, ctx)
        return super().convert(value, param, ctx)


class RegularFile(click.Path):
    """An existing regular file: a FIFO would block the read forever, a device would never end,
    a directory says nothing useful; each is one line before anything is opened."""

    def __init__(self, dir_okay: bool = False, must_exist: bool = True, **kwargs) -> None:
        super().__init__(exists=must_exist, dir_okay=dir_okay, **kwargs)
        self.must_exist = must_exist

    def convert(self, value, param, ctx):
        import stat

        path = super().convert(value, param, ctx)
        if not self.must_exist and not os.path.lexists(path):
            return path  # a file the command creates
        try:
            mode = os.stat(path).st_mode
        except OSError as err:
            self.fail(f"{str(value)!r}: {err.strerror}", param, ctx)
        if not (stat.S_ISREG(mode) or (self.dir_okay and stat.S_ISDIR(mode))):
            self.fail(f"{str(value)!r} is not a regular file", param, ctx)
        return path


def finite_seconds(_ctx, param, value: float | None) -> float | None:
    """A click callback for a number of seconds: FloatRange lets nan through (every comparison
    with nan is false), and inf would mean no limit."""
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a number of seconds", param=param)
    return value


_FILE_STEM = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def file_stem(_ctx, param, value: str) -> str:
    """A click callback for a name that becomes file names (NAME.csv, NAME.md): checked before
    the work whose results they hold, not when they are written."""
    if not _FILE_STEM.fullmatch(value):
        raise click.BadParameter(
            "a file name stem: letters, digits, '.', '_' and '-', at most 100, not starting "
            "with '.', '_' or '-'",
            param=param,
        )
    return value


_RAY_ADDRESS = re.compile(
    r"auto|local|(ray://)?[A-Za-z0-9.-]+:[0-9]{1,5}|(ray://)?\[[0-9A-Fa-f:]+\]:[0-9]{1,5}"
)


def ray_address(_ctx, param, value: str | None) -> str | None:
    """A click callback for --ray's address: '' (given alone), auto, local, HOST:PORT or
    ray://HOST:PORT; anything else is refused here, before Ray is imported or started."""
    if value and not _RAY_ADDRESS.fullmatch(value):
        raise click.BadParameter(
            f"{value!r} is not auto, local, HOST:PORT or ray://HOST:PORT", param=param
        )
    return value


def observe_option(_ctx, param, value: str | None):
    """A click callback for --observe: the Observe it names, with NVML's binding present."""
    from autotune.model.observe import Observe, ObserveError, require_nvml

    if value is None:
        return None
    try:
        observe = Observe.parse(value)
        require_nvml("--observe")
    except ObserveError as err:
        raise click.BadParameter(str(err), param=param) from None
    return observe
