"""Kernel Tuner's tune_kernel arguments, checked and mapped onto ours (no GPU needed).

Each argument keeps Kernel Tuner 1.5's meaning; one that autotune does not support raises one
TuneKernelError naming it, never ignored. What Kernel Tuner evaluates as Python text (restrictions,
problem size, grid divisors, defines, metrics) goes through the whitelisted expression evaluator.
The search space, the metrics and the study's key are kt/space.py's.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from autotune.kt.arrays import (
    TunableArgument,
    checked_answer,
    checked_arguments,
    checked_cmem,
    on_host,
)
from autotune.kt.errors import TuneKernelError
from autotune.kt.kernel import DEFAULT_BLOCK_SIZE_NAMES
from autotune.kt.observers import DEVICE_TUNABLES, observing, output_observers
from autotune.kt.strategies import apply_objective, apply_strategy, positive_int
from autotune.model.expression import Expression, SpaceError
from autotune.model.files import why_not_creatable
from autotune.model.observe import Observe, ObserveError
from autotune.model.quoting import quoted

# Kernel Tuner's spellings of CUDA through its three CUDA backends; every other language is refused.
CUDA_LANGS = {"cuda", "cupy", "nvcuda"}
# A __global__ function's name, or a template's instance whose arguments may name tunables (they
# are macros when it is compiled, as in Kernel Tuner): "vector_add<float_type>", "k<T, 4>".
KERNEL_NAME = re.compile(r"[A-Za-z_]\w*(\s*<[^;{}\n]*>)?")
# Arguments of Kernel Tuner's that autotune does not take, with why; refused unless left at
# their default (None or False).
UNSUPPORTED = {
    "texmem_args": "texture memory is not supported; pass the array as an argument",
    "compiler": "autotune compiles CUDA with NVRTC only",
    "log": "Kernel Tuner's log file is not written; the results database records every run",
    "simulation_mode": "use `autotune run --replay` with a recording for simulated tuning",
    "parallel": "autotune compiles in parallel and measures on one GPU per call already",
    "objectives": "multi-objective tuning is not supported; the objective is time",
}


@dataclass
class KernelRequest:
    """A checked tune_kernel call."""

    kernel_name: str
    source_text: str  # a generator's: its text at the first value of every tunable
    include_dir: Path | None
    problem_size: Any
    arguments: list[Any]
    tune_params: dict[str, list]
    grid_div: tuple[Any, Any, Any]
    block_size_names: tuple[str, ...]
    restrictions: Any = None
    answer: list | None = None
    atol: float = 1e-6
    verify: Callable | None = None
    iterations: int = 7
    strategy: str = "brute_force"
    budget: int | None = None
    fraction: float | None = None
    time_limit_s: float | None = None
    compiler_options: tuple[str, ...] = ()
    defines: dict | None = None
    smem_size: Any = None
    cmem_args: dict[str, np.ndarray] = field(default_factory=dict)
    metrics: dict | None = None
    cache: Path | None = None
    device: int = 0
    seed: int | None = None
    quiet: bool = False
    verbose: bool = False
    # What the GPU worker observes (NVMLObserver), the observable names asked, and what the
    # strategy optimises: time, an observation or a metric (Kernel Tuner's objective).
    observe: Observe | None = None
    observables: tuple[str, ...] = ()
    output_observers: tuple[Any, ...] = ()  # Kernel Tuner's AccuracyObserver and the like
    objective: str = "time"
    higher_is_better: bool = False
    render: Callable[[dict], str] | None = None  # kernel_source as a code generator


def check_request(args: Mapping[str, Any]) -> KernelRequest:
    """tune_kernel's arguments (by Kernel Tuner's names) as a KernelRequest."""
    for name, why in UNSUPPORTED.items():
        if args.get(name) not in (None, False):
            raise TuneKernelError(f"tune_kernel: {name} is not supported ({why})")
    if args.get("platform", 0) not in (0, None):
        raise TuneKernelError("tune_kernel: platform is OpenCL's; CUDA takes device only")
    lang = args.get("lang")
    if lang is not None and str(lang).lower() not in CUDA_LANGS:
        raise TuneKernelError(
            f"tune_kernel: lang={lang!r} is not supported; autotune tunes CUDA "
            "(lang None, 'CUDA', 'cupy' or 'nvcuda')"
        )
    name = args["kernel_name"]
    if not isinstance(name, str) or not KERNEL_NAME.fullmatch(name):
        raise TuneKernelError(
            f"tune_kernel: kernel_name {quoted(name, 60)} must be the name of a __global__ "
            'function, or of a template\'s instance such as "vector_add<float_type>"'
        )
    tune_params = _tune_params(args["tune_params"])
    render = args["kernel_source"] if callable(args["kernel_source"]) else None
    text, include = _source(args["kernel_source"], tune_params)
    arguments = checked_arguments(args["arguments"])
    for i, arg in enumerate(arguments):
        if isinstance(arg, TunableArgument) and isinstance(arg.key, str):
            if arg.key not in tune_params:  # Kernel Tuner evaluates it; the whitelist here
                _expression(arg.key, f"arguments[{i}]'s Tunable key", tune_params)
    request = KernelRequest(
        kernel_name=name,
        source_text=text,
        include_dir=include,
        problem_size=_problem_size(args["problem_size"], tune_params),
        arguments=arguments,
        tune_params=tune_params,
        grid_div=tuple(
            _grid_div(args.get(f"grid_div_{axis}"), axis, tune_params) for axis in "xyz"
        ),
        block_size_names=_block_size_names(args.get("block_size_names"), tune_params),
        restrictions=_restrictions(args.get("restrictions")),
        answer=checked_answer(
            on_host(args.get("answer")), arguments, args.get("verify") is not None
        ),
        atol=_atol(args.get("atol", 1e-6)),
        verify=_verify(args.get("verify")),
        iterations=positive_int(args.get("iterations", 7), "iterations"),
        compiler_options=tuple(_strings(args.get("compiler_options") or (), "compiler_options")),
        defines=_defines(args.get("defines")),
        smem_size=_smem(args.get("smem_args"), tune_params),
        cmem_args=checked_cmem(args.get("cmem_args")),
        metrics=_metrics(args.get("metrics")),
        cache=_cache(args.get("cache")),
        device=_device(args.get("device", 0)),
        seed=_seed(args.get("seed")),
        quiet=bool(args.get("quiet")),
        verbose=bool(args.get("verbose")),
        render=render,
    )
    try:
        request.observe, request.observables = observing(args.get("observers"), request.device)
    except ObserveError as err:
        raise TuneKernelError(str(err)) from None
    request.output_observers = output_observers(args.get("observers"))
    apply_objective(request, args.get("objective"), args.get("objective_higher_is_better"))
    apply_strategy(request, args.get("strategy"), args.get("strategy_options"))
    return request


def _source(source: Any, tune_params: Mapping[str, list]) -> tuple[str, Path | None]:
    """The kernel's text and, for a file, its directory (for its #includes). A code generator
    (a function of the tunables' dict, as Kernel Tuner calls it) gives its text at the first
    value of every tunable: what keys the study."""
    if isinstance(source, list | tuple):
        raise TuneKernelError("tune_kernel: kernel_source as a list of files is not supported")
    if callable(source):
        try:
            text = source({k: v[0] for k, v in tune_params.items()})
        except Exception as err:
            raise TuneKernelError(
                f"tune_kernel: the kernel_source generator raised {type(err).__name__}: {err}"
            ) from None
        if not isinstance(text, str):
            raise TuneKernelError("tune_kernel: the kernel_source generator must return a string")
        return text, None
    one_line = isinstance(source, str) and "\n" not in source and len(source) < 4096
    if isinstance(source, Path) or (one_line and Path(source).suffix):
        path = Path(source)
        if path.is_file():
            return path.read_text(), path.resolve().parent
        if isinstance(source, Path) or _looks_like_a_file_name(source):
            raise TuneKernelError(f"tune_kernel: kernel_source {str(path)!r}: file not found")
    if not isinstance(source, str):
        raise TuneKernelError("tune_kernel: kernel_source must be CUDA text or a file's path")
    return source, None


def _looks_like_a_file_name(text: str) -> bool:
    """Kernel Tuner's rule: a string with none of code's characters or keywords that holds a
    source suffix (.c, .cu, .cpp, .opencl, .F...) names a file; it is never compiled as code."""
    if any(c in text for c in "();{}\\") or any(
        word in text for word in ("__global__ ", "__kernel ", "void ", "float ")
    ):
        return False
    return any(suffix in text for suffix in (".c", ".opencl", ".F"))


def _restrictions(restrictions: Any) -> Any:
    """Kernel Tuner's forms (a function, or a list of texts, functions and (function, names)
    pairs; kt/space.py reads them) checked here, before the GPU starts."""
    if restrictions is None or callable(restrictions):
        return restrictions
    if isinstance(restrictions, list | tuple) and all(
        isinstance(r, str)
        or callable(r)
        or (isinstance(r, tuple) and len(r) == 2 and callable(r[0]))
        for r in restrictions
    ):
        for text in (r for r in restrictions if isinstance(r, str)):
            _expression(text, "restrictions")  # the whitelist refuses code before the GPU starts
        return restrictions
    raise TuneKernelError(
        "tune_kernel: restrictions must be a function or a list of texts and functions, got "
        f"{type(restrictions).__name__}"
    )


def _atol(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating | np.integer):
        raise TuneKernelError(f"tune_kernel: atol must be a number >= 0, got {value!r:.40}")
    if not math.isfinite(value) or value < 0:
        raise TuneKernelError(f"tune_kernel: atol must be a finite number >= 0, got {value!r}")
    return float(value)


def _seed(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or not 0 <= value < 2**32:
        raise TuneKernelError(
            f"tune_kernel: seed must be an integer in 0..2**32-1, got {value!r:.40}"
        )
    return int(value)


def _tune_params(tune_params: Any) -> dict[str, list]:
    if not isinstance(tune_params, Mapping) or not tune_params:
        raise TuneKernelError("tune_kernel: tune_params must be a non-empty dict of value lists")
    out = {}
    for name, values in tune_params.items():
        if name in DEVICE_TUNABLES:
            raise TuneKernelError(
                f"tune_kernel: tune_params[{name!r}] would change {DEVICE_TUNABLES[name]}; "
                "autotune never changes clocks or power limits (they hold for the whole GPU)"
            )
        if not isinstance(name, str) or not name.isidentifier():
            raise TuneKernelError(f"tune_kernel: tune_params name {name!r} is not an identifier")
        if isinstance(values, str) or not isinstance(values, Sequence | np.ndarray):
            raise TuneKernelError(f"tune_kernel: tune_params[{name!r}] must be a list of values")
        values = [v.item() if isinstance(v, np.generic) else v for v in values]
        if not values or len(set(values)) != len(values):
            raise TuneKernelError(f"tune_kernel: tune_params[{name!r}] is empty or repeats a value")
        if not all(isinstance(v, int | float | str | bool) for v in values):
            raise TuneKernelError(f"tune_kernel: tune_params[{name!r}] holds a non-scalar value")
        out[name] = values
    return out


def _problem_size(size: Any, tune_params: Mapping[str, list]) -> Any:
    if callable(size):
        return size
    items = (size,) if isinstance(size, int | str | np.integer) else size
    if not isinstance(items, Sequence) or not 1 <= len(items) <= 3:
        raise TuneKernelError("tune_kernel: problem_size must be 1 to 3 integers or expressions")
    for item in items:
        if isinstance(item, str):
            _expression(item, "problem_size", tune_params)  # fails here, before any GPU work
        elif isinstance(item, bool) or not isinstance(item, int | np.integer) or item < 1:
            raise TuneKernelError(f"tune_kernel: problem_size entry {item!r} is not a positive int")
    return tuple(int(i) if isinstance(i, np.integer) else i for i in items)


def _block_size_names(names: Any, tune_params: Mapping[str, list]) -> tuple[str, ...]:
    if names is None:
        # Kernel Tuner accepts the default names in any case (BLOCK_SIZE_X), ordered x, y, z.
        found = sorted(
            (k for k in tune_params if k.lower() in DEFAULT_BLOCK_SIZE_NAMES), key=str.casefold
        )
        if found and found != [k.lower() for k in found]:
            return tuple(found)
        return DEFAULT_BLOCK_SIZE_NAMES
    if not isinstance(names, list | tuple) or len(names) > 3:
        raise TuneKernelError("tune_kernel: block_size_names must be a list of up to 3 names")
    return tuple(_strings(names, "block_size_names"))


def _verify(verify: Any) -> Callable | None:
    if verify is None:
        return None
    if not callable(verify):
        raise TuneKernelError("tune_kernel: verify must be a function (answer, result_host, atol)")
    # Any callable: it is called in this process (a lambda, a nested function, a notebook's).
    return verify


def _grid_div(divisor: Any, axis: str, tune_params: Mapping[str, list]) -> Any:
    """A grid divisor as Kernel Tuner takes it (None, a whole number, an expression of the
    tunables, a function of their dict, or a list of those multiplied), checked for its form
    here; its value at each configuration is checked when the first one is planned."""
    parts = divisor if isinstance(divisor, list | tuple) else [divisor]
    for part in parts:
        if part is None and not isinstance(divisor, list | tuple) or callable(part):
            continue
        if isinstance(part, int) and not isinstance(part, bool) and part >= 1:
            continue
        if isinstance(part, str):
            _expression(part, f"grid_div_{axis}", tune_params)
            continue
        raise TuneKernelError(
            f"tune_kernel: grid_div_{axis} {quoted(part, 40)} is not a whole number >= 1, an "
            "expression of the tunables or a function of them"
        )
    return divisor


def _strings(values: Any, what: str) -> list[str]:
    if not isinstance(values, list | tuple) or not all(isinstance(v, str) for v in values):
        raise TuneKernelError(f"tune_kernel: {what} must be a list of strings")
    return list(values)


def _defines(defines: Any) -> dict | None:
    if defines is None:
        return None
    if not isinstance(defines, Mapping):
        raise TuneKernelError("tune_kernel: defines must be a dict of names to values")
    for name in defines:
        if not isinstance(name, str) or not name.isidentifier():
            raise TuneKernelError(f"tune_kernel: defines name {name!r} is not an identifier")
    return dict(defines)


def _smem(smem_args: Any, tune_params: Mapping[str, list]) -> Any:
    if smem_args is None:
        return None
    if not isinstance(smem_args, Mapping) or set(smem_args) != {"size"}:
        raise TuneKernelError(
            "tune_kernel: smem_args must be {'size': bytes (int, text, function)}"
        )
    size = smem_args["size"]
    if isinstance(size, int) and not isinstance(size, bool) and size < 0:
        raise TuneKernelError(f"tune_kernel: smem_args size {size} is negative")
    if not (isinstance(size, int | str) and not isinstance(size, bool)) and not callable(size):
        raise TuneKernelError(
            f"tune_kernel: smem_args size {quoted(size, 40)} is not bytes (int, text, function)"
        )
    if isinstance(size, str):
        _expression(size, "smem_args size", tune_params)
    return size


def _metrics(metrics: Any) -> dict | None:
    if metrics is None:
        return None
    if not isinstance(metrics, Mapping):
        raise TuneKernelError("tune_kernel: metrics must be a dict of names to text or functions")
    for name, metric in metrics.items():
        if isinstance(metric, str):
            _expression(metric, f"metrics[{name!r}]")
        elif not callable(metric):
            raise TuneKernelError(f"tune_kernel: metrics[{name!r}] must be text or a function")
    return dict(metrics)


def _expression(text: str, what: str, tune_params: Mapping[str, list] | None = None) -> Expression:
    """The text as an expression; with tune_params, one that names only tunables."""
    try:
        expression = Expression(text)
    except SpaceError as err:
        raise TuneKernelError(f"tune_kernel: {what}: {err}".replace("constraint ", "")) from None
    unknown = sorted(expression.names - set(tune_params or expression.names))
    if unknown:
        raise TuneKernelError(
            f"tune_kernel: {what} {quoted(text)} names {quoted(unknown[0], 40)}, not a tunable"
        )
    return expression


def _cache(cache: Any) -> Path | None:
    if cache is None:
        return None
    if not isinstance(cache, str | os.PathLike) or not str(cache).strip():
        raise TuneKernelError(f"tune_kernel: cache must be a file name, not {quoted(cache, 40)}")
    path = Path(cache)
    path = path if path.suffix == ".json" else path.with_name(path.name + ".json")
    why = why_not_creatable(path)  # before the GPU starts
    if why is not None:
        raise TuneKernelError(f"tune_kernel: cache {quoted(str(path))}: {why}")
    return path


def _device(device: Any) -> int:
    if isinstance(device, bool) or not isinstance(device, int) or not 0 <= device < 1024:
        raise TuneKernelError(f"tune_kernel: device must be a GPU index, got {device!r:.40}")
    return device


__all__ = ["UNSUPPORTED", "KernelRequest", "TuneKernelError", "check_request"]
