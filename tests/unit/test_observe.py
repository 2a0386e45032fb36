"""Observers without a GPU: the worker's NVML watch against a fake pynvml, the readings stored
beside their evaluation (resume, best's throttled column, forget, merge), and what is refused."""

from __future__ import annotations

import sys
import types
from itertools import count

import pytest

from autotune.gpu.observe import Watch
from autotune.model.observe import Observe, ObserveError, throttled
from autotune.model.problem import ConvProblem
from autotune.model.records import DeviceInfo, Measurement, Status
from autotune.model.space import Config
from autotune.reports.tables import best_table
from autotune.store import SCHEMA_VERSION, Store
from tests.fake_nvml import FakeDevice, install

ALL = Observe(power=True, energy=True, clocks=True, temperature=True, window_s=0.02)
PROBLEM = ConvProblem(B=1, C=4, N=16, K=3, F=8)


def watched(fake, observe: Observe, energy_mj: int = 7, time_ms: float = 0.5):
    """What the worker does around a configuration's timed runs (session._evaluate): sample
    during three timed runs, then the energy window, each run using energy_mj."""

    def run() -> None:
        fake.energy_mj += energy_mj

    with Watch(observe, FakeDevice()) as watch:
        for _ in range(3):
            run()
        watch.window(run, lambda: None, time_ms)
    return watch.readings()


def test_every_reading_from_nvml_through_the_device_bus_id(monkeypatch):
    fake = install(monkeypatch)
    fake.power_mw = 250_000
    readings = watched(fake, ALL, energy_mj=7)
    seen = dict(readings["observations"])
    assert seen["energy_j"] == pytest.approx(0.007)  # the counter's difference per window run
    assert seen["power_w"] == 250.0
    assert seen["sm_clock_mhz"] == seen["sm_clock_min_mhz"] == seen["sm_clock_max_mhz"] == 1980
    assert seen["mem_clock_mhz"] == 2619 and seen["temperature_c"] == 41
    assert seen["throttled"] == 0.0
    assert readings["power_readings"] == ()  # not asked
    assert {"energy", "power", "clock", "temperature"} <= set(fake.calls)


def test_only_what_is_asked_is_read(monkeypatch):
    fake = install(monkeypatch)
    readings = watched(fake, Observe(temperature=True, window_s=0.02))
    assert dict(readings["observations"]) == {"temperature_c": 41}
    assert set(fake.calls) == {"temperature"}  # no energy window without power or energy


def test_power_readings_are_the_windows_series(monkeypatch):
    fake = install(monkeypatch)
    readings = watched(fake, Observe(power_readings=True, window_s=0.02))
    series = readings["power_readings"]
    assert len(series) >= 2 and all(w == 300.0 for _, w in series)
    assert series[0][0] >= 0 and [t for t, _ in series] == sorted(t for t, _ in series)


def test_energy_from_power_where_the_device_has_no_counter(monkeypatch):
    fake = install(monkeypatch)
    fake.energy_supported = False
    seen = dict(watched(fake, Observe(energy=True, window_s=0.02))["observations"])
    # power x window time / runs: at least the window's 20 ms over at most its runs
    assert 0 < seen["energy_j"] < 300.0 * 1.0


def test_a_clock_that_drops_while_measuring_is_throttling(monkeypatch):
    fake = install(monkeypatch)
    ticks = count()
    fake.sm_clock = lambda: 1980 if next(ticks) == 0 else 1600
    seen = dict(watched(fake, Observe(clocks=True, window_s=0.02))["observations"])
    assert seen["throttled"] == 1.0 and seen["sm_clock_min_mhz"] == 1600
    # A clock rising from idle at the start is not throttling.
    ticks = count()
    fake.sm_clock = lambda: 1200 if next(ticks) == 0 else 1980
    seen = dict(watched(fake, Observe(clocks=True, window_s=0.02))["observations"])
    assert seen["throttled"] == 0.0


