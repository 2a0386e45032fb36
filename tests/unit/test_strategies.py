"""One contract suite over every registered strategy, on synthetic spaces and cost functions."""

from __future__ import annotations

import math
import statistics

import pytest

from autotune.model.space import BoundSpace, Config, DeviceLimits, SearchSpace
from autotune.strategies import (
    DEFAULT_STRATEGY,
    STRATEGIES,
    Strategy,
    StrategyUnavailable,
    UnknownStrategy,
    make_strategy,
)

# Half of each product is invalid, so a sampler that ignores the constraints is caught; a
# string parameter and a boolean exercise the categorical encoding, VECTOR a fixed one.
SMALL = SearchSpace.from_dict(
    "small",
    {
        "parameters": {
            "BLOCK_X": [8, 16, 32, 64],
            "BLOCK_Y": [1, 2, 4, 8],
            "TILE": [1, 2, 3],
            "LAYOUT": ["nchw", "chwn"],
            "UNROLL": [True, False],
            "VECTOR": [4],
        },
        "constraints": [
            "BLOCK_X * BLOCK_Y >= 64",
            "BLOCK_X * BLOCK_Y <= 128",
            "TILE <= K",
            "not (UNROLL and TILE == 1)",
            "LAYOUT == 'nchw' or BLOCK_X >= 32",
        ],
    },
)
BIG = SearchSpace.from_dict(
    "big",
    {
        "parameters": {
            "BLOCK_X": [1, 2, 4, 8, 16, 32, 64, 128],
            "BLOCK_Y": [1, 2, 4, 8, 16, 32],
            "TILE_X": [1, 2, 3, 4, 5, 6],
            "TILE_Y": [1, 2, 4, 8],
            "UNROLL": [True, False],
        },
        "constraints": [
            "BLOCK_X * BLOCK_Y <= MAX_THREADS // 4",
            "BLOCK_X * BLOCK_Y >= WARP_SIZE",
            "TILE_X * TILE_Y <= 8",
        ],
    },
)


@pytest.fixture(scope="module")
def small() -> BoundSpace:
    space = SMALL.bind({"K": 2, "N": 16}, DeviceLimits())
    assert 25 <= len(space) <= 40 and len(space) < SMALL.cartesian_size / 2
    return space


@pytest.fixture(scope="module")
def big() -> BoundSpace:
    space = BIG.bind({"N": 64}, DeviceLimits())
    assert 450 <= len(space) <= 650
    return space


def cost(config: Config) -> float | None:
    """A smooth bowl over the parameters (in log2 for powers of two), with a few failures."""
    d = config.as_dict()
    if d["BLOCK_X"] * d["BLOCK_Y"] == 128 and d.get("UNROLL") is True:
        return None  # as if it ran out of registers
    bowl = (math.log2(d["BLOCK_X"]) - 5) ** 2 + (math.log2(d["BLOCK_Y"]) - 2) ** 2
    bowl += 0.5 * (d.get("TILE", d.get("TILE_X", 3)) - 3) ** 2
    bowl += (math.log2(d.get("TILE_Y", 2)) - 1) ** 2 + (0.3 if d["UNROLL"] else 0.0)
    bowl += 0.2 if d.get("LAYOUT") == "chwn" else 0.0
    return 0.05 * math.exp(0.2 * bowl)


@pytest.fixture(params=list(STRATEGIES))
def name(request: pytest.FixtureRequest, small: BoundSpace) -> str:
    try:
        make_strategy(request.param, small, seed=0)
    except StrategyUnavailable as err:
        pytest.skip(str(err))
    return request.param


def drain(strategy: Strategy, space: BoundSpace, in_flight: int = 1) -> list[Config]:
    """Ask (a few at a time) until the strategy has nothing left, telling the cost of each."""
    asked: list[Config] = []
    while True:
        batch = [c for c in (strategy.ask() for _ in range(in_flight)) if c is not None]
        if not batch:
            return asked
        for config in batch:
            assert space.is_valid(config), config
        asked += batch
        for config in reversed(batch):
            strategy.tell(config, cost(config))
        assert len(asked) <= len(space), "asked more configs than the space holds"


def test_registry() -> None:
    assert DEFAULT_STRATEGY in STRATEGIES
    assert set(STRATEGIES) == {
        "brute_force",
        "random",
        "tpe",
        "gp",
        "cmaes",
        "local",
        "surrogate",
    }


def test_unknown_strategy_names_the_known_ones(small: BoundSpace) -> None:
    with pytest.raises(UnknownStrategy) as info:
        make_strategy("simulated_annealing", small, seed=0)
    message = str(info.value)
    assert "\n" not in message and "simulated_annealing" in message
    assert all(known in message for known in STRATEGIES)


def test_name_matches_registry(name: str, small: BoundSpace) -> None:
    assert make_strategy(name, small, seed=0).name == name


