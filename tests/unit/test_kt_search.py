"""`autotune bench search` on spaces recorded by Kernel Tuner: its strategies in simulation mode
on the same spaces as ours, and transfer across GPUs (synthetic cache files)."""

from __future__ import annotations

import numpy as np
import pytest

from autotune.bench.kt_search import DEFAULT_WARM, TRANSFER_GPU, other_devices, versus_kt
from autotune.bench.scoring import Case
from autotune.bench.search import benchmark
from autotune.kt.cache import read_kt_file
from autotune.model.space import Config
from autotune.strategies import DEFAULT_STRATEGY, make_strategy
from autotune.strategies.transfer import device_seeds
from tests.unit.test_kt_cache import cache_data, write


def cases_of(tmp_path) -> list[Case]:
    studies = [
        read_kt_file(write(tmp_path / f"{d}.json", cache_data(d, shift=s)), family="toy")
        for d, s in (("GPU A", 0), ("GPU B", 1))
    ]
    return [Case.of(s) for s in studies]


def test_transfer_across_gpus_starts_at_the_other_gpus_best(tmp_path) -> None:
    a, b = cases_of(tmp_path)
    (best_b,) = other_devices(a, [a, b])
    assert best_b[0] == Config.of({"block_size_x": 128, "tile": 2, "use_shmem": 0})
    seeds = device_seeds(a.space, [best_b])
    assert seeds[0] == best_b[0] and all(a.space.is_valid(c) for c in seeds)


def test_kernel_tuner_strategies_run_on_the_same_space_in_simulation_mode(tmp_path) -> None:
    pytest.importorskip("kernel_tuner")
    cases = cases_of(tmp_path)
    # The default's rows are what the comparison with Kernel Tuner reads.
    names = [DEFAULT_STRATEGY, TRANSFER_GPU, DEFAULT_WARM, "kt_random_sample", "kt_greedy_ils"]
    frame, ask = benchmark(cases, names, seeds=2, budgets=(3, 24), jobs=1)
    every = frame[frame["space"] == "ALL"].set_index(["strategy", "budget"])
    # Every config (failures too) is one evaluation: 24 of them find the optimum.
    for name in names:
        assert every.loc[(name, 24), "fraction_of_optimum"] == pytest.approx(1.0)
    assert every.loc[("kt_random_sample", 3), "fraction_of_optimum"] < 1.0
    lines = "\n".join(versus_kt(frame, DEFAULT_STRATEGY))
    assert "| 24 | 1.000 | 1.000 | 1.000 | kt_" in lines
    assert set(ask["strategy"]) == set(names)


def test_local_search_restarts_off_a_plateau_of_near_equal_configs() -> None:
    """On the published point-in-polygon space of the RTX 3090, seed 0 of the walk settles on a
    plateau at 0.868 of the optimum (31 block sizes of near-equal time around each centre) and,
    without restarts, stays there for all 300 evaluations; restarting the walk finds the
    optimum."""
    from autotune.bench import search
    from autotune.replay.recording import load_recording
    from tests.unit.test_kt_cache import REPO

    path = REPO / "results/recordings/kernel_tuner/pnpoly_NVIDIA_GeForce_RTX_3090.jsonl.gz"
    search._CASES[:] = [Case.of(load_recording(path)[0])]
    _, _, _, trajectory, _, _ = search.run_one(("local", 0, 0, 300, "local"))
    assert trajectory[-1] == pytest.approx(1.0)


def test_without_kernel_tuner_its_strategies_are_left_out_with_the_reason(
    tmp_path, monkeypatch
) -> None:
    from autotune.bench import kt_search, search

    cases = cases_of(tmp_path)
    monkeypatch.setattr(kt_search.importlib.util, "find_spec", lambda name: None)
    ok, skipped = search.available(["local", "kt_genetic_algorithm"], cases)
    assert ok == ["local"]
    assert skipped == [
        "kt_genetic_algorithm: Kernel Tuner is not installed: pip install -e '.[bench]' "
        "(kernel_tuner==1.5.0)"
    ]


def test_an_unknown_kernel_tuner_strategy_is_named(tmp_path) -> None:
    pytest.importorskip("kernel_tuner")
    from autotune.bench import search

    ok, skipped = search.available(["kt_no_such_thing"], cases_of(tmp_path))
    assert ok == [] and skipped == [
        "kt_no_such_thing: Kernel Tuner has no strategy 'no_such_thing'"
    ]


def test_device_prior_is_the_mean_rank_on_the_other_devices(tmp_path) -> None:
    from autotune.strategies.transfer import device_prior

    a, b = cases_of(tmp_path)
    configs = a.space.configs
    fast, mid, slow, failed, unknown = configs[:5]
    one = {fast: 1.0, mid: 2.0, slow: 3.0, failed: None}
    two = {fast: 2.0, mid: 1.0, failed: None}
    prior = device_prior(a.space, [one, two])
    # Ranks as fractions of each device's list (0 fastest, a failure last), then averaged.
    assert prior[:4].tolist() == pytest.approx([(0 + 0.5) / 2, (1 / 3 + 0) / 2, 2 / 3, 1.0])
    assert np.isnan(prior[4]) and np.isnan(prior[5:]).all()


def test_the_warm_default_starts_at_the_other_gpus_consensus_best(tmp_path) -> None:
    from autotune.bench import search
    from autotune.strategies.transfer import Transfer, warm_across_devices

    a, b = cases_of(tmp_path)
    search._CASES[:] = [a, b]
    warm = search.make_for(DEFAULT_WARM, a, 0, DEFAULT_STRATEGY)
    assert isinstance(warm, Transfer) and warm.inner._prior is not None
    best_b = min((t, c.to_json(), c) for c, t in b.ok.items() if t is not None)[2]
    assert warm.ask() == best_b
    # No other device measured anything of this space: the strategy is left as it was.
    cold = make_strategy(DEFAULT_STRATEGY, a.space, 0)
    assert warm_across_devices(cold, a.space, [{}]) is cold