def test_throttled_rule():
    assert not throttled([1980, 1980, 1965])  # within 3 %
    assert throttled([1980, 1755, 1980])
    assert not throttled([345, 1410, 1980])


def test_nothing_observed_needs_no_nvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml fails
    assert watched(types.SimpleNamespace(energy_mj=0), Observe()) == {}
    assert watched(types.SimpleNamespace(energy_mj=0), None) == {}
    with pytest.raises(ObserveError, match="pip install nvidia-ml-py"):
        Watch(ALL, FakeDevice())


def test_observe_parse():
    assert Observe.parse("power, clocks") == Observe(power=True, clocks=True)
    with pytest.raises(ObserveError, match="cannot observe voltage"):
        Observe.parse("power,voltage")


# -- the store -----------------------------------------------------------------------------------


def observed(time_ms: float, energy_j: float, throttle: float | None = None) -> Measurement:
    readings = [("energy_j", energy_j), ("power_w", 200.0)]
    if throttle is not None:
        readings.append(("throttled", throttle))
    return Measurement.from_samples([time_ms] * 3, observations=tuple(readings))


def fill(store: Store, rows) -> tuple[int, int]:
    device = store.register_device(DeviceInfo("H100", "9.0", 132))
    run = store.start_run(device, "test", {})
    for tile, m in rows:
        store.record(run, device, "direct_naive", PROBLEM, Config({"TILE": tile}), m, PROBLEM.flops)
    return run, device


def test_readings_are_stored_beside_their_evaluation(tmp_path):
    with Store(tmp_path / "r.db") as store:
        _, device = fill(store, [(1, observed(1.0, 0.5)), (2, Measurement.from_samples([2.0]))])
        stored = store.evaluations(device, "direct_naive", PROBLEM)
    assert dict(stored[0].observations) == {"energy_j": 0.5, "power_w": 200.0}
    assert stored[1].observations == ()


def test_best_says_which_best_was_throttled(tmp_path):
    with Store(tmp_path / "r.db") as store:
        fill(store, [(1, observed(1.0, 0.5, throttle=1.0)), (2, observed(2.0, 0.1, 0.0))])
        assert store.best()["throttled"].tolist() == [1.0]
        assert best_table(store)["throttled"].tolist() == ["yes"]
    with Store(tmp_path / "plain.db") as store:
        fill(store, [(1, Measurement.from_samples([1.0]))])
        assert best_table(store)["throttled"].tolist() == [""]  # not observed


def test_forget_and_merge_carry_the_readings(tmp_path):
    with Store(tmp_path / "a.db") as a:
        fill(a, [(1, observed(1.0, 0.5)), (2, observed(2.0, 0.25, 1.0))])
    with Store(tmp_path / "b.db") as b:
        fill(b, [(1, observed(1.0, 0.5))])  # the same evaluation (and readings) already there
        with Store(tmp_path / "a.db") as a:
            counts = b.merge_from(a)
        assert (counts.added["observations"], counts.skipped["observations"]) == (3, 2)
        device = b.register_device(DeviceInfo("H100", "9.0", 132))
        merged = {
            h.config["TILE"]: dict(h.observations)
            for h in b.evaluations(device, "direct_naive", PROBLEM)
        }
        assert merged == {
            1: {"energy_j": 0.5, "power_w": 200.0},
            2: {"energy_j": 0.25, "power_w": 200.0, "throttled": 1.0},
        }
        assert b.forget("direct_naive") == 2
        with b._engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT count(*) FROM observations").scalar() == 0


