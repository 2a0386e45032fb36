"""The strategy contract: ask/tell search over the valid Configs of a bound space."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from autotune.model.space import Config


class Strategy(Protocol):
    """Proposes configs one at a time and learns from their times.

    ask() returns a valid config never asked or told before, or None when none is left. tell()
    takes the result of any config, asked or not (the tuner replays stored history before the
    first ask); time_ms None means the evaluation failed, whatever the status.
    """

    name: str

    def ask(self) -> Config | None: ...

    def tell(self, config: Config, time_ms: float | None) -> None: ...


class StrategyUnavailable(RuntimeError):
    """A registered strategy whose optional dependency is not installed."""


def first_unseen(candidates: Iterator[Config], seen: set[Config]) -> Config | None:
    """The next of `candidates` not in `seen` (now added to it), or None when they run out: how
    a strategy walks a list, or another strategy's asks, without asking a config twice."""
    for config in candidates:
        if config not in seen:
            seen.add(config)
            return config
    return None
