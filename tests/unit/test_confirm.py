"""The tuner confirms a study's best: after its search it measures the top configuration again
through the same runner (check and timer), stores the repeats, and ranks again; spending no
budget, leaving a failed repeat untold as a time, and likewise after `autotune remeasure`."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter

import pytest
from click.testing import CliRunner

from autotune.cli.app import main
from autotune.cli.progress import study_line
from autotune.families.direct_naive import DirectNaive
from autotune.model.problem import ConvProblem
from autotune.model.records import Measurement, Status
from autotune.model.space import Config, DeviceLimits
from autotune.replay.runner import ReplayRunner
from autotune.store import Store
from autotune.tuning.runners import GpuRunner
from autotune.tuning.studies import Study, plan_studies
from autotune.tuning.tuner import Tuner
from tests.conftest import SyntheticEvaluator
from tests.unit.test_search import recorded

PROBLEM = ConvProblem(N=29, K=5, C=7, F=9)
TUNABLES = ("BLOCK_X", "BLOCK_Y", "FILTER_IN_CONST")


def _key(defines) -> tuple:
    return tuple(defines[n] for n in TUNABLES)


class Times:
    """A synthetic GPU's times per configuration: the n-th measurement of one takes its n-th
    time (the last one again after those), or a Status for a failure."""

    def __init__(self, times: dict[Config, list]) -> None:
        self.times = {_key(c.as_dict()): t for c, t in times.items()}
        self.calls: Counter = Counter()

    def __call__(self, defines):
        key = _key(defines)
        self.calls[key] += 1
        given = self.times.get(key, [9.0])
        return given[min(self.calls[key], len(given)) - 1]


def _given(n: int) -> tuple[Study, list[Config]]:
    """A study that evaluates exactly its space's first n configurations, as remeasure's do."""
    (study,), _ = plan_studies([(DirectNaive(), PROBLEM)], DeviceLimits())
    configs = list(study.space.configs[:n])
    return dataclasses.replace(study, configs=tuple(configs)), configs


def _tuner(compiler, store, times: Times, events=None) -> Tuner:
    on_progress = events.append if events is not None else None
    return Tuner(GpuRunner(compiler, SyntheticEvaluator(times)), store, on_progress=on_progress)


def test_a_lucky_first_time_is_measured_again_and_loses_to_a_steady_one(compiler) -> None:
    study, (lucky, steady, a, b) = _given(4)
    times = Times({lucky: [0.5, 2.0], steady: [1.0], a: [1.5], b: [1.6]})
    store, events = Store("sqlite://"), []
    (outcome,) = _tuner(compiler, store, times, events).run([study], None).studies
    # The search measured each once; the lucky one twice more (figure 2.0), which made the
    # steady one the top, measured twice more in the second round.
    assert outcome.evaluated == 4
    assert [times.calls[_key(c.as_dict())] for c in (lucky, steady, a, b)] == [3, 3, 1, 1]
    best = store.best(top=4)
    assert [Config.from_json(c) for c in best["config"]] == [steady, a, b, lucky]
    assert best["time_ms"].tolist() == [1.0, 1.5, 1.6, 2.0]
    assert best["measurements"].tolist() == [3, 1, 1, 3]
    assert outcome.best[0] == steady and outcome.best[1].time_ms == 1.0
    kinds = [e.event for e in events]
    assert kinds.count("confirm") == 2 and kinds[-1] == "end"
    assert [e.config for e in events if e.event == "confirm"] == [lucky, steady]
    line, stays = study_line(next(e for e in events if e.event == "confirm"))
    assert "measuring its best again" in line and not stays
    # Confirmed: a second run over the same study measures nothing.
    (again,) = _tuner(compiler, store, times).run([study], None).studies
    assert again.evaluated == 0 and sum(times.calls.values()) == 8


def test_confirmation_goes_on_for_three_configurations_and_says_where_it_ends_short(compiler):
    def lucky(configs, n) -> dict:  # n lucky first times, each confirmed slower than the next
        return {c: [0.5 + 0.1 * i, 2.0 + i] for i, c in enumerate(configs[:n])}

    # Two lucky first times in a row: the third round confirms the steady one.
    study, configs = _given(4)
    times = Times({**lucky(configs, 2), configs[2]: [1.0], configs[3]: [9.0]})
    store, events = Store("sqlite://"), []
    (outcome,) = _tuner(compiler, store, times, events).run([study], None).studies
    assert [e.config for e in events if e.event == "confirm"] == configs[:3]
    assert outcome.best[0] == configs[2] and not outcome.unconfirmed
    assert store.best()["measurements"].tolist() == [3]
    # Three: the rounds end with the steady one on top, measured once, and the outcome says so.
    times = Times({**lucky(configs, 3), configs[3]: [1.0]})
    store, events = Store("sqlite://"), []
    (outcome,) = _tuner(compiler, store, times, events).run([study], None).studies
    assert [e.config for e in events if e.event == "confirm"] == configs[:3]
    assert outcome.best[0] == configs[3] and store.best()["measurements"].tolist() == [1]
    assert "3 configurations in turn" in outcome.unconfirmed
    assert "stands on 1 measurement, not 3" in outcome.unconfirmed
    (said,) = [e for e in events if e.event == "unconfirmed"]
    assert said.config == configs[3] and study_line(said)[1]
    # The study's next run confirms it, evaluating nothing.
    (again,) = _tuner(compiler, store, times).run([study], None).studies
    assert again.evaluated == 0 and again.best[0] == configs[3] and not again.unconfirmed
    assert store.best()["measurements"].tolist() == [3]


def test_a_best_stored_before_the_repeats_is_confirmed_when_its_run_resumes(compiler) -> None:
    study, (fast, slow) = _given(2)
    times = Times({fast: [1.0, 1.2, 1.1], slow: [2.0]})
    store = Store("sqlite://")
    # Tuned as a version without repeats did: each configuration measured once.
    old = Tuner(GpuRunner(compiler, SyntheticEvaluator(times)), store, confirm_best=False)
    assert old.run([study], None).evaluated == 2
    assert store.best()["measurements"].tolist() == [1]
    # The same run again: no evaluation, the best measured twice more.
    (again,) = _tuner(compiler, store, times).run([study], None).studies
    assert again.evaluated == 0 and times.calls[_key(fast.as_dict())] == 3
    best = store.best()
    assert best["measurements"].tolist() == [3] and best["time_ms"].tolist() == [1.1]


def test_confirmations_spend_no_budget(compiler) -> None:
    (study,), _ = plan_studies([(DirectNaive(), PROBLEM)], DeviceLimits())
    times = Times({})  # every configuration 9.0 ms each time
    store = Store("sqlite://")
    evaluator = SyntheticEvaluator(times)
    tuner = Tuner(GpuRunner(compiler, evaluator), store, strategy="brute_force")
    assert tuner.run([study], 5).evaluated == 5
    assert len(evaluator.jobs) == 5 + 2  # the best, measured twice more
    device_id = store.register_device(evaluator.device)
    assert len(store.evaluations(device_id, "direct_naive", PROBLEM)) == 5
    # The budget counts configurations: two more make 7, whatever was measured again.
    assert tuner.run([study], 7).evaluated == 2
    assert len(store.evaluations(device_id, "direct_naive", PROBLEM)) == 7


def test_a_repeat_that_fails_is_no_time_and_says_why(compiler) -> None:
    study, (lucky, steady) = _given(2)
    times = Times({lucky: [0.5, Status.WRONG_RESULT], steady: [1.0]})
    store, events = Store("sqlite://"), []
    (outcome,) = _tuner(compiler, store, times, events).run([study], None).studies
    assert times.calls[_key(lucky.as_dict())] == 2  # stopped at the failure
    assert times.calls[_key(steady.as_dict())] == 1  # and confirmed nothing else
    best = store.best()
    assert Config.from_json(best["config"].iloc[0]) == lucky
    assert best["time_ms"].tolist() == [0.5] and best["measurements"].tolist() == [1]
    assert "WRONG_RESULT" in outcome.unconfirmed
    (said,) = [e for e in events if e.event == "unconfirmed"]
    assert said.last.status is Status.WRONG_RESULT and said.config == lucky
    line, stays = study_line(said)
    assert "best not confirmed" in line and "WRONG_RESULT" in line and stays


def test_a_replay_confirms_nothing(tmp_path) -> None:
    runner = ReplayRunner([recorded(PROBLEM)])
    store = Store(str(tmp_path / "replay.db"))
    (study,), _ = plan_studies([(DirectNaive(), PROBLEM)], runner.limits)
    tuner = Tuner(runner, store, strategy="brute_force")
    assert not tuner.confirm_best
    assert tuner.run([study], 6).evaluated == 6
    assert store.best()["measurements"].tolist() == [1]  # its recording again is no measurement


def test_remeasure_confirms_each_studys_best(tmp_path, monkeypatch) -> None:
    import autotune.gpu.evaluator

    study, (lucky, steady, other) = _given(3)
    db = str(tmp_path / "r.db")
    digest = DirectNaive().kernel_digest()
    with Store(db) as seeded:  # protocol-1 rows of today's code
        device_id = seeded.register_device(SyntheticEvaluator(Times({})).device)
        run = seeded.start_run(device_id, "old", {})
        for config, ms in ((lucky, 1.0), (steady, 1.1), (other, 1.2)):
            m = dataclasses.replace(Measurement.from_samples([ms] * 3), protocol=1)
            seeded.record(run, device_id, "direct_naive", PROBLEM, config, m, 1, digest)
    times = Times({lucky: [0.5, 2.0], steady: [1.0], other: [1.5]})
    evaluator = SyntheticEvaluator(times)
    monkeypatch.setattr(autotune.gpu.evaluator, "GpuEvaluator", lambda index=0: evaluator)
    args = ["remeasure", "--top", "3", "--no-baseline", "--storage", db]
    result = CliRunner().invoke(main, [*args, "--cache-dir", str(tmp_path / "cubins")])
    assert result.exit_code == 0, result.output
    with Store(db) as store:
        best = store.best(top=3)
    # Re-measured under protocol 2 (one evaluation each), then confirmed as a run confirms.
    assert [Config.from_json(c) for c in best["config"]] == [steady, other, lucky]
    assert best["measurements"].tolist() == [3, 1, 3]
    assert best["time_ms"].tolist() == pytest.approx([1.0, 1.5, 2.0])


def _seeded_current(tmp_path, monkeypatch, times: Times, stored) -> str:
    """A store holding protocol-2 evaluations of today's code (config, first time), and the
    CLI's GPU the synthetic one answering `times`."""
    import autotune.gpu.evaluator

    db = str(tmp_path / "again.db")
    digest = DirectNaive().kernel_digest()
    with Store(db) as seeded:
        device_id = seeded.register_device(SyntheticEvaluator(Times({})).device)
        run = seeded.start_run(device_id, "before", {})
        for config, ms in stored:
            m = Measurement.from_samples([ms] * 3)
            seeded.record(run, device_id, "direct_naive", PROBLEM, config, m, 1, digest)
    evaluator = SyntheticEvaluator(times)
    monkeypatch.setattr(autotune.gpu.evaluator, "GpuEvaluator", lambda index=0: evaluator)
    return db


