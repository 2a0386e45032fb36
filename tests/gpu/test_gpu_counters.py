"""On a CUDA device: a plan's counters (KernelPlan.counters) through the evaluator, with the
hand-written kernels of tests/data/counters.cu. The evaluator zeroes them before the checked
run and refuses a plan whose runs leave them non-zero."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune.families import conv2d
from autotune.families.plan import KernelPlan, Launch, cdiv
from autotune.gpu.compiler import Compiler
from autotune.gpu.session import Check, Job, TimingPolicy
from autotune.model.problem import ConvProblem
from autotune.model.records import Status

pytestmark = pytest.mark.gpu

QUICK = TimingPolicy(warmup=1, min_repeats=3, min_time_s=0.0, max_repeats=5, max_time_s=0.5)
COUNTERS = Path(__file__).parents[1] / "data" / "counters.cu"
# 17,424 outputs: 137 blocks of 128 threads arrive at the counter.
PROBLEM = ConvProblem(N=33, K=3, C=4, F=8, B=2)
BLOCK = 128


def _counted_job(evaluator, kernel: str) -> Job:
    compiler = Compiler(arch=evaluator.device.arch)
    ref_plan = conv2d.reference_plan(PROBLEM)
    outputs = PROBLEM.B * PROBLEM.F * PROBLEM.N * PROBLEM.N
    launch = Launch(kernel, (cdiv(outputs, BLOCK), 1, 1), (BLOCK, 1, 1), ("x", "w", "y", "sk"))
    plan = KernelPlan(COUNTERS, ref_plan.defines, (launch,), counters=(("sk", 1),))
    ref = compiler.compile(ref_plan)
    check = Check(conv2d.buffers(PROBLEM), ref_plan, ref.cubin, ref.key, 1e-5, QUICK, seed=5)
    return Job(kernel, plan, compiler.compile(plan).cubin, check)


def test_a_plan_that_resets_its_counters_is_checked_and_timed(evaluator):
    # Its last output is written only where the counter started at zero: passing the check
    # says the evaluator zeroed it, and passing the counters' checks that the runs left it so.
    m = evaluator.evaluate(_counted_job(evaluator, "counted_and_reset"), timeout_s=60)
    assert m.status is Status.OK, m.error
    assert m.rel_error <= 1e-5 and m.time_ms > 0


def test_a_plan_that_never_resets_them_is_a_wrong_result(evaluator):
    m = evaluator.evaluate(_counted_job(evaluator, "counted_never_reset"), timeout_s=60)
    assert m.status is Status.WRONG_RESULT
    assert m.rel_error <= 1e-5  # its output is right: only its counters are wrong
    assert m.error == (
        "left its counters non-zero after the checked run (sk): a run must reset what it counts"
    )


def test_a_plan_that_resets_them_in_its_first_run_only_is_caught_after_the_timed_runs(evaluator):
    m = evaluator.evaluate(_counted_job(evaluator, "counted_reset_on_first_run"), timeout_s=60)
    assert m.status is Status.WRONG_RESULT
    assert "left its counters non-zero after the timed runs (sk)" in m.error, m.error
