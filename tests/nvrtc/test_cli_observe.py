"""`autotune run --observe` and the throttling flag of `autotune best`, through click's runner."""

from __future__ import annotations

import sys

from click.testing import CliRunner

import autotune.gpu.evaluator
from autotune.cli.app import main
from autotune.families import get_family
from autotune.model.observe import Observe
from autotune.model.problem import ConvProblem
from autotune.model.records import DeviceInfo, Measurement
from autotune.model.space import Config
from autotune.store import Store
from tests.conftest import SyntheticEvaluator
from tests.fake_nvml import install

# What the commands read as current: rows of this code (DESIGN section 2).
CURRENT = get_family("direct_naive").kernel_digest()

RUN = ["run", "--family", "direct_naive", "--shape", "N=9,K=3,C=1,F=2", "--budget", "2"]


def test_run_observe_asks_the_worker_to_observe(tmp_path, monkeypatch):
    install(monkeypatch)
    made = []

    def factory(index=0):
        made.append(SyntheticEvaluator(lambda d: 1.0 + d.get("BLOCK_X", 1) / 64))
        return made[-1]

    monkeypatch.setattr(autotune.gpu.evaluator, "GpuEvaluator", factory)
    args = [*RUN, "--no-baseline", "--storage", str(tmp_path / "r.db"), "--observe", "power,clocks"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    observed = {job.check.timing.observe for job in made[0].jobs}
    assert observed == {Observe(power=True, clocks=True)}


def test_run_observe_refuses_in_one_line(tmp_path, monkeypatch):
    install(monkeypatch)
    bad = CliRunner().invoke(main, [*RUN, "--observe", "power,volts"])
    assert bad.exit_code == 2 and "cannot observe volts" in bad.output
    monkeypatch.setitem(sys.modules, "pynvml", None)
    missing = CliRunner().invoke(main, [*RUN, "--observe", "energy"])
    assert missing.exit_code == 2 and "pip install nvidia-ml-py" in missing.output
    assert "Traceback" not in bad.output + missing.output


def test_best_marks_a_throttled_best(tmp_path):
    db = tmp_path / "r.db"
    problem = ConvProblem(B=1, C=1, N=9, K=3, F=2)
    with Store(db) as store:
        device = store.register_device(DeviceInfo("H100", "9.0", 132))
        run = store.start_run(device, "test", {})
        for tile, throttle in ((1, 1.0), (2, 0.0)):
            m = Measurement.from_samples([float(tile)] * 3, observations=(("throttled", throttle),))
            config = Config({"TILE": tile})
            store.record(run, device, "direct_naive", problem, config, m, problem.flops, CURRENT)
    md = CliRunner().invoke(main, ["best", "--storage", str(db)])
    assert md.exit_code == 0, md.output
    header = [c.strip() for c in md.output.splitlines()[0].strip("|").split("|")]
    assert header[header.index("time_ms") + 1] == "throttled"
    assert "| yes" in md.output.splitlines()[2]