def test_a_version_5_database_gains_the_observations_table(tmp_path):
    with Store(tmp_path / "r.db") as store:
        fill(store, [(1, Measurement.from_samples([1.0]))])
        with store._engine.begin() as conn:
            conn.exec_driver_sql("DROP TABLE observations")
            conn.exec_driver_sql("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
    with Store(tmp_path / "r.db") as store:
        _, device = fill(store, [(2, observed(1.0, 0.5))])
        stored = store.evaluations(device, "direct_naive", PROBLEM)
        assert [len(h.observations) for h in stored] == [0, 2]
        assert store._schema_version() == str(SCHEMA_VERSION)


def test_failed_evaluations_carry_no_readings(tmp_path):
    with Store(tmp_path / "r.db") as store:
        _, device = fill(store, [(1, Measurement(Status.WRONG_RESULT, error="no"))])
        assert store.evaluations(device, "direct_naive", PROBLEM)[0].observations == ()


def baseline(store: Store, ms: float, **readings: float) -> None:
    """cuDNN's measurement of PROBLEM on an H100, observed where readings are given."""
    device = store.register_device(DeviceInfo("H100", "9.0", 132))
    m = Measurement.from_samples([ms] * 3, observations=tuple(readings.items()))
    store.record_baseline(device, "cudnn", PROBLEM, "algo", "9", m, PROBLEM.flops)


def test_a_baselines_readings_are_stored_beside_it_and_replaced_with_it(tmp_path):
    with Store(tmp_path / "r.db") as store:
        baseline(store, 2.0, power_w=690.0, energy_j=1.4, sm_clock_mhz=1610.0, throttled=1.0)
        row = store.baselines().iloc[0]
        assert (row["power_w"], row["energy_j"], row["sm_clock_mhz"]) == (690.0, 1.4, 1610.0)
        assert row["throttled"] == 1.0
        baseline(store, 1.9)  # measured again, not observed: the old readings go with the old row
        row = store.baselines().iloc[0]
        assert row["time_ms"] == 1.9 and row[["power_w", "energy_j"]].isna().all()
        with store._engine.connect() as conn:
            count = "SELECT count(*) FROM baseline_observations"
            assert conn.exec_driver_sql(count).scalar() == 0


def test_merge_carries_a_baselines_readings_but_not_onto_the_targets_own(tmp_path):
    with Store(tmp_path / "a.db") as a:
        baseline(a, 2.0, power_w=690.0, energy_j=1.4)
    with Store(tmp_path / "b.db") as b, Store(tmp_path / "a.db") as a:
        counts = b.merge_from(a)
        name = "baseline_observations"
        assert (counts.added[name], counts.skipped[name]) == (2, 0)
        assert b.baselines().iloc[0][["power_w", "energy_j"]].tolist() == [690.0, 1.4]
    with Store(tmp_path / "c.db") as c, Store(tmp_path / "a.db") as a:
        baseline(c, 1.8)  # c's own measurement of the same baseline, not observed
        counts = c.merge_from(a)
        assert counts.skipped["baselines"] == 1 and counts.added["baseline_observations"] == 0
        row = c.baselines().iloc[0]
        assert row["time_ms"] == 1.8 and row[["power_w", "energy_j"]].isna().all()


def test_a_database_without_the_baseline_readings_table_is_read_merged_and_gains_it(tmp_path):
    # As the autotune before the table wrote it: the same schema version, no such table.
    with Store(tmp_path / "r.db") as store:
        baseline(store, 2.0)
        with store._engine.begin() as conn:
            conn.exec_driver_sql("DROP TABLE baseline_observations")
    with Store(tmp_path / "r.db", create=False) as reader:  # read-only: nothing is added
        row = reader.baselines().iloc[0]
        assert row["time_ms"] == 2.0 and row[["power_w", "energy_j"]].isna().all()
    with Store(tmp_path / "t.db") as target, Store(tmp_path / "r.db", create=False) as source:
        counts = target.merge_from(source)
        assert counts.added["baselines"] == 1 and counts.added["baseline_observations"] == 0
    with Store(tmp_path / "r.db") as store:  # a writer creates it
        assert store.baselines().iloc[0]["time_ms"] == 2.0  # kept
        baseline(store, 2.1, energy_j=1.5)
        assert store.baselines().iloc[0]["energy_j"] == 1.5