def test_remeasure_again_measures_the_current_top_again_as_repeats(tmp_path, monkeypatch):
    _, (lucky, steady, other, fourth) = _given(4)
    # Stored under today's protocol and code; the lucky one's first time was its luck.
    stored = ((lucky, 1.0), (steady, 1.1), (other, 1.2), (fourth, 1.3))
    times = Times({lucky: [2.0], steady: [1.05], other: [1.5]})
    db = _seeded_current(tmp_path, monkeypatch, times, stored)
    args = ["remeasure", "--again", "--top", "3", "--no-baseline", "--storage", db]
    result = CliRunner().invoke(main, [*args, "--cache-dir", str(tmp_path / "cubins")])
    assert result.exit_code == 0, result.output
    # The top three twice each; the fourth not at all.
    assert [times.calls[_key(c.as_dict())] for c in (lucky, steady, other, fourth)] == [2, 2, 2, 0]
    with Store(db) as store:
        best = store.best(top=4)
        device_id = store.register_device(SyntheticEvaluator(Times({})).device)
        assert len(store.evaluations(device_id, "direct_naive", PROBLEM)) == 4  # no new ones
    # Each figure is the median of its three measurements: the steady one is the best now.
    assert [Config.from_json(c) for c in best["config"]] == [steady, fourth, other, lucky]
    assert best["time_ms"].tolist() == pytest.approx([1.05, 1.3, 1.5, 2.0])
    assert best["measurements"].tolist() == [3, 1, 3, 3]
    assert "1 ms -> 1.05 ms, another configuration" in result.output
    # The table: the study's best before and after, moved to another, six measurements.
    assert re.search(r"\|\s+1\.0\s+\|\s+1\.05\s+\|\s+yes\s+\|\s+6\s+\|", result.output)
    # Not a resume: the same command measures the top three by figure again, now without the
    # lucky one (fourth by its figure) and with the one measured once.
    again = CliRunner().invoke(main, [*args, "--cache-dir", str(tmp_path / "cubins")])
    assert again.exit_code == 0, again.output
    calls = [times.calls[_key(c.as_dict())] for c in (lucky, steady, other, fourth)]
    assert calls == [2, 4, 4, 2]


