"""The surrogate strategy's own parts: its coordinates, its per-parameter kernel lengths and the cap
on slow times (the contract suite in test_strategies.py covers the rest)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from autotune.model.space import BoundSpace, Config, DeviceLimits, SearchSpace
from autotune.strategies.local import Coordinates
from autotune.strategies.surrogate import (
    ARD_LENGTHS,
    ARD_MIN,
    N_INIT,
    REFIT,
    SurrogateSearch,
    features,
)

SPACE = SearchSpace.from_dict(
    "surrogate",
    {
        "parameters": {
            "BLOCK": [1, 2, 4, 8, 16, 32, 64, 128],
            "TILE": [1, 2, 3, 4, 5, 6],
            "OFFSET": [0, 1, 2],
            "LAYOUT": ["nchw", "nhwc", "chwn"],
            "FIXED": [7],
        },
        "constraints": [],
    },
)


@pytest.fixture(scope="module")
def space() -> BoundSpace:
    return SPACE.bind({}, DeviceLimits())


def test_features_are_log2_positions_and_one_hot_categories(space: BoundSpace) -> None:
    coords = Coordinates(space)
    x, groups = features(coords)
    # BLOCK, TILE, OFFSET one column each, LAYOUT three, FIXED none.
    assert [len(g) for g in groups] == [1, 1, 1, 3]
    assert sorted(np.concatenate(groups).tolist()) == list(range(x.shape[1])) == list(range(6))
    for i, config in enumerate(coords.configs):
        d = config.as_dict()
        assert x[i, 0] == pytest.approx(math.log2(d["BLOCK"]) / 7)  # powers of two: even steps
        assert x[i, 1] == pytest.approx(math.log2(d["TILE"]) / math.log2(6))
        assert x[i, 2] == pytest.approx(d["OFFSET"] / 2)  # a zero among the values: positions
        assert x[i, 3:].sum() == pytest.approx(1 / math.sqrt(2))


def test_a_parameter_the_time_ignores_gets_the_longest_length(space: BoundSpace) -> None:
    def time_ms(config) -> float:
        d = config.as_dict()
        return math.exp(0.5 * (math.log2(d["BLOCK"]) - 4) ** 2)  # BLOCK alone matters

    strategy = SurrogateSearch(space, seed=0)
    for config in space.configs[::20]:  # fewer than HAND_OVER: the model still asks
        strategy.tell(config, time_ms(config))
    for _ in range(N_INIT + 1):  # random starts, then the model's first ask fits the lengths
        config = strategy.ask()
        strategy.tell(config, time_ms(config))
    assert len(space.configs[::20]) + N_INIT >= ARD_MIN
    block, tile, offset, layout = strategy._lengths
    assert max(tile, offset, layout) == ARD_LENGTHS[-1]
    assert block < ARD_LENGTHS[-1]


def test_how_much_slower_the_slowest_config_is_does_not_steer_the_search(
    space: BoundSpace,
) -> None:
    def run(slowest_ms: float) -> list:
        strategy = SurrogateSearch(space, seed=3)
        history = space.configs[::11]
        for i, config in enumerate(history):
            d = config.as_dict()
            t = 1.0 + 0.1 * abs(math.log2(d["BLOCK"]) - 3) + 0.05 * d["TILE"]
            strategy.tell(config, slowest_ms if i == 0 else t)
        asked = []
        for _ in range(10):
            config = strategy.ask()
            asked.append(config)
            strategy.tell(config, 1.0 + 0.05 * len(asked))
        return asked

    # Both are far above the median, so both count as the cap: the same asks.
    assert run(1e3) == run(1e6)


def test_one_length_for_all_before_enough_results(space: BoundSpace) -> None:
    strategy = SurrogateSearch(space, seed=1)
    for _ in range(N_INIT + 1):
        config = strategy.ask()
        strategy.tell(config, 1.0 + math.log2(config.as_dict()["BLOCK"]))
    assert N_INIT + 1 < ARD_MIN
    assert len(set(strategy._lengths.tolist())) == 1


def test_a_prior_that_ranks_the_space_leads_the_model_to_the_optimum(space: BoundSpace) -> None:
    """Given another device's ranking as its prior mean, the model's first asks after one result
    go where that ranking points; without it they cannot know."""

    def time_ms(config) -> float:
        d = config.as_dict()
        return 1.0 + abs(math.log2(d["BLOCK"]) - 5) + 0.3 * abs(d["TILE"] - 4) + 0.2 * d["OFFSET"]

    times = np.array([time_ms(c) for c in space.configs])
    optimum = times.min()

    def asks_to_optimum(prior) -> int:
        strategy = SurrogateSearch(space, seed=2)
        if prior is not None:
            strategy.use_prior(prior)
        strategy.start_from([space.configs[int(np.argmax(times))]])  # start at the slowest
        for n in range(1, 60):
            config = strategy.ask()
            strategy.tell(config, time_ms(config))
            if time_ms(config) == optimum:
                return n
        return 60

    with_prior = asks_to_optimum(np.log(times) + 0.01 * np.sin(np.arange(len(times))))
    assert with_prior <= 4
    assert asks_to_optimum(None) > with_prior


def test_a_prior_of_unknowns_only_is_ignored(space: BoundSpace) -> None:
    strategy = SurrogateSearch(space, seed=0)
    strategy.use_prior(np.full(len(space.configs), np.nan))
    assert strategy._prior is None


def test_the_start_spreads_over_a_large_space_and_not_a_small_one(space, monkeypatch) -> None:
    """From the second config on, the random start takes the farthest of INIT_POOL random
    configs from those seen (in spaces of SPREAD_MIN configs or more): the second config lies
    in the farthest tenth of the space from the first."""
    from autotune.strategies import surrogate

    def second_distance_rank() -> float:
        strategy = SurrogateSearch(space, seed=5)
        first = strategy.ask()
        strategy.tell(first, 1.0)
        second = strategy.ask()
        x = strategy._x
        i, j = strategy._coords.index[first], strategy._coords.index[second]
        d = ((x - x[i]) ** 2).sum(axis=1)
        return float((d < d[j]).mean())

    assert len(space) < surrogate.SPREAD_MIN
    monkeypatch.setattr(surrogate, "SPREAD_MIN", 0)
    assert second_distance_rank() >= 0.9


def _differ(a, b) -> int:
    return sum(a.as_dict()[k] != v for k, v in b.as_dict().items())


def test_the_trust_region_halves_without_progress_opens_below_one_and_doubles_on_a_new_best(
    space: BoundSpace,
) -> None:
    strategy = SurrogateSearch(space, seed=0)
    configs = iter(space.configs)
    assert strategy._region_full == 4  # FIXED takes one value
    radii = []
    for time_ms in [1.0] * N_INIT + [2.0] * 9 + [0.5, 0.25, 0.1, 3.0, None, 3.0]:
        strategy.tell(next(configs), time_ms)
        radii.append(strategy._radius)
    assert radii[:N_INIT] == [2] * N_INIT  # the random start moves nothing
    # Three results without a new best halve it (2 -> 1); below 1 the whole space (4); then 2.
    assert radii[N_INIT:] == [2, 2, 1, 1, 1, 4, 4, 4, 2, 4, 4, 4, 4, 4, 2]


def test_a_cold_search_asks_near_its_best_and_a_warm_one_anywhere(space: BoundSpace) -> None:
    def time_ms(config) -> float:
        d = config.as_dict()
        return (math.log2(d["BLOCK"]) - 5) ** 2 + (d["TILE"] - 3) ** 2 + d["OFFSET"] + 1

    cold = SurrogateSearch(space, seed=1)
    best = None
    checked = 0
    for step in range(30):
        radius, config = cold._radius, cold.ask()
        if step >= N_INIT and radius < cold._region_full:
            assert _differ(config, best) <= radius, (step, radius, config, best)
            checked += 1
        cold.tell(config, time_ms(config))
        if best is None or time_ms(config) < time_ms(best):
            best = config
    assert checked >= 10
    # Started from given configs, the same ask weighs candidates in the whole space.
    warm = SurrogateSearch(space, seed=1)
    warm.start_from(space.configs[:N_INIT])
    for _ in range(N_INIT + 1):
        config = warm.ask()
        warm.tell(config, time_ms(config))
    told = np.array(warm._told)
    order = told[np.argsort([time_ms(space.configs[i]) for i in told])]
    rows = warm._coords.rows
    warm._radius = cold._radius = 1
    for strategy, anywhere in ((warm, True), (cold, False)):
        differ = (rows[strategy._candidates(order)] != rows[order[0]]).sum(axis=1)
        assert (differ > 1).any() == anywhere


def test_a_new_parameter_no_result_varies_takes_the_longest_length_when_named(
    space: BoundSpace,
) -> None:
    """A tunable added to the kernel after the stored results, all at its old value (OFFSET 0
    here, LAYOUT nhwc): the likelihood is the same at every length and the tie gives the
    shortest (a constant column off zero: whichever length its rounding favours), so that its
    other values read as the mean of all results. Named as new, it takes the longest while no
    result varies it (its other values read as their tried twins) and they are asked at once
    beside the best; then the fit decides as for any other."""

    def time_ms(config) -> float:
        d = config.as_dict()
        fast = 0.8 if d["OFFSET"] == 2 else 1.0  # the new value is the better one
        return fast * math.exp(0.3 * (math.log2(d["BLOCK"]) - 4) ** 2 + 0.1 * d["TILE"])

    def run(new: list[str]) -> tuple[SurrogateSearch, Config]:
        strategy = SurrogateSearch(space, seed=0)
        strategy.new_parameters(new)
        old = [c for c in space.configs if c["OFFSET"] == 0 and c["LAYOUT"] == "nhwc"]
        for config in old[::2]:
            strategy.tell(config, time_ms(config))
        strategy.start_from([])  # warm, as the tuner starts it: no random configs
        return strategy, strategy.ask()

    offset = 2  # the groups: BLOCK, TILE, OFFSET, LAYOUT
    tie, _ = run([])
    assert tie._lengths[offset] == ARD_LENGTHS[0]
    named, first = run(["OFFSET", "NOT_A_PARAMETER"])
    assert named._lengths[offset] == ARD_LENGTHS[-1]
    assert first["OFFSET"] != 0
    # Once a result varies it, the fit decides its length as it does unnamed.
    for strategy in (named, tie):
        strategy.tell(first, time_ms(first))
        strategy._since_fit = REFIT  # refit at the next ask
        strategy.ask()
    assert named._lengths.tolist() == tie._lengths.tolist()
