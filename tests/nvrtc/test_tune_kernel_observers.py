"""tune_kernel with NVMLObserver and an energy objective, without a GPU: NVRTC compiles, an
evaluator stands in for the GPU worker and runs the worker's NVML watch against a fake pynvml
(each configuration's runs use energy the test decides); readings reach the result dicts, the
metrics, the strategy and the store."""

from __future__ import annotations

import pytest

from autotune import NVMLObserver
from autotune.gpu.observe import Watch
from autotune.kt import api
from autotune.kt.api import tune_kernel
from autotune.kt.arguments import TuneKernelError
from autotune.model.records import Measurement
from autotune.tuning import tuner as tuner_module
from tests.conftest import SyntheticEvaluator
from tests.fake_nvml import FakeDevice, install
from tests.nvrtc.test_tune_kernel import VECTOR_ADD, vector_add_args

BLOCKS = [64, 128, 256, 512]
# Fastest at 256, least energy per run at 128: the two objectives disagree.
TIME_MS = {64: 1.6, 128: 1.2, 256: 1.0, 512: 1.4}
ENERGY_MJ = {64: 300, 128: 150, 256: 200, 512: 260}


class ObservedEvaluator(SyntheticEvaluator):
    """The worker's steps around a configuration's timed runs (session._evaluate), with runs
    that only move the fake NVML energy counter."""

    def __init__(self, fake, throttled_block: int | None = None) -> None:
        super().__init__(lambda d: TIME_MS[d["block_size_x"]])
        self.fake = fake
        self.throttled_block = throttled_block

    def evaluate(self, job, timeout_s):
        self.jobs.append(job)
        block = dict(job.plan.defines)["block_size_x"]
        calls = iter(range(10**9))
        drop = block == self.throttled_block
        self.fake.sm_clock = lambda: 1980 if not drop or next(calls) == 0 else 1500

        def run() -> None:
            self.fake.energy_mj += ENERGY_MJ[block]

        ms = TIME_MS[block]
        with Watch(job.check.timing.observe, FakeDevice()) as watch:
            for _ in range(3):
                run()
            watch.window(run, lambda: None, ms)
        return Measurement.from_samples([ms, ms * 1.01, ms * 0.99], **watch.readings())


@pytest.fixture(autouse=True)
def _nvrtc_and_scratch(compiler, tmp_path, monkeypatch):
    monkeypatch.setattr(api, "CACHE_ROOT", tmp_path / "cache")


def tune(evaluator, tmp_path, observables=("nvml_energy", "temperature"), **extra):
    arguments, answer = vector_add_args()
    observer = NVMLObserver(list(observables), continous_duration=0.01)
    return tune_kernel(
        "vector_add",
        VECTOR_ADD,
        1000,
        arguments,
        **{
            "tune_params": {"block_size_x": BLOCKS},
            "answer": answer,
            "observers": [observer],
            "evaluator": evaluator,
            "storage": str(tmp_path / "r.db"),
            "compiler_cache": None,
            "quiet": True,
            **extra,
        },
    )


def test_readings_are_result_keys_metrics_use_them_and_they_are_stored(tmp_path, monkeypatch):
    fake = install(monkeypatch)
    ev = ObservedEvaluator(fake)
    metrics = {"GFLOPS/W": lambda p: (1000 / 1e9) / p["nvml_energy"], "hot": "temperature > 40"}
    results, env = tune(ev, tmp_path, metrics=metrics)
    by_block = {r["block_size_x"]: r for r in results}
    for block, row in by_block.items():
        assert row["nvml_energy"] == pytest.approx(ENERGY_MJ[block] / 1e3)
        assert row["temperature"] == 41 and row["hot"]
        assert row["GFLOPS/W"] == pytest.approx(1e-6 / row["nvml_energy"])
    assert env["objective"] == "time" and env["best_config"]["block_size_x"] == 256
    assert all(j.check.timing.observe.energy for j in ev.jobs)
    # A second call measures nothing and gives the stored readings back.
    again, _ = tune(ObservedEvaluator(fake), tmp_path, metrics=metrics)
    assert all(r.get("stored") for r in again)
    assert {r["block_size_x"]: r["nvml_energy"] for r in again} == {
        b: r["nvml_energy"] for b, r in by_block.items()
    }


