"""Timing protocol 2 without a GPU: the sampling policy, the spread, protocol numbers in the
store, resume and re-measurement that never mix protocols, recordings that keep theirs."""

from __future__ import annotations

import dataclasses
import gzip
import json

import pytest
from click.testing import CliRunner

from autotune.cli.app import main
from autotune.families.direct_naive import DirectNaive
from autotune.gpu.compiler import Compiler
from autotune.gpu.early_stop import EarlyStop
from autotune.gpu.timing import FLUSH_MIN_BYTES, TimingPolicy, flush_bytes
from autotune.model.problem import ConvProblem
from autotune.model.records import TIMING_PROTOCOL, DeviceInfo, Measurement, Status, spread
from autotune.model.space import Config, DeviceLimits
from autotune.replay.recording import RecordedStudy, RecordingError, load_recording, save_recording
from autotune.replay.runner import ReplayRunner
from autotune.store import Store
from autotune.tuning.remeasure import protocol_comparison, remeasure_studies
from autotune.tuning.runners import GpuRunner
from autotune.tuning.studies import plan_studies
from autotune.tuning.tuner import Tuner

PROBLEM = ConvProblem(N=29, K=5, C=7, F=9)
OTHER = ConvProblem(N=17, K=3, C=5, F=4)


def old(time_ms: float) -> Measurement:
    """A protocol-1 measurement, as every row stored before 2026-11-24 is."""
    return dataclasses.replace(Measurement.from_samples([time_ms] * 3), protocol=1)


# ---------------------------------------------------------------------------------------------
# The sampling policy


def test_spread_is_the_interquartile_range_over_the_median() -> None:
    assert spread([1.0, 1.0, 1.0, 1.0]) == 0.0
    assert spread([1.0, 2.0, 3.0, 4.0, 5.0]) == pytest.approx((4.0 - 2.0) / 3.0)
    assert spread([2.0]) is None and spread([]) is None
    assert Measurement.from_samples([1.0, 1.1, 0.9, 1.0]).spread == pytest.approx(0.05)


def test_flush_is_at_least_twice_the_l2() -> None:
    assert flush_bytes(50 << 20) == FLUSH_MIN_BYTES >= 2 * (50 << 20)
    assert flush_bytes(200 << 20) == 400 << 20


def test_sampling_stops_once_both_minimums_are_met_and_the_spread_is_low() -> None:
    policy = TimingPolicy(min_repeats=10, min_time_s=0.05, max_spread=0.05, early_stop=None)
    assert policy.first_batch(None) == 10
    steady = [1.0] * 10
    assert policy.next_batch(steady, spent_s=0.06, best_ms=None) == 0
    # Count met, time not: enough samples to fill the minimum time at the observed rate.
    assert policy.next_batch(steady, spent_s=0.01, best_ms=None) == 40
    # Time met, count not.
    assert policy.next_batch([1.0] * 4, spent_s=0.5, best_ms=None) == 6


def test_a_noisy_measurement_samples_on_up_to_the_maximums() -> None:
    policy = TimingPolicy(min_repeats=10, min_time_s=0.0, max_repeats=25, max_time_s=10.0)
    noisy = [1.0, 1.5] * 5
    assert spread(noisy) > policy.max_spread
    assert policy.next_batch(noisy, spent_s=0.01, best_ms=None) == 10  # as many again
    assert policy.next_batch(noisy * 2, spent_s=0.02, best_ms=None) == 5  # up to max_repeats
    assert policy.next_batch(noisy * 3, spent_s=0.03, best_ms=None) == 0
    # The time limit caps a batch too: 0.1 s a sample with 0.5 s left is 5 more.
    assert TimingPolicy(max_time_s=1.5).next_batch(noisy, spent_s=1.0, best_ms=None) == 5


def test_the_first_batch_is_what_the_early_stop_judges() -> None:
    policy = TimingPolicy(early_stop=EarlyStop(factor=4.0, after=3))
    assert policy.first_batch(best_ms=1.0) == 3
    assert policy.next_batch([5.0, 4.5, 6.0], spent_s=0.001, best_ms=1.0) == 0  # stopped: SLOW
    assert policy.next_batch([1.1, 1.0, 1.2], spent_s=0.001, best_ms=1.0) > 0


