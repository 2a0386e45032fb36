"""On a CUDA device: a whole campaign over the fault-injection family survives every fault."""

from __future__ import annotations

import pytest

from autotune.gpu.compiler import Compiler
from autotune.gpu.evaluator import GpuEvaluator
from autotune.gpu.session import TimingPolicy
from autotune.model.problem import ConvProblem
from autotune.model.records import Status
from autotune.model.space import Config
from autotune.store import Store
from autotune.tuning.runners import GpuRunner
from autotune.tuning.studies import plan_studies
from autotune.tuning.tuner import Tuner
from tests.fault_family import FaultInjection, expected_status

pytestmark = pytest.mark.gpu

QUICK = TimingPolicy(warmup=1, min_repeats=3, min_time_s=0.0, max_repeats=5, max_time_s=0.5)


def test_fault_campaign_records_every_fault_and_keeps_going(tmp_path):
    family = FaultInjection()
    problem = ConvProblem(N=64, K=3, C=16, F=16, B=2)  # big enough that "slow" shows
    store = Store(str(tmp_path / "faults.db"))
    with GpuEvaluator() as evaluator:
        studies, skipped = plan_studies([(family, problem)], evaluator.limits)
        assert not skipped
        compiler = Compiler(arch=evaluator.device.arch)
        # The pre-launch check needs the ptxas report of this GPU's compiler.
        over = family.plan(problem, Config.of(dict(FAULT="too_much_smem", BLOCK=64)))
        assert "fault_injection" in compiler.compile(over).resources, compiler.compile(over).log
        tuner = Tuner(GpuRunner(compiler, evaluator), store, timing=QUICK)
        outcome = tuner.run(studies, budget=None, skipped=skipped)  # every configuration
        restarts = evaluator.restarts

    (study,) = outcome.studies
    assert study.evaluated == len(studies[0].space) == 18
    rows = store.evaluations(tuner.device_id, family.name, problem)
    assert len(rows) == 18
    # A correct but slow configuration timed after a much faster one is stopped early (SLOW).
    wrong = {
        row.config.to_json(): (row.status, row.error)
        for row in rows
        if row.status is not expected_status(row.config)
        and not (expected_status(row.config) is Status.OK and row.status is Status.SLOW)
    }
    assert not wrong, wrong
    for row in rows:
        assert row.status is Status.OK or row.error, row  # every failure says why
    # An illegal address and a hang each cost the worker, once per block size.
    assert restarts == 4
    best_config, best = study.best
    assert best_config["FAULT"] == "none"
    assert store.best(None, family.name)["config"].str.contains('"none"').all()
    slow = [r.time_ms for r in rows if r.config["FAULT"] == "slow"]
    assert min(slow) > best.time_ms
