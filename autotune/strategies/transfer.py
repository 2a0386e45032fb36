"""Transfer: start a search at the best configs of the nearest tuned shapes, or of the same space
on other GPUs (whose ranking then also serves as the model's prior mean)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from autotune.model.problem import Problem
from autotune.model.space import BoundSpace, Config
from autotune.strategies.base import Strategy, first_unseen
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
    ranked = [best[:per_shape] for _, _, best in others[:max_shapes]]
    return made_valid(space, (b[r] for r in range(per_shape) for b in ranked if r < len(b)))


def device_seeds(
    space: BoundSpace,
    others: Sequence[Sequence[Config]],
    max_devices: int = MAX_SHAPES,
    per_device: int = PER_SHAPE,
) -> list[Config]:
    """Transfer across GPUs: the best configs of the same space measured on other devices (each
    device's list fastest first), every device's best, then every device's second..., each made
    valid here as the nearest valid config, without repeats."""
    ranked = others[:max_devices]
    return made_valid(space, (b[r] for r in range(per_device) for b in ranked if r < len(b)))


def made_valid(space: BoundSpace, configs: Iterable[Config]) -> list[Config]:
    """Each config made valid for `space` as the nearest valid config (itself if valid), in
    the order given, without repeats: how seeds from elsewhere become this space's."""
    coords = Coordinates(space)
    seeds: list[Config] = []
    for config in configs:
        near = coords.nearest(config)
        if near is not None and near not in seeds:
            seeds.append(near)
    return seeds


# Transfer across GPUs by rank: seeds from the other devices' results, at most this many (or
# one per device, if more): their consensus best, each device's best, then the consensus's next.
# On Kernel Tuner's published spaces (seeds 0-9) this start reaches the same as each device's
# three best (0.957 at 20); the consensus as the model's prior mean then adds 0.014 at 50.
WARM_SEEDS = 6


def device_prior(space: BoundSpace, others: Sequence[Mapping[Config, float | None]]) -> np.ndarray:
    """Per valid config of `space` (in its order), the mean over the other devices of its rank
    there as a fraction (0 the fastest measured, 1 the slowest; a failure 1); NaN where no other
    device measured it. Ranks, not times: devices differ in speed, and a ranking carries over
    where a time does not."""
    coords = Coordinates(space)
    total = np.zeros(len(coords.configs))
    count = np.zeros(len(coords.configs))
    for times in others:
        idx, vals = [], []
        for config, t in times.items():
            i = coords.index.get(config)
            if i is not None:
                idx.append(i)
                vals.append(t if t is not None and 0 < t < math.inf else math.inf)
        if len(idx) < 2:
            continue  # one result ranks nothing
        v = np.array(vals)
        score = np.empty(len(v))
        score[np.argsort(v, kind="stable")] = np.arange(len(v)) / (len(v) - 1.0)
        score[np.isinf(v)] = 1.0  # every failure last, none ahead of another
        total[idx] += score
        count[idx] += 1
    out = np.full(len(coords.configs), np.nan)
    out[count > 0] = total[count > 0] / count[count > 0]
    return out


def warm_seeds(
    space: BoundSpace, prior: np.ndarray, others: Sequence[Mapping[Config, float | None]]
) -> list[Config]:
    """The configs to ask first (see WARM_SEEDS): the prior's best, every device's best made
    valid here (a device much like this one may disagree with the rest), the prior's next."""
    coords = Coordinates(space)
    known = np.flatnonzero(~np.isnan(prior))
    ranked = [coords.configs[i] for i in known[np.argsort(prior[known], kind="stable")]]
    best = [
        [c for _, _, c in sorted((t, c.to_json(), c) for c, t in times.items() if t is not None)]
        for times in others
    ]
    per_device = device_seeds(space, [b[:1] for b in best])
    seeds: list[Config] = []
    for config in (*ranked[:1], *per_device, *ranked[1:WARM_SEEDS]):
        if config not in seeds:
            seeds.append(config)
    return seeds[: max(WARM_SEEDS, len(per_device))]


def warm_across_devices(
    strategy: Strategy, space: BoundSpace, others: Sequence[Mapping[Config, float | None]]
) -> Strategy:
    """The strategy started at warm_seeds, its model given the other devices' mean rank as its
    prior mean where it takes one (use_prior); unchanged when no other device measured a config
    of this space; started at the devices' bests alone where none measured two configs (no
    ranking then). `others`: per other device, config -> time (None: failed)."""
    prior = device_prior(space, others)
    if np.isnan(prior).all():
        if not any(t is not None for times in others for t in times.values()):
            return strategy
        # One result per device (a shipped best) ranks nothing, yet each is a place to start.
        return Transfer(strategy, warm_seeds(space, prior, others))
    use_prior = getattr(strategy, "use_prior", None)
    if use_prior is not None:
        use_prior(prior)
    return Transfer(strategy, warm_seeds(space, prior, others))


class Transfer:
    """Asks the seeds first, then hands over to the inner strategy (which is told every
    result). An inner strategy with start_from() (local search) takes the seeds as its start and
    searches around the best of them at once; any other gets them told like history."""

    def __init__(self, inner: Strategy, seeds: Sequence[Config]) -> None:
        self.inner = inner
        self.name = f"transfer+{inner.name}"
        self._out: set[Config] = set()  # handed out here or by the inner strategy
        start = getattr(inner, "start_from", None)
        if start is not None:
            start(list(seeds))
            seeds = ()
        self._seeds = list(seeds)
        self._unasked = iter(self._seeds)

    def ask(self) -> Config | None:
        config = first_unseen(self._unasked, self._out)
        if config is None:
            # The inner strategy may propose a seed still in flight: skip it, its result comes.
            config = first_unseen(iter(self.inner.ask, None), self._out)
        return config

    def tell(self, config: Config, time_ms: float | None) -> None:
        self._out.add(config)
        self.inner.tell(config, time_ms)


__all__ = [
    "MAX_SHAPES",
    "PER_SHAPE",
    "Transfer",
    "device_prior",
    "device_seeds",
    "made_valid",
    "shape_distance",
    "transfer_seeds",
    "warm_across_devices",
]
