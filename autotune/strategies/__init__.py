"""Registry of search strategies, one module each."""

from __future__ import annotations

from collections.abc import Callable

from autotune.model.space import BoundSpace
from autotune.strategies.base import Strategy, StrategyUnavailable
from autotune.strategies.brute_force import BruteForce
from autotune.strategies.local import LocalSearch
from autotune.strategies.optuna_sampler import OptunaStrategy, cmaes, gp, tpe
from autotune.strategies.random_sampling import RandomSampling
from autotune.strategies.surrogate import SurrogateSearch

STRATEGIES: dict[str, Callable[[BoundSpace, int | None], Strategy]] = {
    "brute_force": BruteForce,
    "random": RandomSampling,
    "tpe": tpe,
    "gp": gp,
    "cmaes": cmaes,
    "local": LocalSearch,
    "surrogate": SurrogateSearch,
}
# Best on Kernel Tuner's published spaces and level with `local` on ours:
# results/bench/search_published.md, results/bench/search_surrogate.md
DEFAULT_STRATEGY = "surrogate"


class UnknownStrategy(KeyError):
    def __str__(self) -> str:
        return f"unknown strategy {self.args[0]!r} (known: {', '.join(STRATEGIES)})"


def make_strategy(name: str, space: BoundSpace, seed: int | None = None) -> Strategy:
    """A fresh strategy over `space`; StrategyUnavailable if its optional dependency is missing."""
    try:
        factory = STRATEGIES[name]
    except KeyError:
        raise UnknownStrategy(name) from None
    return factory(space, seed)


__all__ = [
    "DEFAULT_STRATEGY",
    "STRATEGIES",
    "BruteForce",
    "LocalSearch",
    "OptunaStrategy",
    "RandomSampling",
    "Strategy",
    "StrategyUnavailable",
    "SurrogateSearch",
    "UnknownStrategy",
    "make_strategy",
]
