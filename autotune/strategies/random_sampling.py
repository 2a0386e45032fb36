"""Random sampling: a seeded permutation of the valid configs, without repeats."""

from __future__ import annotations

import random

from autotune.model.space import Config
from autotune.strategies.brute_force import BruteForce


class RandomSampling(BruteForce):
    name = "random"

    def _ordered(self, configs: list[Config], seed: int | None) -> list[Config]:
        # The stdlib generator, so an order stays the same across NumPy versions.
        order = list(configs)
        random.Random(seed).shuffle(order)
        return order