# ---------------------------------------------------------------------------------------------
# The store


@pytest.fixture
def store(tmp_path):
    s = Store(str(tmp_path / "p.db"))
    yield s
    s.close()


def _device(store: Store, name: str = "Synthetic GPU") -> tuple[int, int]:
    device_id = store.register_device(DeviceInfo(name, "9.0", 132))
    return store.start_run(device_id, "test", {}), device_id


def test_each_row_keeps_its_protocol_and_reads_never_mix_them(store: Store) -> None:
    run, dev = _device(store)
    config = Config.of({"BLOCK_X": 32, "BLOCK_Y": 4, "FILTER_IN_CONST": 0})
    assert store.record(run, dev, "direct_naive", PROBLEM, config, old(1.0), PROBLEM.flops)
    new = Measurement.from_samples([2.0, 2.2, 1.8, 2.0])
    assert store.record(run, dev, "direct_naive", PROBLEM, config, new, PROBLEM.flops)
    assert not store.record(run, dev, "direct_naive", PROBLEM, config, new, PROBLEM.flops)
    (row,) = store.best().itertuples()
    assert (row.time_ms, row.protocol, row.spread) == (2.0, TIMING_PROTOCOL, pytest.approx(0.05))
    assert store.best(protocol=1)["time_ms"].tolist() == [1.0]
    assert Store(store.url, protocol=1).best()["time_ms"].tolist() == [1.0]
    assert len(store.history()) == 1 and len(store.history(every_protocol=True)) == 2
    assert [e.time_ms for e in store.evaluations(dev, "direct_naive", PROBLEM, protocol=1)] == [1]


def test_a_baseline_under_a_new_protocol_is_stored_beside_the_old_one(store: Store) -> None:
    _, dev = _device(store)
    store.record_baseline(dev, "cudnn", PROBLEM, "algo", "9", old(3.0), PROBLEM.flops)
    assert not store.has_baseline(dev, "cudnn", PROBLEM)
    store.record_baseline(dev, "cudnn", PROBLEM, "algo", "9", old(4.0), PROBLEM.flops)  # replaces
    store.record_baseline(dev, "cudnn", PROBLEM, "algo", "9", Measurement.from_samples([2.0]), 1)
    assert store.has_baseline(dev, "cudnn", PROBLEM)
    assert store.baselines(protocol=1)["time_ms"].tolist() == [4.0]
    assert store.baselines()["time_ms"].tolist() == [2.0]


def test_ceilings_are_read_per_protocol(store: Store) -> None:
    _, dev = _device(store)
    store.record_ceiling(dev, "fma_peak", 64000.0, "GFlop/s", "old", (1.0,), protocol=1)
    assert store.ceilings().empty
    store.record_ceiling(dev, "fma_peak", 65000.0, "GFlop/s", "new", (1.0, 1.0, 1.1))
    assert store.ceilings()["value"].tolist() == [65000.0]
    assert store.ceilings(protocol=1)["value"].tolist() == [64000.0]


def test_best_can_give_each_studys_top_configs_fastest_first(store: Store) -> None:
    run, dev = _device(store)
    for x, t in ((8, 3.0), (16, 1.0), (32, 2.0), (64, 4.0)):
        config = Config.of({"BLOCK_X": x, "BLOCK_Y": 4, "FILTER_IN_CONST": 0})
        store.record(run, dev, "direct_naive", PROBLEM, config, old(t), PROBLEM.flops)
    top = store.best(protocol=1, top=3)
    assert top["time_ms"].tolist() == [1.0, 2.0, 3.0]
    assert top["evaluations"].tolist() == [4, 4, 4]


# ---------------------------------------------------------------------------------------------
# Tuning and re-measuring


@pytest.fixture
def compiler(tmp_path):
    return Compiler(cache_dir=tmp_path / "cubins")


