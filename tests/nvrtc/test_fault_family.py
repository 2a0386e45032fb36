"""The fault-injection family itself, without a GPU: its space, plans and compile outcomes."""

from __future__ import annotations

import pytest

from autotune.gpu.compiler import CompileError
from autotune.model.problem import ConvProblem
from autotune.model.records import Status
from autotune.model.space import ARCH_LIMITS, Config
from autotune.tuning.studies import resource_problem
from tests.fault_family import FAULTS, FaultInjection, expected_status

FAMILY = FaultInjection()
PROBLEM = ConvProblem(N=17, K=3, C=2, F=3, B=2)


def test_space_holds_every_fault_at_every_block() -> None:
    space = FAMILY.load_space().bind(PROBLEM.fields(), ARCH_LIMITS["sm_90"])
    assert {str(c["FAULT"]) for c in space} == set(FAULTS)
    assert len(space) == 2 * len(FAULTS)


def test_faults_that_never_reach_the_gpu(compiler) -> None:
    def compile_(fault: str):
        return compiler.compile(FAMILY.plan(PROBLEM, Config.of(dict(FAULT=fault, BLOCK=64))))

    with pytest.raises(CompileError, match="injected compile error"):
        compile_("compile_error")
    plan = FAMILY.plan(PROBLEM, Config.of(dict(FAULT="too_much_smem", BLOCK=64)))
    why = resource_problem(compile_("too_much_smem"), plan.launches, ARCH_LIMITS["sm_90"])
    assert why and "shared memory" in why
    for fault in ("none", "slow", "hang", "out_of_bounds", "launch_error"):
        plan = FAMILY.plan(PROBLEM, Config.of(dict(FAULT=fault, BLOCK=128)))
        assert resource_problem(compile_(fault), plan.launches, ARCH_LIMITS["sm_90"]) is None
    assert expected_status(Config.of(dict(FAULT="hang", BLOCK=64))) is Status.TIMEOUT
