"""Recordings, replay through the real tuner, transfer seeds and `autotune bench search`, on small
synthetic recordings (no GPU, no NVRTC)."""

from __future__ import annotations

import gzip
import itertools
import math
import random

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from autotune.bench.scoring import COLUMNS, Case, expected_random, p_score
from autotune.bench.search import benchmark
from autotune.cli.app import main
from autotune.families import get_family
from autotune.model.problem import ConvProblem
from autotune.model.records import DeviceInfo, Measurement, Status
from autotune.model.space import ARCH_LIMITS, Config
from autotune.replay.recording import (
    Outcome,
    RecordedStudy,
    export_studies,
    load_recording,
    save_recording,
)
from autotune.replay.runner import ReplayMissing, ReplayRunner
from autotune.replay.subspaces import SUBSPACE_DIR, load_pins, restrict
from autotune.store import Store
from autotune.strategies import DEFAULT_STRATEGY, make_strategy
from autotune.strategies.local import Coordinates
from autotune.strategies.transfer import Transfer, shape_distance, transfer_seeds
from autotune.tuning.studies import plan_studies
from autotune.tuning.tuner import Tuner

DEVICE = "Recorded GPU"
SHAPES = [
    ConvProblem(N=29, K=5, C=7, F=9),
    ConvProblem(N=33, K=5, C=7, F=9),
    ConvProblem(N=64, K=3, C=8, F=16),
]


def synthetic_time(config: Config, problem: ConvProblem) -> Outcome:
    """A bowl around 32 x 4 threads that moves a little with the shape, and some failures."""
    d = config.as_dict()
    if d["BLOCK_X"] * d["BLOCK_Y"] == 512:
        return Outcome(Status.WRONG_RESULT, None, "synthetic mismatch")
    x = math.log2(d["BLOCK_X"]) - (5 if problem.N < 60 else 6)
    y = math.log2(d["BLOCK_Y"]) - 2
    return Outcome(Status.OK, 0.1 * (1 + x * x + y * y + 0.5 * d["FILTER_IN_CONST"]))


def recorded(problem: ConvProblem, family: str = "direct_naive") -> RecordedStudy:
    study = RecordedStudy(family, problem, DEVICE)
    for config in study.space().configs:
        study.outcomes[config] = synthetic_time(config, problem)
    return study


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("rec") / "synthetic.jsonl.gz"
    save_recording([recorded(p) for p in SHAPES], path)
    return str(path)


# ---------------------------------------------------------------------------------------------
# Recording format and export


def test_recording_round_trips_and_knows_it_is_exhaustive(recording) -> None:
    studies = load_recording(recording)
    assert [s.problem for s in studies] == SHAPES
    for s, p in zip(studies, SHAPES, strict=True):
        assert s.family == "direct_naive" and s.device == DEVICE
        assert s.outcomes == recorded(p).outcomes
        assert s.exhaustive() and s.missing() == 0
    header = gzip.open(recording, "rt").read().splitlines()[1]
    assert '"exhaustive": true' in header
    partial = recorded(SHAPES[0])
    partial.outcomes.pop(next(iter(partial.outcomes)))
    assert not partial.exhaustive() and partial.missing() == 1


def test_export_from_a_store_keeps_status_time_and_the_subspace(tmp_path) -> None:
    store = Store(str(tmp_path / "r.db"))
    device = store.register_device(DeviceInfo(DEVICE, "9.0", 132, nvrtc_version="13.0"))
    run = store.start_run(device, "test", {})
    problem = SHAPES[0]
    study = recorded(problem)
    for config, o in study.outcomes.items():
        m = (
            Measurement.from_samples([o.time_ms])
            if o.status is Status.OK
            else Measurement(o.status, error=o.error + "\nsecond line")
        )
        store.record(run, device, "direct_naive", problem, config, m, problem.flops)
    (exported,) = export_studies(store)
    assert exported.outcomes == study.outcomes and exported.exhaustive()
    assert exported.arch == "sm_90" and exported.nvrtc == "13.0"
    pins = {"direct_naive": {"FILTER_IN_CONST": (0,)}}
    (cut,) = export_studies(store, pins=pins)
    assert cut.exhaustive() and 0 < len(cut.outcomes) < len(study.outcomes)
    assert all(c["FILTER_IN_CONST"] == 0 for c in cut.outcomes)
    save_recording([cut], tmp_path / "cut.jsonl.gz")
    (back,) = load_recording(tmp_path / "cut.jsonl.gz")
    assert back.pins == {"FILTER_IN_CONST": (0,)} and back.exhaustive()


