"""The strategy contract: ask/tell search over the valid Configs of a bound space."""

from __future__ import annotations

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
