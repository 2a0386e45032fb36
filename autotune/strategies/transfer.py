"""Transfer across shapes: start a search at the best configs of the nearest tuned shapes."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from autotune.model.problem import Problem
from autotune.model.space import BoundSpace, Config
from autotune.strategies.base import Strategy
from autotune.strategies.local import Coordinates

# Seeds come from at most this many neighbouring shapes, nearest first: the nearest shapes'
# optima are usually close to the new one's, farther ones mostly cost evaluations.
MAX_SHAPES = 3
# The best few configs of each neighbour, not just its optimum: near-optimal configs of a shape
# are often the new shape's optimum when the optimum itself does not carry over.
PER_SHAPE = 3


def shape_distance(a: Problem, b: Problem) -> float:
    """Euclidean distance between two problems of one kind in log2 of their sizes (a batch of
    128 is as far from 64 as 64 from 32); infinite across kinds and across dtypes or layouts
    (named fields: a bf16 study's tiles say little about an fp32 one's)."""
    if a.kind != b.kind:
        return math.inf
    da, db = a.as_dict(), b.as_dict()
    texts = {k for k, v in (*da.items(), *db.items()) if isinstance(v, str)}
    if any(da.get(k) != db.get(k) for k in texts):
        return math.inf
    return math.sqrt(
        sum(
            (math.log2(max(1, da[k])) - math.log2(max(1, db.get(k, 1)))) ** 2
            for k in da
            if k not in texts
        )
    )


def transfer_seeds(
    problem: Problem,
    space: BoundSpace,
    neighbours: Iterable[tuple[Problem, Sequence[Config]]],
    max_shapes: int = MAX_SHAPES,
    per_shape: int = PER_SHAPE,
) -> list[Config]:
    """Valid configs of `space` to try first: the best configs of the nearest other shapes
    (given fastest first; every shape's best, then every shape's second...), each made valid for
    this shape as the nearest valid config (L1 over the parameters' value positions), without
    repeats."""
    others = [(shape_distance(problem, p), p.key, best) for p, best in neighbours]
    others = sorted(
        (o for o in others if o[1] != problem.key and math.isfinite(o[0])), key=lambda o: o[:2]
    )
    coords = Coordinates(space)
    seeds: list[Config] = []
    ranked = [best[:per_shape] for _, _, best in others[:max_shapes]]
    for rank in range(per_shape):
        for best in ranked:
            if rank < len(best):
                near = coords.nearest(best[rank])
                if near is not None and near not in seeds:
                    seeds.append(near)
    return seeds


def device_seeds(
    space: BoundSpace,
    others: Sequence[Sequence[Config]],
    max_devices: int = MAX_SHAPES,
    per_device: int = PER_SHAPE,
) -> list[Config]:
    """Transfer across GPUs: the best configs of the same space measured on other devices (each
    device's list fastest first), every device's best, then every device's second..., each made
    valid here as the nearest valid config, without repeats."""
    coords = Coordinates(space)
    seeds: list[Config] = []
    for rank in range(per_device):
        for best in others[:max_devices]:
            if rank < len(best):
                near = coords.nearest(best[rank])
                if near is not None and near not in seeds:
                    seeds.append(near)
    return seeds


class Transfer:
    """Asks the seeds first, then hands over to the inner strategy (which is told every
    result). An inner strategy with start_from() (local search) takes the seeds as its start and
    searches around the best of them at once; any other gets them told like history."""

    def __init__(self, inner: Strategy, seeds: Sequence[Config]) -> None:
        self.inner = inner
        self.name = f"transfer+{inner.name}"
        self._seeds = list(seeds)
        self._out: set[Config] = set()  # handed out here or by the inner strategy
        start = getattr(inner, "start_from", None)
        if start is not None:
            start(self._seeds)
            self._seeds = []

    def ask(self) -> Config | None:
        while self._seeds:
            config = self._seeds.pop(0)
            if config not in self._out:
                self._out.add(config)
                return config
        # The inner strategy may propose a seed still in flight: skip it, its result comes.
        while (config := self.inner.ask()) is not None:
            if config not in self._out:
                self._out.add(config)
                return config
        return None

    def tell(self, config: Config, time_ms: float | None) -> None:
        self._out.add(config)
        self.inner.tell(config, time_ms)


__all__ = [
    "MAX_SHAPES",
    "PER_SHAPE",
    "Transfer",
    "device_seeds",
    "shape_distance",
    "transfer_seeds",
]