def _seed_protocol_1(store: Store, evaluator, problems=(PROBLEM,)) -> dict:
    """Protocol-1 rows for every config of the studies, timed by the synthetic cost."""
    run, dev = _device(store, evaluator.device.name)
    studies, _ = plan_studies([(DirectNaive(), p) for p in problems], DeviceLimits())
    times = {}
    for study in studies:
        for config in study.space.configs[:12]:
            result = evaluator.cost(dict(DirectNaive().plan(study.problem, config).defines))
            m = old(result) if not isinstance(result, Status) else Measurement(result, protocol=1)
            store.record(run, dev, "direct_naive", study.problem, config, m, study.problem.flops)
            times[(study.problem.key, config)] = result
    return times


def test_a_study_of_another_protocol_is_tuned_again_not_resumed(
    compiler, store, synthetic_evaluator
) -> None:
    _seed_protocol_1(store, synthetic_evaluator)
    studies, _ = plan_studies([(DirectNaive(), PROBLEM)], DeviceLimits())
    outcome = Tuner(GpuRunner(compiler, synthetic_evaluator), store, strategy="random").run(
        studies, 5
    )
    assert outcome.evaluated == 5  # the 12 protocol-1 evaluations do not count
    assert len(store.history()) == 5 and len(store.history(protocol=1)) == 12


def test_remeasure_times_exactly_the_top_configs_once_and_keeps_the_old_rows(
    compiler, store, synthetic_evaluator
) -> None:
    times = _seed_protocol_1(store, synthetic_evaluator, (PROBLEM, OTHER))
    device = synthetic_evaluator.device.name
    studies, skipped, unreadable = remeasure_studies(store, device, DeviceLimits(), top=3)
    assert not skipped and not unreadable
    assert sorted(s.problem.key for s in studies) == sorted([PROBLEM.key, OTHER.key])
    for study in studies:
        ok = {
            c: t
            for (k, c), t in times.items()
            if k == study.problem.key and not isinstance(t, Status)
        }
        assert list(study.configs) == sorted(ok, key=ok.get)[:3]
    outcome = Tuner(GpuRunner(compiler, synthetic_evaluator), store).run(studies, None)
    assert outcome.evaluated == 6 and all(not s.stopped for s in outcome.studies)
    measured = {Config.from_json(c) for c in store.history()["config"]}
    assert measured == {c for s in studies for c in s.configs}
    assert len(store.history(protocol=1)) == 24  # nothing stored is lost
    again = Tuner(GpuRunner(compiler, synthetic_evaluator), store).run(studies, None)
    assert again.evaluated == 0  # resumes: done is done
    table = protocol_comparison(store, device, studies, old=1)
    assert len(table) == 2 and set(table.columns) >= {"old_gflops", "new_gflops", "ratio"}
    only = remeasure_studies(store, device, DeviceLimits(), 1, problem_keys=[OTHER.key])[0]
    assert [s.problem.key for s in only] == [OTHER.key] and len(only[0].configs) == 1


def test_remeasure_times_the_previous_codes_top_configs_with_the_current_code(
    compiler, store, synthetic_evaluator
) -> None:
    # A kernel whose source changed: its studies' stored bests are of the previous code
    # (digest PREVIOUS, under today's protocol), and no search has run since.
    previous, current = "0123456789abcdef", DirectNaive().kernel_digest()
    run, dev = _device(store, synthetic_evaluator.device.name)
    studies, _ = plan_studies([(DirectNaive(), PROBLEM)], DeviceLimits())
    times = {}
    for config in studies[0].space.configs[:12]:
        result = synthetic_evaluator.cost(dict(DirectNaive().plan(PROBLEM, config).defines))
        if isinstance(result, Status):
            continue
        m = Measurement.from_samples([result] * 3)
        store.record(run, dev, "direct_naive", PROBLEM, config, m, PROBLEM.flops, previous)
        times[config] = result
    device = synthetic_evaluator.device.name
    kernels = {"direct_naive": current}
    assert store.previous_kernels(device, kernels) == {"direct_naive": (previous,)}
    assert store.previous_kernels(device, {"direct_naive": previous}) == {}
    found, skipped, _ = remeasure_studies(store, device, DeviceLimits(), 3, kernels=kernels)
    assert not skipped and [s.problem.key for s in found] == [PROBLEM.key]
    assert list(found[0].configs) == sorted(times, key=times.get)[:3]
    # With the previous code taken as current there is nothing older to bring over.
    same = {"direct_naive": previous}
    assert remeasure_studies(store, device, DeviceLimits(), 3, kernels=same)[0] == []
    outcome = Tuner(GpuRunner(compiler, synthetic_evaluator), store).run(found, None)
    assert outcome.evaluated == 3
    history = store.history()
    assert (history["kernel_digest"] == current).sum() == 3  # what ran was today's code
    assert (history["kernel_digest"] == previous).sum() == len(times)  # nothing stored is lost
    table = protocol_comparison(
        store, device, found, TIMING_PROTOCOL, old_kernels=same, new_kernels=kernels
    )
    assert list(table["shape"]) == [PROBLEM.key]
    assert table["old_ms"].iloc[0] == pytest.approx(min(times.values()), rel=1e-3)
    # No protocol-1 rows: an empty comparison, as the command asks for one per older protocol
    assert len(protocol_comparison(store, device, found, 1, old_kernels=kernels)) == 0