def test_visits_the_whole_valid_space_once(name: str, small: BoundSpace) -> None:
    strategy = make_strategy(name, small, seed=1)
    asked = drain(strategy, small)
    assert len(asked) == len(set(asked)) == len(small)
    assert set(asked) == set(small.configs)
    assert strategy.ask() is None


def test_history_is_never_asked_again(name: str, small: BoundSpace) -> None:
    history = small.configs[::2]
    strategy = make_strategy(name, small, seed=2)
    for config in history:
        strategy.tell(config, cost(config))
    # Stored history may hold configs this space no longer allows or knows.
    strategy.tell(Config.of({**small.configs[0].as_dict(), "BLOCK_X": 4}), 1.0)
    strategy.tell(Config.of({"OTHER": 1}), None)
    asked = drain(strategy, small)
    assert len(asked) == len(set(asked))
    assert set(asked) == set(small.configs) - set(history)


def test_asks_in_flight_are_not_repeated(name: str, small: BoundSpace) -> None:
    asked = drain(make_strategy(name, small, seed=3), small, in_flight=4)
    assert len(asked) == len(set(asked)) == len(small)


def test_failures_do_not_break_it(name: str, small: BoundSpace) -> None:
    strategy = make_strategy(name, small, seed=4)
    asked = []
    while (config := strategy.ask()) is not None:
        assert small.is_valid(config) and config not in asked
        asked.append(config)
        strategy.tell(config, None)
    assert len(asked) == len(small)


def test_deterministic_under_a_seed(name: str, small: BoundSpace) -> None:
    def run() -> list[Config]:
        strategy = make_strategy(name, small, seed=5)
        for config in small.configs[:3]:
            strategy.tell(config, cost(config))
        return drain(strategy, small, in_flight=2)[:20]

    assert run() == run()


@pytest.mark.slow
def test_tpe_beats_the_median(big: BoundSpace) -> None:
    times = [t for t in map(cost, big.configs) if t is not None]
    median = statistics.median(times)
    for seed in range(3):
        strategy = make_strategy("tpe", big, seed=seed)
        best = math.inf
        for _ in range(60):
            config = strategy.ask()
            assert config is not None
            time_ms = cost(config)
            strategy.tell(config, time_ms)
            best = min(best, math.inf if time_ms is None else time_ms)
        assert best <= median, f"seed {seed}: best {best} worse than the median {median}"


def test_transfer_over_every_strategy_keeps_the_contract(name: str, small: BoundSpace) -> None:
    from autotune.strategies.transfer import Transfer, transfer_seeds

    # Seeds from another "shape": one invalid here, one repeated, one valid.
    invalid = Config.of({**small.configs[0].as_dict(), "BLOCK_X": 8, "BLOCK_Y": 1})
    assert not small.is_valid(invalid)
    other = ConvLike(N=32)
    seeds = transfer_seeds(ConvLike(N=16), small, [(other, [invalid, small.configs[3]] * 2)])
    assert seeds and all(small.is_valid(c) for c in seeds) and len(seeds) == len(set(seeds))
    strategy = Transfer(make_strategy(name, small, seed=6), seeds)
    asked = drain(strategy, small, in_flight=3)
    assert asked[: len(seeds)] == seeds
    assert len(asked) == len(set(asked)) == len(small)


@pytest.mark.parametrize("model_based", ["local", "surrogate"])
def test_model_based_search_finds_the_bowl(model_based: str, big: BoundSpace) -> None:
    times = sorted(t for t in map(cost, big.configs) if t is not None)
    for seed in range(5):
        strategy = make_strategy(model_based, big, seed=seed)
        best = math.inf
        for _ in range(60):
            config = strategy.ask()
            time_ms = cost(config)
            strategy.tell(config, time_ms)
            best = min(best, math.inf if time_ms is None else time_ms)
        # A smooth bowl: 60 of ~550 evaluations reach the best 2 %.
        assert best <= times[len(times) // 50], f"seed {seed}: best {best}"


class ConvLike:
    """Just enough of a problem for shape distances (one field, N)."""

    kind = "conv2d"

    def __init__(self, N: int) -> None:  # noqa: N803 - the problem's own field name
        self.N = N
        self.key = f"N={N}"

    def as_dict(self) -> dict[str, int]:
        return {"N": self.N}


def test_optuna_is_imported_only_when_one_of_its_samplers_is_made() -> None:
    # A Kernel Tuner script's start pays for what it imports: Optuna's import is 0.2 s.
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from autotune import tune_kernel\n"
        "import autotune.strategies as s\n"
        "print('optuna' in sys.modules, end=' ')\n"
        "from autotune.model.space import DeviceLimits, Parameter, SearchSpace\n"
        "space = SearchSpace('s', [Parameter('A', (1, 2, 3, 4))]).bind({}, DeviceLimits())\n"
        "s.make_strategy('tpe', space, 0)\n"
        "print('optuna' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "False True", done.stderr
