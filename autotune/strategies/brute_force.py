"""Brute force: every valid config in enumeration order."""

from __future__ import annotations

from autotune.model.space import BoundSpace, Config
from autotune.strategies.base import first_unseen


class BruteForce:
    name = "brute_force"

    def __init__(self, space: BoundSpace, seed: int | None = None) -> None:
        self._walk = iter(self._ordered(space.configs, seed))
        self._seen: set[Config] = set()

    def _ordered(self, configs: list[Config], seed: int | None) -> list[Config]:
        return list(configs)

    def ask(self) -> Config | None:
        return first_unseen(self._walk, self._seen)

    def tell(self, config: Config, time_ms: float | None) -> None:
        # History told before (or between) asks is skipped when the walk reaches it.
        self._seen.add(config)


class GivenConfigs(BruteForce):
    """Exactly the configs given, in their order (those told before are passed over): no search,
    for re-measuring known configurations under the tuner's budgets, resume and records."""

    name = "given"

    def __init__(self, configs: list[Config]) -> None:
        self._walk = iter(list(dict.fromkeys(configs)))
        self._seen = set()