def test_remeasure_brings_each_study_from_its_own_previous_code(store, synthetic_evaluator) -> None:
    # Two studies measured under an older version; one of them measured again later under a
    # newer one that is itself not current (a merged delta of another machine's session). Both
    # are the previous code's: each study's own latest version is brought over, not the
    # store's latest version only (which left every study without it behind).
    older, newer, current = "0123456789abcdef", "fedcba9876543210", DirectNaive().kernel_digest()
    run, dev = _device(store, synthetic_evaluator.device.name)
    configs = {}
    for problem in (PROBLEM, OTHER):
        space = plan_studies([(DirectNaive(), problem)], DeviceLimits())[0][0].space
        ok = []
        for config in space.configs:
            result = synthetic_evaluator.cost(dict(DirectNaive().plan(problem, config).defines))
            if not isinstance(result, Status):
                ok.append((result, config))
            if len(ok) == 4:
                break
        configs[problem.key] = ok
        for t, config in ok:
            m = Measurement.from_samples([t] * 3)
            store.record(run, dev, "direct_naive", problem, config, m, problem.flops, older)
    # The newer version measured OTHER's slowest config only, at a time faster than any older.
    t, newest = configs[OTHER.key][-1]
    m = Measurement.from_samples([t / 10] * 3)
    store.record(run, dev, "direct_naive", OTHER, newest, m, OTHER.flops, newer)
    device = synthetic_evaluator.device.name
    kernels = {"direct_naive": current}
    assert store.previous_kernels(device, kernels) == {"direct_naive": (older, newer)}
    found, skipped, _ = remeasure_studies(store, device, DeviceLimits(), 3, kernels=kernels)
    by_key = {s.problem.key: list(s.configs) for s in found}
    assert not skipped and set(by_key) == {PROBLEM.key, OTHER.key}
    fastest_older = [c for _, c in sorted(configs[PROBLEM.key], key=lambda tc: tc[0])][:3]
    assert by_key[PROBLEM.key] == fastest_older  # only the older version measured it
    assert by_key[OTHER.key] == [newest]  # its own latest version, not the older one's bests


# ---------------------------------------------------------------------------------------------
# Recordings and the CLI


def _study(protocol: int) -> RecordedStudy:
    study = RecordedStudy("direct_naive", PROBLEM, "Recorded GPU", protocol=protocol)
    config = Config.of({"BLOCK_X": 32, "BLOCK_Y": 4, "FILTER_IN_CONST": 0})
    from autotune.replay.recording import Outcome

    study.outcomes[config] = Outcome(Status.OK, 1.0)
    return study


def test_a_recording_keeps_its_protocol_and_an_old_file_is_protocol_1(tmp_path) -> None:
    path = save_recording([_study(2)], tmp_path / "new.jsonl.gz")
    assert [s.protocol for s in load_recording(path)] == [2]
    lines = gzip.decompress(path.read_bytes()).decode().splitlines()
    header = json.loads(lines[1])
    del header["protocol"]
    old_file = tmp_path / "old.jsonl.gz"
    old_file.write_bytes(
        gzip.compress("\n".join([lines[0], json.dumps(header), *lines[2:]]).encode())
    )
    (loaded,) = load_recording(old_file)
    assert loaded.protocol == 1
    assert ReplayRunner([loaded]).protocol == 1
    with pytest.raises(RecordingError, match="one timing protocol"):
        ReplayRunner([loaded, _study(2)])