def test_remeasure_again_stops_a_configuration_at_a_failure_and_says_why(tmp_path, monkeypatch):
    _, (lucky, steady) = _given(2)
    times = Times({lucky: [Status.WRONG_RESULT], steady: [1.05]})
    db = _seeded_current(tmp_path, monkeypatch, times, ((lucky, 1.0), (steady, 1.1)))
    args = ["remeasure", "--again", "--top", "2", "--no-baseline", "--storage", db]
    result = CliRunner().invoke(main, [*args, "--cache-dir", str(tmp_path / "cubins")])
    assert result.exit_code == 0, result.output
    assert times.calls[_key(lucky.as_dict())] == 1  # stopped at its failure
    assert "stopped short: WRONG_RESULT" in result.output
    with Store(db) as store:
        best = store.best(top=2)
    # A failure is no time: the lucky one keeps its one measurement, and its place.
    assert best["measurements"].tolist() == [1, 3]
    assert best["time_ms"].tolist() == pytest.approx([1.0, 1.05])


def test_remeasure_again_says_what_its_time_limit_left_out(tmp_path, monkeypatch):
    import autotune.tuning.remeasure

    _, (only,) = _given(1)
    times = Times({only: [1.0]})
    db = _seeded_current(tmp_path, monkeypatch, times, ((only, 1.0),))
    clock = iter(range(0, 10**6, 1000))  # each look at the clock: 1000 s later
    monkeypatch.setattr(autotune.tuning.remeasure.time, "monotonic", lambda: next(clock))
    args = ["remeasure", "--again", "--time-limit", "5", "--no-baseline", "--storage", db]
    result = CliRunner().invoke(main, [*args, "--cache-dir", str(tmp_path / "cubins")])
    assert result.exit_code == 0, result.output
    assert sum(times.calls.values()) == 0
    assert "time limit reached: 0 of 1 studies measured again" in result.output


