"""What every command shares: defaults, --storage, --protocol, shapes, one-line errors."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from pathlib import Path

import click

from autotune.cli.values import (
    MAX_JOBS,
    MAX_SECONDS,
    MAX_SEED,
    RegularFile,
    StrictFloatRange,
    StrictIntRange,
    finite_seconds,
)
from autotune.families import UnknownFamily, UnsupportedProblem
from autotune.gpu.compiler import DEFAULT_CACHE
from autotune.gpu.interrupt import signals_end_at_once
from autotune.gpu.nvrtc_library import CompilerUnavailable
from autotune.model.campaigns import DEFAULT_BUDGET
from autotune.model.precision import (
    DEFAULT_DTYPE,
    DEFAULT_LAYOUT,
    DTYPES,
    LAYOUTS,
    PrecisionError,
    check_dtype,
    check_layout,
    family_precisions,
)
from autotune.model.problem import ProblemError
from autotune.model.quoting import one_line, quoted
from autotune.model.records import TIMING_PROTOCOL
from autotune.model.shapes import ShapeSelection, shape_set_names
from autotune.model.space import SpaceError
from autotune.strategies import StrategyUnavailable, UnknownStrategy

# What --storage says it defaults to (store/location.py decides, when a command runs).
STORAGE_DEFAULT_TEXT = "$AUTOTUNE_DB, else autotune/autotune.db in $XDG_DATA_HOME (~/.local/share)"


def default_storage() -> str:
    """--storage's default, asked for when a command runs (the store package loads SQLAlchemy
    and pandas, which `--help` and the commands without a database never need)."""
    from autotune.store.location import default_storage as where

    return where()


SHAPE_METAVAR = (
    "N=..,K=..,C=..,F=..[,B=..,stride=..,dtype=..,layout=..] | M=..,N=..,K=.. | "
    "D=..,R=..,Cc=..,Kd=..,Kr=..,Kc=.."
)

# Errors that describe bad input: one line, exit 2. Everything here is expected, never a traceback.
USAGE_ERRORS = (ProblemError, SpaceError, UnknownFamily, UnknownStrategy, UnsupportedProblem)


def reading_store(storage: str, protocol: int, kernel_dirs=()):
    """The results database a reading command (best, plot, report, export) reads: only the
    current code's evaluations of every family it knows (built-in and --kernels), and, when
    --storage was not given and the working directory holds committed campaign files
    (results/campaigns/), those merged beneath the user's database first (store/campaigns.py)."""
    from autotune.families import kernel_digests, with_directories
    from autotune.store import Store
    from autotune.store.campaigns import campaign_files, load_campaigns

    source = click.get_current_context().get_parameter_source("storage")
    if source is click.core.ParameterSource.DEFAULT and campaign_files():
        store = Store(storage, protocol=protocol)
        for name in load_campaigns(store):
            click.echo(f"autotune: merged the committed campaign {name} into {storage}", err=True)
    else:
        store = Store(storage, create=False, protocol=protocol)
    store.read_current(kernel_digests(with_directories(kernel_dirs)))
    return store


def fail(message: str, code: int) -> None:
    """End the command: one line on stderr (a password in it hidden, its control characters
    escaped: it may quote a file) and this exit code."""
    from autotune.store import hide_passwords  # messages may quote --storage

    click.echo(f"autotune: {one_line(hide_passwords(message))}", err=True)
    sys.exit(code)


@contextlib.contextmanager
def writing(option: str, path: Path):
    """A place the user named that cannot be written (read-only, a directory, no space) ends the
    command in one line, exit 2, as a bad value of that option."""
    try:
        yield
    except OSError as err:
        where = err.filename or path
        fail(f"cannot write {option} {str(where)!r}: {err.strerror or err}", 2)