def test_a_study_timed_without_observers_is_measured_again_with_them(tmp_path, monkeypatch):
    fake = install(monkeypatch)
    arguments, answer = vector_add_args()
    plain = dict(answer=answer, storage=str(tmp_path / "r.db"), compiler_cache=None, quiet=True)
    first, _ = tune_kernel(
        "vector_add",
        VECTOR_ADD,
        1000,
        arguments,
        {"block_size_x": BLOCKS},
        evaluator=ObservedEvaluator(fake),
        **plain,
    )
    assert "nvml_energy" not in first[0]
    results, _ = tune(ObservedEvaluator(fake), tmp_path)
    assert not any(r.get("stored") for r in results)
    assert all(r["nvml_energy"] > 0 for r in results)


def test_an_energy_objective_is_what_the_strategy_is_told_and_chooses_by(tmp_path, monkeypatch):
    fake = install(monkeypatch)
    told: dict[int, float | None] = {}
    make = tuner_module.make_strategy

    def recording(*args, **kwargs):
        strategy = make(*args, **kwargs)
        tell = strategy.tell

        def spy(config, value):
            told[config["block_size_x"]] = value
            tell(config, value)

        strategy.tell = spy
        return strategy

    monkeypatch.setattr(tuner_module, "make_strategy", recording)
    ev = ObservedEvaluator(fake)
    results, env = tune(ev, tmp_path, objective="nvml_energy")
    assert told == pytest.approx({b: e / 1e3 for b, e in ENERGY_MJ.items()})
    assert env["objective"] == "nvml_energy" and env["best_config"]["block_size_x"] == 128
    assert all(j.check.timing.early_stop is None for j in ev.jobs)  # energy needs every run timed
    # Higher is better (GFLOPS/W): the strategy is told the reciprocal, the best is the highest.
    told.clear()
    metrics = {"GFLOPS/W": lambda p: (1000 / 1e9) / p["nvml_energy"]}
    _, env = tune(
        ObservedEvaluator(fake),
        tmp_path / "w",
        objective="GFLOPS/W",
        objective_higher_is_better=True,
        metrics=metrics,
    )
    assert env["best_config"]["block_size_x"] == 128
    assert told == pytest.approx({b: 1 / (1e-6 / (e / 1e3)) for b, e in ENERGY_MJ.items()})


def test_a_clock_drop_is_flagged_in_the_results(tmp_path, monkeypatch):
    fake = install(monkeypatch)
    results, _ = tune(ObservedEvaluator(fake, throttled_block=512), tmp_path, ["core_freq"])
    flags = {r["block_size_x"]: r["throttled"] for r in results}
    assert flags == {64: False, 128: False, 256: False, 512: True}
    assert all(r["core_freq"] > 1400 for r in results)


def test_power_readings_come_back_in_kernel_tuners_units(tmp_path, monkeypatch):
    fake = install(monkeypatch)
    fake.power_mw = 123_000
    results, _ = tune(ObservedEvaluator(fake), tmp_path, ["power_readings", "nvml_power"])
    for row in results:
        assert row["nvml_power"] == 123.0
        assert row["power_readings"] and all(mw == 123_000 for _, mw in row["power_readings"])


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        ({"objective": "nvml_power"}, "objective='nvml_power' names neither"),
        ({"objective": "GFLOPS/W"}, "it may be one of: time, nvml_energy, temperature"),
        ({"objective": "nvml_energy", "objective_higher_is_better": "yes"}, "True or False"),
        ({"observers": [object()]}, "observer object is not supported"),
        ({"tune_params": {"block_size_x": [64], "nvml_pwr_limit": [250]}}, "power limit"),
        ({"tune_params": {"block_size_x": [64], "nvml_gr_clock": [1410]}}, "graphics clock"),
        ({"device": 1}, "NVMLObserver of device 0 cannot observe device 1"),
    ],
)
def test_refused_before_any_gpu_work(tmp_path, monkeypatch, extra, match):
    install(monkeypatch)
    with pytest.raises(TuneKernelError, match=match):
        tune(object(), tmp_path, **extra)


def test_observers_without_nvmls_binding_fail_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pynvml", None)
    with pytest.raises(TuneKernelError, match="pip install nvidia-ml-py"):
        tune(object(), tmp_path)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"observables": ["gr_voltage"]}, "gr_voltage is not supported"),
        ({"observables": ["watts"]}, "'watts' is not one of"),
        ({"observables": ["core_freq"], "use_locked_clocks": True}, "never changes"),
        ({"observables": ["nvml_energy"], "continous_duration": 0}, "seconds > 0"),
    ],
)
def test_nvml_observer_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        NVMLObserver(**kwargs)