def test_the_committed_recording_subspaces_bind_and_are_a_few_hundred_configs() -> None:
    pins = load_pins(SUBSPACE_DIR / "h100.toml")
    problem = ConvProblem(N=128, K=3, C=64, F=64)
    for family, family_pins in pins.items():
        full = get_family(family).load_space()
        cut = restrict(full, family_pins).bind(problem.fields(), ARCH_LIMITS["sm_90"])
        assert 100 <= len(cut) <= 1000, (family, len(cut))
        assert len(cut) < len(full.bind(problem.fields(), ARCH_LIMITS["sm_90"]))


# ---------------------------------------------------------------------------------------------
# Replay through the real tuner


def replay_run(recording, strategy: str, seed: int, budget: int | None, store_path=None):
    evaluator = ReplayRunner.from_paths(recording)
    store = Store(store_path or "sqlite://")
    studies, _ = plan_studies([(get_family("direct_naive"), p) for p in SHAPES], evaluator.limits)
    tuner = Tuner(
        evaluator, store, strategy=strategy, seed=seed, jobs=2
    )  # a replay: nothing is compiled
    outcome = tuner.run(studies, budget)
    device_id = store.register_device(evaluator.device)
    return (
        outcome,
        {p.key: store.evaluations(device_id, "direct_naive", p) for p in SHAPES},
        evaluator,
    )


def test_replay_gives_back_the_recorded_statuses_and_times(recording) -> None:
    outcome, stored, evaluator = replay_run(recording, "brute_force", 0, None)
    for study in load_recording(recording):
        rows = stored[study.problem.key]
        assert len(rows) == len(study.outcomes)
        for row in rows:
            expected = study.outcomes[row.config]
            assert row.status is expected.status
            assert row.time_ms == expected.time_ms
    assert evaluator.device.name.endswith("(replay)")
    best = {s.study.problem.key: s.best[1].time_ms for s in outcome.studies}
    assert best == {s.problem.key: s.optimum_ms() for s in load_recording(recording)}


@pytest.mark.parametrize("strategy", ["local", "tpe", "random"])
def test_replay_is_deterministic_under_a_seed(recording, strategy) -> None:
    def order(seed):
        _, stored, _ = replay_run(recording, strategy, seed, 8)
        return [[e.config for e in stored[p.key]] for p in SHAPES]

    assert order(3) == order(3)


def test_a_config_missing_from_the_recording_is_an_error(tmp_path) -> None:
    partial = recorded(SHAPES[0])
    missing = sorted(partial.outcomes, key=Config.to_json)[0]
    del partial.outcomes[missing]
    path = save_recording([partial], tmp_path / "partial.jsonl.gz")
    evaluator = ReplayRunner.from_paths(path)
    (study,), _ = plan_studies([(get_family("direct_naive"), SHAPES[0])], evaluator.limits)
    tuner = Tuner(evaluator, Store("sqlite://"), strategy="brute_force")
    with pytest.raises(ReplayMissing, match="no outcome for config"):
        tuner.run([study], None)
    result = CliRunner().invoke(
        main,
        ["run", "--replay", str(path), "--family", "direct_naive", "--shape", "N=29,K=5,C=7,F=9"]
        + ["--exhaustive", "--strategy", "brute_force"],
    )
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert lines[-1].startswith("autotune: the recording has no outcome for config")


def test_run_replay_end_to_end_through_the_cli(recording, tmp_path) -> None:
    db = tmp_path / "replayed.db"
    args = ["run", "--replay", recording, "--family", "direct_naive", "--budget", "6"]
    args += sum((["--shape", f"N={p.N},K={p.K},C={p.C},F={p.F}"] for p in SHAPES), [])
    result = CliRunner().invoke(main, [*args, "--storage", str(db)])
    assert result.exit_code == 0, result.output
    assert "(replay)" in result.output and "18 new evaluations" in result.output
    again = CliRunner().invoke(main, [*args, "--storage", str(db)])
    assert "0 new evaluations" in again.output  # resumed from the store, nothing repeated


# ---------------------------------------------------------------------------------------------
# Transfer


def test_transfer_seeds_are_valid_for_the_new_shape_and_nearest_first() -> None:
    family = get_family("chen_general")
    limits = ARCH_LIMITS["sm_90"]
    near, far, target = (
        ConvProblem(N=128, K=3, C=64, F=64),
        ConvProblem(N=32, K=7, C=256, F=256),
        ConvProblem(N=256, K=3, C=64, F=64),
    )
    assert shape_distance(target, near) < shape_distance(target, far)
    spaces = {p.key: family.load_space().bind(p.fields(), limits) for p in (near, far, target)}
    rng = random.Random(0)
    best = {p.key: rng.sample(spaces[p.key].configs, 3) for p in (near, far)}
    seeds = transfer_seeds(
        target, spaces[target.key], [(far, best[far.key]), (near, best[near.key])]
    )
    assert seeds and len(seeds) == len(set(seeds))
    assert all(spaces[target.key].is_valid(c) for c in seeds)
    coords = Coordinates(spaces[target.key])
    assert seeds[0] == coords.nearest(best[near.key][0])
    # A config that is invalid here becomes its nearest valid neighbour, never itself.
    invalid = Config.of({**spaces[target.key].configs[0].as_dict(), "W": 4, "WT": 16})
    assert not spaces[target.key].is_valid(invalid)
    (made,) = transfer_seeds(target, spaces[target.key], [(near, [invalid])], per_shape=1)
    assert spaces[target.key].is_valid(made)