def friendly_errors(fn):
    """Turn the package's expected errors into one-line messages with the right exit code."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        # Nothing to clean up yet, and these load the extension modules (CuPy, pandas,
        # SQLAlchemy) that a KeyboardInterrupt must not break off half-way: a stop signal during
        # them ends the process at once.
        with signals_end_at_once():
            from autotune.gpu.jobs import NoGpu
            from autotune.replay.recording import MalformedRecording, RecordingError
            from autotune.reports import ReportError
            from autotune.store import StoreError

        try:
            return fn(*args, **kwargs)
        except (*USAGE_ERRORS, MalformedRecording) as err:
            fail(first_line(err), 2)
        except NoGpu as err:
            fail(f"no usable CUDA GPU: {first_line(err)}", 1)
        except (
            StoreError,
            ReportError,
            CompilerUnavailable,
            StrategyUnavailable,
            RecordingError,
        ) as err:
            fail(first_line(err), 1)
        except OSError as err:
            # A file the system refused where no check named it first (a name too long, no
            # space left): what and why, in one line, rather than a traceback.
            where = f" {quoted(str(err.filename))}" if err.filename else ""
            fail(f"cannot use{where}: {err.strerror or err}", 1)

    return wrapper


def first_line(err: BaseException) -> str:
    """An error's first non-blank line, else its type's name."""
    lines = [line for line in str(err).splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__


kernels_option = click.option(
    "--kernels",
    "kernel_dirs",
    multiple=True,
    envvar="AUTOTUNE_KERNELS",
    type=click.Path(path_type=Path),
    metavar="DIR",
    help="A kernel directory: every <name>.cu with its <name>.toml in it is a family "
    "(repeatable; default: $AUTOTUNE_KERNELS, directories separated by "
    f"{os.pathsep!r}).",
)

# The options that mean the same in every command that measures on the GPU, written once.
gpu_option = click.option(
    "--gpu", type=StrictIntRange(0, 1023), default=0, show_default=True, help="CUDA device index."
)
jobs_option = click.option(
    "--jobs",
    type=StrictIntRange(1, MAX_JOBS),
    default=None,
    help="Compile processes working ahead of the GPU. Default: one per CPU core.",
)
cache_dir_option = click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_CACHE,
    show_default=True,
    help="Cubin cache shared between runs.",
)
storage_option = click.option(
    "--storage",
    default=default_storage,
    show_default=STORAGE_DEFAULT_TEXT,
    help="Results database: a SQLite file path or any SQLAlchemy URL.",
)

protocol_option = click.option(
    "--protocol",
    type=StrictIntRange(1, TIMING_PROTOCOL),
    default=TIMING_PROTOCOL,
    show_default=True,
    help="Read the measurements of this timing protocol (DESIGN section 2): 2 queues an L2 "
    "flush before each sample and hides the host's launch; 1 is everything stored before "
    "2026-11-24. Protocols are never mixed.",
)


def families_option(help: str):
    """--family, repeatable, passed as `families`."""
    return click.option("--family", "families", multiple=True, metavar="NAME", help=help)


def time_limit_option(help: str):
    """--time-limit in seconds, at least one, finite; None when not given."""
    return click.option(
        "--time-limit",
        type=StrictFloatRange(min=1, max=MAX_SECONDS),
        callback=finite_seconds,
        default=None,
        metavar="SECONDS",
        help=help,
    )


def count_option(name: str, default: int, most: int, help: str):
    """A whole number of things (calls, repeats, evaluations), 1 to `most`."""
    kind = StrictIntRange(1, most)
    return click.option(name, type=kind, default=default, show_default=True, help=help)


def seed_option(help: str):
    """--seed, a whole number the random generators take (0 by default)."""
    return click.option(
        "--seed", type=StrictIntRange(0, MAX_SEED), default=0, show_default=True, help=help
    )


def subspace_option(help: str):
    """--subspace, a Path or None: a TOML of pinned value lists per family
    (replay/subspaces.py), read by the command."""
    return click.option(
        "--subspace", type=RegularFile(path_type=Path), default=None, metavar="FILE", help=help
    )


def output_option(
    help: str | None = None,
    required: bool = False,
    directory: bool = False,
    default: Path | None = None,
):
    """--output, a Path: a file the command writes, new or regular (a FIFO would block the write
    forever), or a directory where `directory`; `default` (shown in the help) or None."""
    kind = RegularFile(must_exist=False, path_type=Path)
    if directory:
        kind = click.Path(path_type=Path, file_okay=False)
    return click.option(
        "--output",
        type=kind,
        required=required,
        default=default,
        show_default=default is not None,
        help=help,
    )


def _names(check, spelling):
    """A click callback for a repeatable --dtype or --layout: each value checked (an unknown one
    ends the command in one line, exit 2), spelt as the model spells it, repeats dropped."""

    def callback(_ctx, _param, values):
        try:
            return tuple(dict.fromkeys(check(spelling(v.strip())) for v in values))
        except PrecisionError as err:
            fail(str(err), 2)

    return callback


def one_name(check, spelling):
    """A click callback for a single --dtype or --layout (see _names)."""

    def callback(_ctx, _param, value):
        if value is None:
            return None
        try:
            return check(spelling(value.strip()))
        except PrecisionError as err:
            fail(str(err), 2)

    return callback


# --dtype and --layout: the names they take, how a name is checked and how the model spells it.
_PRECISION_OPTIONS = {
    "dtype": (DTYPES, check_dtype, str.lower),
    "layout": (LAYOUTS, check_layout, str.upper),
}


def precision_option(what: str, help: str, repeatable: bool = False):
    """--dtype or --layout (`what`): one name or None, or, repeatable, a tuple of them passed as
    dtypes or layouts."""
    names, check, spelling = _PRECISION_OPTIONS[what]
    if repeatable:
        return click.option(
            f"--{what}",
            f"{what}s",
            multiple=True,
            metavar="|".join(names),
            callback=_names(check, spelling),
            help=help,
        )
    return click.option(
        f"--{what}",
        default=None,
        metavar="|".join(names),
        callback=one_name(check, spelling),
        help=help,
    )


dtype_filter_option = precision_option(
    "dtype", "Only results in this dtype (any layout). Default: every dtype stored."
)


def precision_options(dtype_help: str, layout_help: str):
    """--dtype and --layout, repeatable: the precisions and layouts 2D convolution shapes are
    taken in (model/precision.py)."""

    def decorate(fn):
        fn = precision_option("layout", layout_help, repeatable=True)(fn)
        return precision_option("dtype", dtype_help, repeatable=True)(fn)

    return decorate


PRECISION_HELP = (
    "Precision of the 2D convolution shapes (repeatable: every shape in each): fp32 (FP32 "
    "FMA, TF32 off), tf32 (FP32 data, TF32 tensor-core products), bf16, fp16 (16-bit data, "
    f"FP32 accumulation). A shape that names its own dtype keeps it. Default: {DEFAULT_DTYPE}.",
    "Tensor layout of the 2D convolution shapes (repeatable): NCHW (filters FCKK) or NHWC "
    "(filters FKKC). A shape that names its own layout keeps it. Default: "
    f"{DEFAULT_LAYOUT}.",
)


def shape_options(default: str = "", precision_help: tuple[str, str] = PRECISION_HELP):
    """--shapes, --shape and --shape-file, as every command that takes problem shapes has them,
    with --dtype and --layout: passed to the command as one ShapeSelection, `selection`."""
    try:
        sets = ", ".join(shape_set_names())
    except ProblemError as err:  # the command that reads them says so, in one line
        sets = f"(unreadable: {err})"

    def decorate(command):
        @functools.wraps(command)
        def fn(*args, shape_sets, shapes, shape_files, dtypes, layouts, **kwargs):
            chosen = ShapeSelection(shape_sets, shapes, shape_files, dtypes, layouts)
            return command(*args, selection=chosen, **kwargs)

        fn = precision_options(*precision_help)(fn)
        fn = click.option(
            "--shape-file",
            "shape_files",
            multiple=True,
            type=RegularFile(),
            help="CSV (columns N,K,C,F[,B,stride,dtype,layout] for conv2d, M,N,K for gemm, "
            "D,R,Cc,Kd,Kr,Kc for conv3d) or TOML file of shapes (repeatable).",
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


__all__ = [
    "count_option",
    "output_option",
    "seed_option",
    "time_limit_option",
    "families_option",
    "DEFAULT_BUDGET",
    "DEFAULT_CACHE",
    "DEFAULT_DTYPE",
    "DEFAULT_LAYOUT",
    "STORAGE_DEFAULT_TEXT",
    "default_storage",
    "PRECISION_HELP",
    "SHAPE_METAVAR",
    "USAGE_ERRORS",
    "dtype_filter_option",
    "fail",
    "family_precisions",
    "friendly_errors",
    "kernels_option",
    "one_name",
    "reading_store",
    "precision_option",
    "precision_options",
    "protocol_option",
    "shape_options",
    "storage_option",
    "writing",
]