def test_best_reads_one_protocol_and_says_which_is_missing(tmp_path) -> None:
    db = tmp_path / "cli.db"
    with Store(db) as store:
        run, dev = _device(store)
        config = Config.of({"BLOCK_X": 32, "BLOCK_Y": 4, "FILTER_IN_CONST": 0})
        store.record(
            run,
            dev,
            "direct_naive",
            PROBLEM,
            config,
            old(1.0),
            PROBLEM.flops,
            DirectNaive().kernel_digest(),
        )
    result = CliRunner().invoke(main, ["best", "--storage", str(db)])
    assert result.exit_code == 1 and "timing protocol 2" in result.output
    result = CliRunner().invoke(
        main, ["best", "--storage", str(db), "--protocol", "1", "--format", "csv"]
    )
    assert result.exit_code == 0, result.output
    header, row = result.output.splitlines()[:2]
    assert "protocol" in header.split(",") and ",1," in row
    refused = CliRunner().invoke(main, ["best", "--storage", str(db), "--protocol", "3"])
    assert refused.exit_code == 2


@pytest.mark.parametrize("arch", ["sm_", "90", "sm_9x", 90])
def test_a_recording_naming_no_architecture_is_malformed(tmp_path, arch) -> None:
    path = save_recording([_study(2)], tmp_path / "r.jsonl.gz")
    lines = gzip.decompress(path.read_bytes()).decode().splitlines()
    header = json.loads(lines[1]) | {"arch": arch}
    path.write_bytes(gzip.compress("\n".join([lines[0], json.dumps(header), *lines[2:]]).encode()))
    with pytest.raises(RecordingError, match="arch must name an architecture"):
        load_recording(path)


def test_a_replay_of_an_sm_90a_recording_is_compute_capability_9_0() -> None:
    study = _study(2)
    study.arch = "sm_90a"
    assert ReplayRunner([study]).device.compute_capability == "9.0"


def test_remeasure_observes_the_clocks_of_both_sides_of_a_table(
    tmp_path, monkeypatch, synthetic_evaluator
) -> None:
    # With --observe clocks every measurement carries its clock readings and its tries (a
    # throttled one is timed again): ours and the library's, as the tables pair them.
    import autotune.gpu.evaluator
    from autotune.model.observe import SM_CLOCK_MHZ, THROTTLED, TRIES

    db = str(tmp_path / "r.db")
    digest = DirectNaive().kernel_digest()
    (study,), _ = plan_studies([(DirectNaive(), PROBLEM)], DeviceLimits())
    with Store(db) as seeded:  # four protocol-1 rows of today's code, 1.0-1.3 ms
        run, dev = _device(seeded)
        for i, config in enumerate(study.space.configs[:4]):
            m = old(1.0 + i / 10)
            seeded.record(run, dev, "direct_naive", PROBLEM, config, m, PROBLEM.flops, digest)
    monkeypatch.setattr(autotune.gpu.evaluator, "GpuEvaluator", lambda index=0: synthetic_evaluator)
    args = ["remeasure", "--top", "2", "--observe", "clocks", "--storage", db]
    result = CliRunner().invoke(main, [*args, "--cache-dir", str(tmp_path / "cubins")])
    assert result.exit_code == 0, result.output
    with Store(db) as store:
        device_id = store.register_device(synthetic_evaluator.device)
        remeasured = store.evaluations(device_id, "direct_naive", PROBLEM)
        (cudnn,) = store.baselines().itertuples()
    assert len(remeasured) == 2
    for row in remeasured:
        assert {SM_CLOCK_MHZ, THROTTLED, TRIES} <= dict(row.observations).keys()
    assert cudnn.sm_clock_mhz > 0 and cudnn.throttled == 0.0