@pytest.mark.parametrize("inner", ["local", "random", "tpe"])
def test_transfer_asks_its_seeds_first_then_the_rest_once(inner) -> None:
    problem = SHAPES[2]
    space = get_family("direct_naive").load_space().bind(problem.fields(), ARCH_LIMITS["sm_90"])
    seeds = space.configs[-3:]
    strategy = Transfer(make_strategy(inner, space, 1), seeds)
    first = [strategy.ask() for _ in range(3)]  # in flight together
    assert first == seeds
    asked = list(first)
    for c in first:
        strategy.tell(c, synthetic_time(c, problem).time_ms)
    while (c := strategy.ask()) is not None:
        assert space.is_valid(c)
        asked.append(c)
        strategy.tell(c, synthetic_time(c, problem).time_ms)
    assert len(asked) == len(set(asked)) == len(space)


def test_the_tuner_seeds_a_study_with_the_best_of_stored_neighbour_shapes(recording) -> None:
    evaluator = ReplayRunner.from_paths(recording)
    store = Store("sqlite://")
    family = get_family("direct_naive")
    done, new = plan_studies([(family, p) for p in (SHAPES[0], SHAPES[1])], evaluator.limits)[0]
    Tuner(evaluator, store, strategy="brute_force").run([done], None)
    Tuner(evaluator, store, strategy="local", seed=0).run([new], 1)
    device_id = store.register_device(evaluator.device)
    (first,) = store.evaluations(device_id, "direct_naive", SHAPES[1])
    best_of_done = min(
        (e for e in store.evaluations(device_id, "direct_naive", SHAPES[0]) if e.time_ms),
        key=lambda e: e.time_ms,
    )
    assert first.config == best_of_done.config


# ---------------------------------------------------------------------------------------------
# The benchmark


def test_expected_random_matches_the_combinatorics() -> None:
    fractions = np.array([1.0, 0.8, 0.5, 0.5, 0.0])
    for b in range(1, 7):
        draws = list(itertools.combinations(fractions, min(b, 5)))
        exact = sum(max(d) for d in draws) / len(draws)
        assert expected_random(fractions, b) == pytest.approx(exact)
    assert p_score(1.0, 0.5) == 1.0 and p_score(0.5, 0.5) == 0.0
    assert math.isnan(p_score(1.0, 1.0))


def test_benchmark_scores_every_strategy_on_every_space(recording) -> None:
    cases = [Case.of(s) for s in load_recording(recording)]
    frame, ask = benchmark(
        cases, ["brute_force", "random", "local", "transfer"], 3, (5, 10), inner="local"
    )
    assert set(ask["strategy"]) == {"brute_force", "random", "local", "transfer"}
    every = frame[frame["space"] == "ALL"].set_index(["strategy", "budget"])
    assert (
        every.loc[("default", 10), "fraction_of_optimum"]
        == every.loc[("local", 10), "fraction_of_optimum"]
    )
    assert ((frame["fraction_of_optimum"] > 0) & (frame["fraction_of_optimum"] <= 1)).all()
    # Random sampling's mean over seeds stays near its exact expectation (P near 0).
    rnd = frame[(frame["strategy"] == "random") & (frame["space"] != "ALL")]
    assert (rnd["fraction_of_optimum"] - rnd["random_expected"]).abs().max() < 0.35


