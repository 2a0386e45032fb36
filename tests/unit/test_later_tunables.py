"""Results stored before a family gained a tunable: read as configs with its old value, in the
tuner's history, in recordings and in transfer seeds."""

from __future__ import annotations

from types import MappingProxyType

from autotune.families.direct_naive import DirectNaive
from autotune.families.implicit_gemm import ImplicitGemm
from autotune.model.problem import ConvProblem
from autotune.model.records import Measurement, Status
from autotune.model.space import Config, DeviceLimits
from autotune.replay.recording import Outcome, RecordedStudy, load_recording, save_recording
from autotune.store import Store
from autotune.strategies.surrogate import SurrogateSearch
from autotune.tuning.runners import GpuRunner
from autotune.tuning.studies import plan_studies
from autotune.tuning.tuner import Tuner

PROBLEM = ConvProblem(N=29, K=5, C=7, F=9)


class NaiveWithLaterConst(DirectNaive):
    """direct_naive as if FILTER_IN_CONST had been added after results were stored."""

    later_tunables = MappingProxyType({"FILTER_IN_CONST": 0})


def test_complete_fills_only_what_a_config_lacks() -> None:
    family = NaiveWithLaterConst()
    old = Config.of({"BLOCK_X": 32, "BLOCK_Y": 4})
    assert family.complete(old) == Config.of({"BLOCK_X": 32, "BLOCK_Y": 4, "FILTER_IN_CONST": 0})
    new = Config.of({"BLOCK_X": 32, "BLOCK_Y": 4, "FILTER_IN_CONST": 1})
    assert family.complete(new) is new
    assert DirectNaive().complete(old) is old  # no later tunables: unchanged


def test_a_stored_config_predating_a_tunable_counts_and_is_not_evaluated_again(
    tmp_path, compiler, synthetic_evaluator
) -> None:
    store = Store(str(tmp_path / "t.db"))
    device_id = store.register_device(synthetic_evaluator.device)
    run_id = store.start_run(device_id, "old", {})
    old = Config.of({"BLOCK_X": 32, "BLOCK_Y": 4})
    m = Measurement.from_samples([1.0])
    digest = compiler.kernel_digest(NaiveWithLaterConst())  # the code is the same; its space grew
    store.record(run_id, device_id, "direct_naive", PROBLEM, old, m, 1, kernel_digest=digest)
    studies, _ = plan_studies([(NaiveWithLaterConst(), PROBLEM)], DeviceLimits())
    outcome = Tuner(GpuRunner(compiler, synthetic_evaluator), store, strategy="brute_force").run(
        studies, 4
    )
    # Read as FILTER_IN_CONST=0, the stored config is one of the 4: 3 new evaluations, and the
    # brute-force walk never asks for it again. (The search's jobs come first; then the
    # confirmation measures the study's best again, which is that stored config: the fastest.)
    assert outcome.evaluated == 3
    tunables = ("BLOCK_X", "BLOCK_Y", "FILTER_IN_CONST")
    asked = [{n: dict(j.plan.defines)[n] for n in tunables} for j in synthetic_evaluator.jobs]
    stored = {"BLOCK_X": 32, "BLOCK_Y": 4, "FILTER_IN_CONST": 0}
    assert stored not in asked[: outcome.evaluated]
    assert asked[outcome.evaluated :] == [stored, stored]


def test_a_study_searched_before_a_tunable_says_so_until_one_evaluation_names_it(
    tmp_path, compiler, synthetic_evaluator
) -> None:
    family = NaiveWithLaterConst()
    old = Config.of({"BLOCK_X": 32, "BLOCK_Y": 4})
    assert family.predated([old]) == ("FILTER_IN_CONST",)
    assert family.predated([old, family.complete(old)]) == () and family.predated([]) == ()
    store = Store(str(tmp_path / "t.db"))
    device_id = store.register_device(synthetic_evaluator.device)
    run_id = store.start_run(device_id, "old", {})
    digest = compiler.kernel_digest(family)
    store.record(
        run_id, device_id, "direct_naive", PROBLEM, old, Measurement.from_samples([1.0]), 1,
        kernel_digest=digest,
    )  # fmt: skip
    studies, _ = plan_studies([(family, PROBLEM)], DeviceLimits())
    tuner = Tuner(GpuRunner(compiler, synthetic_evaluator), store, strategy="brute_force")
    (spent,) = tuner.run(studies, 1).studies  # the stored evaluation spends a budget of 1
    assert spent.evaluated == 0 and spent.predates == ("FILTER_IN_CONST",)
    (more,) = tuner.run(studies, 2).studies
    assert more.evaluated == 1 and more.predates == ("FILTER_IN_CONST",)  # as it started
    (done,) = tuner.run(studies, 2).studies
    assert done.evaluated == 0 and done.predates == ()  # one evaluation named it since


def test_a_recording_predating_a_tunable_is_pinned_to_its_old_value(tmp_path) -> None:
    problem = ConvProblem(N=28, K=3, C=16, F=16)
    config = {"BK": 16, "BM": 64, "BN": 64, "TM": 8, "TN": 8, "VEC": 2}
    config |= {"DOUBLE_BUFFER": 1, "SPLIT_K": 1}
    study = RecordedStudy(
        "implicit_gemm",
        problem,
        "Old GPU",
        pins={"VEC": (2,)},
        outcomes={Config.of(config): Outcome(Status.OK, 0.5, "")},
    )
    path = save_recording([study], tmp_path / "old.jsonl.gz")
    (loaded,) = load_recording(path)
    assert loaded.pins == {"GATHER_ROWS": (1,), "OFFSET_TABLE": (0,), "VEC": (2,)}
    old = Config.of({**config, "OFFSET_TABLE": 0, "GATHER_ROWS": 1})
    assert list(loaded.outcomes) == [old]
    assert all(c["OFFSET_TABLE"] == 0 and c["GATHER_ROWS"] == 1 for c in loaded.space().configs)
    assert loaded.outcomes[old].time_ms == 0.5
    # A recording made with the tunable is left as it is.
    (again,) = load_recording(save_recording([loaded], tmp_path / "new.jsonl.gz"))
    assert again.pins == loaded.pins and list(again.outcomes) == list(loaded.outcomes)
    assert ImplicitGemm().later_tunables == {"OFFSET_TABLE": 0, "GATHER_ROWS": 1}


def test_the_tuner_names_a_familys_later_tunables_to_the_default_search(
    tmp_path, compiler, synthetic_evaluator, monkeypatch
) -> None:
    # Its stored results and its neighbours' seeds may all hold them at one value: the
    # surrogate then keeps them searchable (SurrogateSearch.new_parameters).
    named = []
    monkeypatch.setattr(SurrogateSearch, "new_parameters", lambda self, n: named.append(tuple(n)))
    studies, _ = plan_studies([(NaiveWithLaterConst(), PROBLEM)], DeviceLimits())
    store = Store(str(tmp_path / "t.db"))
    Tuner(GpuRunner(compiler, synthetic_evaluator), store, strategy="surrogate").run(studies, 1)
    assert named == [("FILTER_IN_CONST",)]
