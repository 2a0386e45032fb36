"""Observers on the GPU: an energy-objective tune_kernel of a vector add (Kernel Tuner's
vector_add_observers.py, smaller) through the real worker and NVML; every evaluation has its
energy, stored beside it, and the energy-best configuration is the one reported. And
`autotune baseline --observe`: cuDNN's power, energy and clock stored beside its baseline. And
the timer's rest and tries on the real device and NVML."""

from __future__ import annotations

import numpy as np
import pytest

from autotune import NVMLObserver, tune_kernel

pytestmark = pytest.mark.gpu

VECTOR_ADD = """
__global__ void vector_add(float *c, const float *a, const float *b, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""


def test_energy_objective_vector_add_stores_energy_per_evaluation(tmp_path):
    pytest.importorskip("pynvml", reason="observers need nvidia-ml-py")
    size = 20_000_000
    a = np.random.default_rng(1).standard_normal(size, dtype=np.float32)
    b = np.random.default_rng(2).standard_normal(size, dtype=np.float32)
    args = [np.zeros_like(a), a, b, np.int32(size)]
    # A 0.25 s energy window keeps the test short (1 s, Kernel Tuner's, is the default).
    observables = ["nvml_energy", "nvml_power", "core_freq", "temperature"]
    observer = NVMLObserver(observables, continous_duration=0.25)
    db = tmp_path / "r.db"

    def tune():
        return tune_kernel(
            "vector_add",
            VECTOR_ADD,
            size,
            args,
            {"block_size_x": [128, 256, 512, 1024]},
            answer=[a + b, None, None, None],
            observers=[observer],
            metrics={"GFLOPS/W": lambda p: (size / 1e9) / p["nvml_energy"]},
            objective="GFLOPS/W",
            objective_higher_is_better=True,
            storage=str(db),
            quiet=True,
        )

    results, env = tune()
    assert len(results) == 4 and all(r["status"] == "OK" for r in results), results
    for row in results:
        assert row["nvml_energy"] > 0 and row["nvml_power"] > 0, row
        assert row["core_freq"] > 0 and row["temperature"] > 0
        assert isinstance(row["throttled"], bool)
    best = max(results, key=lambda r: r["GFLOPS/W"])
    assert env["best_config"]["block_size_x"] == best["block_size_x"]
    # Stored: a second call measures nothing and reads every energy back from the database.
    again, _ = tune()
    assert all(r.get("stored") for r in again)
    energy = {r["block_size_x"]: r["nvml_energy"] for r in results}
    assert {r["block_size_x"]: r["nvml_energy"] for r in again} == pytest.approx(energy)


def test_baseline_observe_stores_cudnns_power_energy_and_clock(tmp_path):
    pytest.importorskip("pynvml", reason="observers need nvidia-ml-py")
    pytest.importorskip("torch", reason="cuDNN's baseline runs through PyTorch")
    from click.testing import CliRunner

    from autotune.cli.app import main
    from autotune.store import Store

    db = str(tmp_path / "r.db")
    args = ["baseline", "--shape", "N=28,K=3,C=64,F=64,B=8", "--dtype", "bf16", "--layout"]
    args += ["NHWC", "--observe", "power,energy,clocks", "--storage", db]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert " W, " in result.output and " J a run, " in result.output
    row = Store(db).baselines().iloc[0]
    assert row["status"] == "OK" and row["power_w"] > 0 and row["sm_clock_mhz"] > 0
    # Energy a run: at most the board's power over the run's time (a generous 1 kW).
    assert 0 < row["energy_j"] < 1000.0 * row["time_ms"] / 1e3


def test_the_timer_rests_reads_the_top_clock_and_counts_its_tries():
    pytest.importorskip("pynvml", reason="the rest reads NVML")
    import cupy as cp

    from autotune.gpu.observe import Rest
    from autotune.gpu.session import GpuSession
    from autotune.gpu.timing import TimingPolicy
    from autotune.model.observe import RESTED_S, THROTTLED, TRIES, Observe

    session = GpuSession(0)
    rest = Rest(session.device)
    assert rest.nvml is not None and rest.top_mhz > 300  # NVML found this CUDA device
    assert rest(1.0) < 0.5  # an idle GPU is rested: at most NVML's 0.1 s update to wait for
    a = cp.ones((4096, 4096), dtype=cp.float32)
    m = session.timed(lambda: a @ a, TimingPolicy(observe=Observe(clocks=True)))
    seen = m.observed
    assert m.status.ok and 0 <= seen[RESTED_S] <= 1.05
    assert seen[TRIES] in (1.0, 2.0, 3.0)
    # Timed again only while throttled: a kept throttled one has used every try.
    assert seen[THROTTLED] == 0.0 or seen[TRIES] == 3.0