def test_bench_search_writes_the_csv_table_and_plot(recording, tmp_path) -> None:
    partial = recorded(SHAPES[0], family="direct_naive")
    partial.problem = ConvProblem(N=40, K=3, C=4, F=4)
    partial.outcomes = dict(itertools.islice(partial.outcomes.items(), 3))
    extra = save_recording([partial], tmp_path / "partial.jsonl.gz")
    out = tmp_path / "bench"
    result = CliRunner().invoke(
        main,
        ["bench", "search", "--recordings", recording, "--recordings", str(extra)]
        + ["--strategies", f"random,tpe,{DEFAULT_STRATEGY},transfer", "--seeds", "2"]
        + ["--budgets", "5,10"]
        + ["--jobs", "1", "--output-dir", str(out)],
    )
    assert result.exit_code == 0, result.output
    assert "leaving out direct_naive N=40,K=3,C=4,F=4: not exhaustive" in result.output
    frame = pd.read_csv(out / "search.csv")
    assert list(frame.columns) == COLUMNS
    # The default strategy's rows appear twice, the second time as "default".
    assert set(frame["strategy"]) == {"random", "tpe", DEFAULT_STRATEGY, "transfer", "default"}
    assert set(frame["budget"]) == {5, 10}
    spaces = {f"direct_naive {p.key}" for p in SHAPES}
    assert set(frame["space"]) == spaces | {"ALL"}
    assert (frame[frame["space"] == "ALL"].groupby("strategy").size() == 2).all()
    assert (frame["seeds"] == 2).all()
    text = (out / "search.md").read_text()
    assert f"| {DEFAULT_STRATEGY} |" in text and "ms/ask" in text
    assert (out / "search.png").stat().st_size > 1000


# What the commands read as current: rows of this code (DESIGN section 2).
CURRENT = get_family("direct_naive").kernel_digest()


def test_export_recording_command_and_a_pinned_replay(tmp_path) -> None:
    pins_file = tmp_path / "pins.toml"
    pins_file.write_text("[direct_naive]\nFILTER_IN_CONST = [1]\n")
    problem = SHAPES[0]
    full = recorded(problem)
    db = tmp_path / "rec.db"
    store = Store(str(db))
    device = store.register_device(DeviceInfo(DEVICE, "9.0", 132))
    run = store.start_run(device, "test", {})
    for config, o in list(full.outcomes.items())[::2]:  # half the space: not exhaustive
        m = Measurement.from_samples([o.time_ms]) if o.time_ms else Measurement(o.status)
        store.record(run, device, "direct_naive", problem, config, m, problem.flops, CURRENT)
    out = tmp_path / "out.jsonl.gz"
    args = ["export-recording", "--storage", str(db), "--output", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "valid configs missing" in result.output
    refused = CliRunner().invoke(main, [*args, "--exhaustive-only"])
    assert refused.exit_code == 1 and "no study to export" in refused.output
    # Pinned: record the rest of the subspace, then the export is exhaustive over it.
    space = restrict(get_family("direct_naive").load_space(), {"FILTER_IN_CONST": [1]})
    for config in space.bind(problem.fields(), ARCH_LIMITS["sm_90"]).configs:
        o = full.outcomes[config]
        m = Measurement.from_samples([o.time_ms]) if o.time_ms else Measurement(o.status)
        store.record(run, device, "direct_naive", problem, config, m, problem.flops, CURRENT)
    result = CliRunner().invoke(main, [*args, "--subspace", str(pins_file), "--exhaustive-only"])
    assert result.exit_code == 0 and ", exhaustive" in result.output
    # The replay searches the recorded subspace by itself: --exhaustive covers just that.
    replay = CliRunner().invoke(
        main,
        ["run", "--replay", str(out), "--family", "direct_naive", "--shape", "N=29,K=5,C=7,F=9"]
        + ["--exhaustive", "--storage", str(tmp_path / "replayed.db")],
    )
    assert replay.exit_code == 0, replay.output
    replayed = Store(str(tmp_path / "replayed.db")).history()
    assert len(replayed) == len(space.bind(problem.fields(), ARCH_LIMITS["sm_90"]))
    assert set(replayed["config"].str.contains('"FILTER_IN_CONST":1')) == {True}


def _threads_here() -> tuple[str | None, int | None]:
    import os
    import sys

    torch = sys.modules.get("torch")
    return os.environ.get("OMP_NUM_THREADS"), torch.get_num_threads() if torch else None


def test_benchmark_workers_run_their_libraries_on_start_worker() -> None:
    import multiprocessing as mp

    from autotune.bench.search import start_worker

    with mp.get_context("fork").Pool(1, initializer=start_worker) as pool:
        omp, torch_threads = pool.apply(_threads_here)
    assert omp == "1"
    assert torch_threads in (None, 1)  # torch only where it was imported before the fork


def test_a_replay_skips_the_shapes_its_recording_does_not_hold(recording) -> None:
    held, missing = SHAPES[0], ConvProblem(N=9, K=3, C=1, F=2)
    args = ["run", "--replay", recording, "--family", "direct_naive", "--budget", "2"]
    both = CliRunner().invoke(main, [*args, "--shape", held.key, "--shape", missing.key])
    assert both.exit_code == 0, both.output
    assert f"skipping direct_naive {missing.key}: not in the recording" in both.output
    only = CliRunner().invoke(main, [*args, "--shape", missing.key])
    assert only.exit_code == 2 and "not in the recording" in only.output
