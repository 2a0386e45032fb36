"""A tune_kernel call's search space (Kernel Tuner's restrictions and thread limit), its
metrics, and what keys its study (arguments, source, options, problem size)."""

from __future__ import annotations

import hashlib
import inspect
import re
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from autotune.kt.arguments import KernelRequest, TuneKernelError
from autotune.kt.arrays import TunableArgument
from autotune.model.expression import Expression, SpaceError
from autotune.model.space import DeviceLimits, Parameter, SearchSpace
from autotune.replay.recorded import ListedSpace

# -- the search space ----------------------------------------------------------------------------


def bind_space(request: KernelRequest, limits: DeviceLimits):
    """The valid configurations: the product of tune_params, Kernel Tuner's restrictions (text,
    functions of the tunables' dict, or functions of named tunables) and the device's threads
    per block."""
    params = tuple(Parameter(k, tuple(v)) for k, v in request.tune_params.items())
    texts, functions = _restrictions(request.restrictions, list(request.tune_params))
    tuned_block = [n for n in request.block_size_names if n in request.tune_params]
    if tuned_block:
        texts.append(" * ".join(tuned_block) + " <= MAX_THREADS")
    try:
        exprs = tuple(Expression(t) for t in texts)
        space = SearchSpace(request.kernel_name, params, exprs).bind({}, limits)
    except SpaceError as err:
        raise TuneKernelError(f"tune_kernel: restrictions: {err}") from None
    if not functions:
        return space
    kept = [c for c in space if all(f(c.as_dict()) for f in functions)]
    return ListedSpace(request.kernel_name, list(request.tune_params.items()), kept)


def _restrictions(restrictions: Any, names: list[str]) -> tuple[list[str], list[Callable]]:
    """Kernel Tuner's forms: one function of the dict; or a list of text, of functions taking
    every tunable by position, or of (function, [names]) pairs."""
    if restrictions is None:
        return [], []
    if callable(restrictions):
        return [], [restrictions]
    if not isinstance(restrictions, list | tuple):
        raise TuneKernelError("tune_kernel: restrictions must be a list or a function")
    texts, functions = [], []
    for r in restrictions:
        if isinstance(r, str):
            texts.append(r)
        elif isinstance(r, tuple) and len(r) == 2 and callable(r[0]):
            fn, wanted = r
            functions.append(lambda p, fn=fn, wanted=tuple(wanted): fn(*(p[n] for n in wanted)))
        elif callable(r) and len(restrictions) == 1 and _one_parameter(r) and len(names) > 1:
            functions.append(r)  # Kernel Tuner's old form: one function of the dict
        elif callable(r):
            functions.append(lambda p, fn=r: fn(*(p[n] for n in names)))
        else:
            raise TuneKernelError(f"tune_kernel: restriction {r!r} is neither text nor a function")
    return texts, functions


def _one_parameter(fn: Callable) -> bool:
    try:
        return len(inspect.signature(fn).parameters) == 1
    except (TypeError, ValueError):
        return False


def evaluate_metric(metric: Any, values: Mapping[str, Any]) -> Any:
    """A user metric (text over the tunables, time and earlier metrics, or a function of their
    dict), as Kernel Tuner computes it for each result."""
    if callable(metric):
        return metric(dict(values))
    try:
        out = Expression(metric)(dict(values))
    except SpaceError as err:
        raise TuneKernelError(f"tune_kernel: metrics: {err}") from None
    return out.item() if hasattr(out, "item") else out


# -- what keys a study -----------------------------------------------------------------------------


def signature(request: KernelRequest) -> str:
    """The arguments' dtypes and shapes (scalars with their values), the constant and shared
    memory, a problem size that depends on tunables, the observables asked, and digests of the
    source and the compiler options: what makes this another study. An edited kernel is a new
    study, never resumed from measurements of the old one (Triton's autotuner keys its cache on
    the source likewise)."""
    parts = [f"source={_digest(request.source_text)}"]
    if request.compiler_options:
        parts.append(f"options={_digest(' '.join(request.compiler_options))}")
    for arg in request.arguments:
        if isinstance(arg, TunableArgument):
            key = arg.key if isinstance(arg.key, str) else _describe(arg.key)
            each = "|".join(f"{o}:{_array(v)}" for o, v in arg.options)
            parts.append(f"tunable {key}{{{each}}}")
        else:
            parts.append(_array(arg))
    for name, value in request.cmem_args.items():
        parts.append(f"cmem {name}={value.dtype}[{'x'.join(map(str, value.shape))}]")
    if request.smem_size is not None:
        parts.append(f"smem={_describe(request.smem_size)}")
    if not all(isinstance(s, int) for s in _sizes(request.problem_size)):
        parts.append(f"problem_size={_describe(request.problem_size)}")
    if request.observables:
        # Observed, a study has readings the same kernel timed alone lacks: it is measured
        # afresh rather than resumed from evaluations without them.
        parts.append(f"observed={'+'.join(sorted(request.observables))}")
    if request.output_observers:  # likewise: their results are stored with each evaluation
        named = (f"{type(o).__name__}:{getattr(o, 'key', '')}" for o in request.output_observers)
        parts.append(f"outputs={'+'.join(named)}")
    return ",".join(parts)


def _array(value) -> str:
    if isinstance(value, np.ndarray):
        return f"{value.dtype}[{'x'.join(map(str, value.shape))}]"
    return f"{np.asarray(value).dtype}={value}"


def fixed_sizes(request: KernelRequest) -> tuple[int, int, int]:
    """X, Y, Z of the study's key: the problem size, 0 where it depends on the tunables."""
    sizes = [s if isinstance(s, int) else 0 for s in _sizes(request.problem_size)]
    return tuple((sizes + [1, 1, 1])[:3])  # type: ignore[return-value]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _sizes(size: Any) -> tuple:
    return (size,) if callable(size) else size


def _describe(value: Any) -> str:
    if callable(value):
        return getattr(value, "__qualname__", "function")
    return re.sub(r"\s+", "", str(value))


__all__ = ["bind_space", "evaluate_metric", "fixed_sizes", "signature"]
