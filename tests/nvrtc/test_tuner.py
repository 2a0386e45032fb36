"""The tuning loop against a synthetic evaluator: budgets, dedup, resume, failures."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune.families.direct_naive import DirectNaive
from autotune.gpu.compiler import Compiler
from autotune.model.problem import ConvProblem
from autotune.model.records import Status
from autotune.model.space import Config, DeviceLimits
from autotune.store import Store
from autotune.tuning.runners import GpuRunner
from autotune.tuning.studies import plan_studies
from autotune.tuning.tuner import Tuner

PROBLEM = ConvProblem(N=29, K=5, C=7, F=9)


@pytest.fixture
def compiler(tmp_path):
    return Compiler(cache_dir=tmp_path / "cubins")


@pytest.fixture
def store(tmp_path):
    return Store(str(tmp_path / "t.db"))


def _studies(family=None, problems=(PROBLEM,)):
    studies, skipped = plan_studies(
        [(family or DirectNaive(), p) for p in problems], DeviceLimits()
    )
    return studies


def _configs(evaluator):
    return [tuple(sorted(j.plan.defines)) for j in evaluator.jobs]


def test_budget_counts_stored_evaluations_and_a_rerun_resumes(compiler, store, synthetic_evaluator):
    studies = _studies()
    first = Tuner(GpuRunner(compiler, synthetic_evaluator), store, strategy="random").run(
        studies, budget=10
    )
    assert first.evaluated == 10
    again = Tuner(GpuRunner(compiler, synthetic_evaluator), store, strategy="random").run(
        studies, budget=10
    )
    assert again.evaluated == 0
    more = Tuner(GpuRunner(compiler, synthetic_evaluator), store, strategy="tpe").run(
        studies, budget=15
    )
    assert more.evaluated == 5
    # 15 configurations, and each new best measured twice more (the first run's; the third's
    # too where its search found a faster one): the rest of the jobs are those repeats.
    assert len(set(_configs(synthetic_evaluator))) == 15
    device_id = store.register_device(synthetic_evaluator.device)
    assert len(store.evaluations(device_id, "direct_naive", PROBLEM)) == 15
    measured = store.best(top=15)["measurements"]
    assert measured.iloc[0] == 3 and set(measured) <= {1, 3}
    assert len(synthetic_evaluator.jobs) == 15 + (measured - 1).sum() in (15 + 2, 15 + 4)


def test_budget_is_capped_by_the_space_and_brute_force_covers_it(
    compiler, store, synthetic_evaluator
):
    study = _studies()[0]
    outcome = Tuner(GpuRunner(compiler, synthetic_evaluator), store, strategy="brute_force").run(
        [study], budget=10_000
    )
    assert outcome.evaluated == len(study.space)
    result = outcome.studies[0]
    # The synthetic optimum (32 x 4 threads, filters in global memory) is found and is OK.
    assert result.best[0].as_dict() == {"BLOCK_X": 32, "BLOCK_Y": 4, "FILTER_IN_CONST": 0}


def test_failures_are_stored_with_status_and_never_best(compiler, store, synthetic_evaluator):
    study = _studies()[0]
    Tuner(GpuRunner(compiler, synthetic_evaluator), store, strategy="brute_force").run(
        [study], None
    )
    device_id = store.register_device(synthetic_evaluator.device)
    stored = store.evaluations(device_id, "direct_naive", PROBLEM)
    wrong = [e for e in stored if e.status is Status.WRONG_RESULT]
    assert wrong and all(e.config["BLOCK_X"] * e.config["BLOCK_Y"] == 512 for e in wrong)
    best = store.best()
    assert len(best) == 1
    assert '"BLOCK_X":32' in best.iloc[0]["config"]


def test_compile_errors_are_recorded_and_the_run_goes_on(
    tmp_path, compiler, store, synthetic_evaluator
):
    source = tmp_path / "direct_naive.cu"
    source.write_text(
        "#if BLOCK_X == 32\n#error no 32-wide blocks here\n#endif\n"
        + DirectNaive().source_path.read_text()
    )

    class Broken(DirectNaive):
        @property
        def source_path(self) -> Path:
            return source

    study = _studies(Broken())[0]
    outcome = Tuner(GpuRunner(compiler, synthetic_evaluator), store, strategy="brute_force").run(
        [study], None
    )
    device_id = store.register_device(synthetic_evaluator.device)
    stored = store.evaluations(device_id, "direct_naive", PROBLEM)
    errors = [e for e in stored if e.status is Status.COMPILE_ERROR]
    assert errors and all(e.config["BLOCK_X"] == 32 for e in errors)
    assert all("no 32-wide blocks" in e.error for e in errors)
    assert outcome.evaluated == len(study.space)
    # Every config that compiled, then the best measured twice more.
    assert len(synthetic_evaluator.jobs) == len(study.space) - len(errors) + 2


def test_resource_limits_are_checked_before_launch(compiler, store, synthetic_evaluator):
    synthetic_evaluator.limits = DeviceLimits(REGS_PER_BLOCK=4096)
    study = _studies()[0]
    Tuner(GpuRunner(compiler, synthetic_evaluator), store, strategy="brute_force").run(
        [study], None
    )
    device_id = store.register_device(synthetic_evaluator.device)
    stored = store.evaluations(device_id, "direct_naive", PROBLEM)
    over = [e for e in stored if e.status is Status.RESOURCES]
    assert over and all(e.config["BLOCK_X"] * e.config["BLOCK_Y"] >= 128 for e in over)
    launched = {tuple(sorted(j.plan.defines)) for j in synthetic_evaluator.jobs}
    assert len(launched) == len(stored) - len(over)


def test_time_limit_stops_the_run(compiler, store, synthetic_evaluator):
    import time

    def slow(defines):
        time.sleep(0.3)
        return 1.0

    synthetic_evaluator.cost = slow
    outcome = Tuner(GpuRunner(compiler, synthetic_evaluator), store).run(
        _studies(), budget=50, time_limit_s=1.0
    )
    assert 1 <= outcome.evaluated <= 5
    assert outcome.studies[0].stopped == "time limit"


def test_interrupt_keeps_finished_work_and_the_rerun_completes(
    compiler, store, synthetic_evaluator
):
    calls = {"n": 0}
    base = synthetic_evaluator.cost

    def interrupt_third(defines):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return base(defines)

    synthetic_evaluator.cost = interrupt_third
    outcome = Tuner(GpuRunner(compiler, synthetic_evaluator), store).run(_studies(), budget=8)
    assert outcome.interrupted and outcome.evaluated == 2
    synthetic_evaluator.cost = base
    resumed = Tuner(GpuRunner(compiler, synthetic_evaluator), store).run(_studies(), budget=8)
    assert resumed.evaluated == 6
    device_id = store.register_device(synthetic_evaluator.device)
    stored = store.evaluations(device_id, "direct_naive", PROBLEM)
    assert len(stored) == len({e.config for e in stored}) == 8
    # Only the job in flight was lost: 2 before the interrupt, 1 lost, 6 after; then the
    # completed study's best was measured twice more (the interrupted run confirmed nothing).
    assert len(synthetic_evaluator.jobs) == 9 + 2


def test_progress_events_report_counts_and_eta(compiler, store, synthetic_evaluator):
    events = []
    Tuner(GpuRunner(compiler, synthetic_evaluator), store, on_progress=events.append).run(
        _studies(), 6
    )
    evals = [e for e in events if e.event == "eval"]
    assert [e.done for e in evals] == [1, 2, 3, 4, 5, 6]
    assert evals[-1].campaign_done == 6 == evals[-1].campaign_planned
    assert all(e.eta_s is not None for e in evals)
    assert events[0].event == "start" and events[-1].event == "end"


def test_unsupported_or_empty_studies_are_skipped_with_a_reason():
    from autotune.families import FAMILIES

    pairs = [(f, ConvProblem(N=16, K=3, C=4, F=4)) for f in FAMILIES.values()]
    studies, skipped = plan_studies(pairs, DeviceLimits())
    names = {s.family.name for s in studies}
    assert "direct_naive" in names
    if "chen_special" in FAMILIES:
        assert any(s.family == "chen_special" and "C" in s.reason for s in skipped)


def test_a_family_meets_only_its_own_problem_kind():
    from autotune.families.sgemm import Sgemm
    from autotune.model.problem import Conv3dProblem, GemmProblem

    gemm = GemmProblem(M=37, N=61, K=29)
    cube = Conv3dProblem(D=8, R=8, Cc=8, Kd=3, Kr=3, Kc=3)
    pairs = [(DirectNaive(), gemm), (Sgemm(), PROBLEM), (Sgemm(), cube), (Sgemm(), gemm)]
    studies, skipped = plan_studies(pairs, DeviceLimits())
    assert [(s.family.name, s.problem) for s in studies] == [("sgemm", gemm)]
    assert [s.reason for s in skipped] == [
        "direct_naive computes conv2d problems, not gemm",
        "sgemm computes gemm problems, not conv2d",
        "sgemm computes gemm problems, not conv3d",
    ]


def test_gemm_studies_run_and_record_their_scratch_bytes(compiler, store):
    from autotune.families.sgemm import Sgemm
    from autotune.model.problem import GemmProblem
    from tests.conftest import SyntheticEvaluator

    problem = GemmProblem(M=1, N=1000, K=4096)
    evaluator = SyntheticEvaluator(lambda d: 1.0 + d["SPLIT_K"] / 16 + d["BM"] / 8)
    studies, _ = plan_studies([(Sgemm(), problem)], DeviceLimits())
    outcome = Tuner(GpuRunner(compiler, evaluator), store, strategy="random", seed=3).run(
        studies, budget=6
    )
    assert outcome.evaluated == 6
    history = store.history(kind="gemm")
    assert len(history) == 6 and set(history["problem_key"]) == {problem.key}
    for config, scratch in zip(history["config"], history["scratch_bytes"], strict=True):
        split = Config.from_json(config)["SPLIT_K"]
        assert scratch == (0 if split == 1 else 4 * split * problem.M * problem.N)
    assert all(j.check.buffers.outputs == (("c", (1, 1000)),) for j in evaluator.jobs)
    assert all(j.check.reference_plan.entries == ("reference_gemm",) for j in evaluator.jobs)


def test_a_plans_counters_reach_the_worker_and_count_in_its_extra_memory(compiler, store):
    import dataclasses

    from autotune.families.sgemm import Sgemm
    from autotune.model.problem import GemmProblem
    from tests.conftest import SyntheticEvaluator

    class Counted(Sgemm):
        def plan(self, problem, config):
            plain = super().plan(problem, config)
            return dataclasses.replace(plain, counters=(("tile_flags", 37),))

    problem = GemmProblem(M=1, N=1000, K=4096)
    evaluator = SyntheticEvaluator(lambda d: 1.0 + d["SPLIT_K"] / 16)
    studies, _ = plan_studies([(Counted(), problem)], DeviceLimits())
    Tuner(GpuRunner(compiler, evaluator), store, strategy="random", seed=3).run(studies, budget=4)
    # Four configurations and their best's two measurements again: every job has the counters.
    assert [j.plan.counters for j in evaluator.jobs] == [(("tile_flags", 37),)] * (4 + 2)
    history = store.history(kind="gemm")
    for config, extra in zip(history["config"], history["scratch_bytes"], strict=True):
        split = Config.from_json(config)["SPLIT_K"]
        scratch = 0 if split == 1 else 4 * split * problem.M * problem.N
        assert extra == scratch + 4 * 37  # the column's meaning: extra device memory


def test_job_timeout_grows_with_work_and_the_best_time_within_floor_and_ceiling():
    from autotune.gpu.session import TimingPolicy
    from autotune.tuning.studies import JOB_TIMEOUT_CEILING_S, JOB_TIMEOUT_FLOOR_S, job_timeout_s

    timing = TimingPolicy()
    tiny = job_timeout_s(10**6, timing)
    assert JOB_TIMEOUT_FLOOR_S <= tiny < JOB_TIMEOUT_FLOOR_S + timing.max_time_s + 1
    alexnet_conv2 = 2 * 128 * 27 * 27 * 25 * 64 * 192
    big = job_timeout_s(alexnet_conv2, timing)
    assert tiny + 5 < big < JOB_TIMEOUT_CEILING_S
    # A best time of 100 ms makes 50x that per run plausible for a slow candidate.
    assert job_timeout_s(10**6, timing, best_ms=100.0) > tiny + (2 + timing.warmup) * 4.9
    assert job_timeout_s(10**15, timing) == JOB_TIMEOUT_CEILING_S


def test_studies_are_tuned_longest_first(compiler, store, synthetic_evaluator):
    small, large = ConvProblem(N=9, K=3, C=2, F=3), ConvProblem(N=61, K=5, C=7, F=9)
    medium = ConvProblem(N=29, K=5, C=7, F=9)
    studies = _studies(problems=(small, large, medium))
    outcome = Tuner(GpuRunner(compiler, synthetic_evaluator), store, strategy="random").run(
        studies, budget=3
    )
    # The campaign's end is bounded by its last study: the biggest go first.
    assert [r.study.problem for r in outcome.studies] == [large, medium, small]
    first_n = [dict(j.plan.defines)["N"] for j in synthetic_evaluator.jobs[:3]]
    assert first_n == [61, 61, 61]


def test_a_finished_study_is_ranked_last_whatever_its_size(compiler, store, synthetic_evaluator):
    small, large = ConvProblem(N=9, K=3, C=2, F=3), ConvProblem(N=61, K=5, C=7, F=9)
    Tuner(GpuRunner(compiler, synthetic_evaluator), store, strategy="random").run(
        _studies(problems=(large,)), budget=3
    )
    outcome = Tuner(GpuRunner(compiler, synthetic_evaluator), store, strategy="random").run(
        _studies(problems=(large, small)), budget=3
    )
    assert [r.study.problem for r in outcome.studies] == [small, large]
    assert outcome.evaluated == 3


def test_estimated_cost_grows_with_size_and_evaluations():
    from autotune.gpu.session import TimingPolicy
    from autotune.tuning.studies import estimated_cost_s

    timing = TimingPolicy()
    assert estimated_cost_s(10**9, 0, timing) == 0
    # Small problems cost the minimum sampling time per evaluation, big ones their run time.
    assert estimated_cost_s(10**6, 10, timing) == pytest.approx(
        10 * (timing.min_time_s + (timing.warmup + 2) * 10**6 / 20e12)
    )
    assert estimated_cost_s(10**12, 10, timing) > estimated_cost_s(10**9, 10, timing)
    assert estimated_cost_s(10**9, 20, timing) == pytest.approx(
        2 * estimated_cost_s(10**9, 10, timing)
    )