def test_remeasure_again_with_nothing_of_the_current_protocol_says_so(tmp_path, monkeypatch):
    import autotune.gpu.evaluator

    db = str(tmp_path / "empty.db")
    with Store(db) as store:
        store.register_device(SyntheticEvaluator(Times({})).device)
    evaluator = SyntheticEvaluator(Times({}))
    monkeypatch.setattr(autotune.gpu.evaluator, "GpuEvaluator", lambda index=0: evaluator)
    args = ["remeasure", "--again", "--no-baseline", "--storage", db]
    result = CliRunner().invoke(main, [*args, "--cache-dir", str(tmp_path / "cubins")])
    assert result.exit_code == 1
    assert "nothing to measure again" in result.output and "Traceback" not in result.output


def test_remeasure_shows_each_study_beside_its_own_previous_code(tmp_path, monkeypatch) -> None:
    # Two earlier versions: PROBLEM measured under the older only, OTHER under both (a merged
    # delta of a later text). Both are brought over, and each comparison table holds the
    # studies whose previous code it names.
    import autotune.gpu.evaluator

    other_problem = ConvProblem(N=17, K=3, C=5, F=4)
    older, newer = "0123456789abcdef", "fedcba9876543210"
    study, configs = _given(2)
    db = str(tmp_path / "versions.db")
    with Store(db) as seeded:
        device_id = seeded.register_device(SyntheticEvaluator(Times({})).device)
        run = seeded.start_run(device_id, "earlier", {})
        for problem, digest in ((PROBLEM, older), (other_problem, older), (other_problem, newer)):
            (planned,), _ = plan_studies([(DirectNaive(), problem)], DeviceLimits())
            for config in planned.space.configs[:2]:
                m = Measurement.from_samples([1.0] * 3)
                seeded.record(run, device_id, "direct_naive", problem, config, m, 1, digest)
    evaluator = SyntheticEvaluator(Times({c: [0.5] for c in configs}))
    monkeypatch.setattr(autotune.gpu.evaluator, "GpuEvaluator", lambda index=0: evaluator)
    args = ["remeasure", "--top", "2", "--no-baseline", "--storage", db]
    result = CliRunner().invoke(main, [*args, "--cache-dir", str(tmp_path / "cubins")])
    assert result.exit_code == 0, result.output
    with Store(db) as store:
        measured = set(store.best()["problem_key"])
    assert measured == {PROBLEM.key, other_problem.key}
    tables = {
        digest: section
        for digest, section in re.findall(
            r"previous code \((\w+)\) and its current:\n(.*?)(?=\nBest|\Z)", result.output, re.S
        )
    }
    assert set(tables) == {older, newer}
    assert PROBLEM.key in tables[older] and other_problem.key not in tables[older]
    assert other_problem.key in tables[newer] and PROBLEM.key not in tables[newer]
