"""Kernel Tuner's strategies, their options and its objective, mapped onto ours."""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from autotune.kt.errors import TuneKernelError
from autotune.kt.observers import READINGS

if TYPE_CHECKING:
    from autotune.kt.arguments import KernelRequest

# Kernel Tuner's strategies that have a counterpart here, and ours by their own names.
KT_STRATEGIES = {
    "brute_force": "brute_force",
    "random_sample": "random",
    # Multi-start and iterated greedy local search: ours is a best-first local search from a
    # short random start (autotune/strategies/local.py), the same family of method.
    "greedy_mls": "local",
    "mls": "local",
    "ordered_greedy_mls": "local",
    "greedy_ils": "local",
    # A local optimiser of scipy.optimize.minimize's from a random start: a local search too.
    "minimize": "local",
}
OUR_STRATEGIES = ("local", "brute_force", "random", "tpe", "cmaes", "gp")
STRATEGY_OPTIONS = {"max_fevals", "time_limit", "fraction"}
RANDOM_SAMPLE_FRACTION = 0.1  # Kernel Tuner's random_sample without max_fevals or fraction


def positive_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise TuneKernelError(f"tune_kernel: {what} must be a positive integer, got {value!r}")
    return int(value)


def apply_objective(request: KernelRequest, objective: Any, higher: Any) -> None:
    """Kernel Tuner's objective: time, an observation (nvml_energy) or a metric's name."""
    if objective in (None, "time"):
        if higher not in (None, False):
            raise TuneKernelError("tune_kernel: objective_higher_is_better must be False for time")
        return
    named = [n for n in request.observables if n in READINGS] + list(request.metrics or {})
    if objective not in named:
        raise TuneKernelError(
            f"tune_kernel: objective={objective!r} names neither time, an observation of the "
            f"observers nor a metric (it may be one of: {', '.join(['time', *named])})"
        )
    if higher is not None and not isinstance(higher, bool):
        raise TuneKernelError("tune_kernel: objective_higher_is_better must be True or False")
    request.objective, request.higher_is_better = objective, bool(higher)


def apply_strategy(request: KernelRequest, strategy: Any, options: Any) -> None:
    if isinstance(strategy, ModuleType):  # Kernel Tuner's own module, e.g. strategies.minimize
        strategy = strategy.__name__.rpartition(".")[2]
    if strategy is None:
        request.strategy = "brute_force"  # Kernel Tuner's default
    elif strategy in KT_STRATEGIES:
        request.strategy = KT_STRATEGIES[strategy]
    elif strategy in OUR_STRATEGIES:
        request.strategy = strategy
    else:
        raise TuneKernelError(
            f"tune_kernel: strategy {strategy!r} is not supported; use one of "
            f"{', '.join([*KT_STRATEGIES, *OUR_STRATEGIES])}"
        )
    if options is not None and not isinstance(options, Mapping):
        raise TuneKernelError("tune_kernel: strategy_options must be a dict")
    options = dict(options or {})
    unknown = sorted(set(options) - STRATEGY_OPTIONS)
    if unknown:
        raise TuneKernelError(
            f"tune_kernel: strategy_options {', '.join(map(repr, unknown))} not supported "
            f"(supported: {', '.join(sorted(STRATEGY_OPTIONS))})"
        )
    if "max_fevals" in options:
        request.budget = positive_int(options["max_fevals"], "strategy_options['max_fevals']")
    if "time_limit" in options:
        limit = options["time_limit"]
        if (
            isinstance(limit, bool)
            or not isinstance(limit, int | float)
            or not math.isfinite(limit)
            or limit <= 0
        ):
            raise TuneKernelError("tune_kernel: strategy_options['time_limit'] must be seconds > 0")
        request.time_limit_s = float(limit)
    if "fraction" in options:
        fraction = options["fraction"]
        if not isinstance(fraction, int | float) or not 0 < fraction <= 1:
            raise TuneKernelError("tune_kernel: strategy_options['fraction'] must be in (0, 1]")
        request.fraction = float(fraction)
    elif strategy == "random_sample" and request.budget is None:
        request.fraction = RANDOM_SAMPLE_FRACTION


def budget(request: KernelRequest, space_size: int) -> int | None:
    """Evaluations to store: max_fevals, else a fraction of the space, else all of it (None)."""
    if request.fraction is not None and request.budget is None:
        return max(1, math.ceil(request.fraction * space_size))
    return request.budget


__all__ = ["KT_STRATEGIES", "apply_objective", "apply_strategy", "budget", "positive_int"]
