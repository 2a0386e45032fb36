"""The evaluator and a plan's counters (KernelPlan.counters), without a GPU: the session's own
flow around a configuration's runs, its launches faked on NumPy arrays. Counters are zero
before the first run, and a run that leaves one non-zero is a WRONG_RESULT, found after the
checked run or after the timed runs (tests/gpu/test_gpu_counters.py runs real kernels)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("cupy")

from autotune.families.plan import KernelPlan, Launch  # noqa: E402
from autotune.gpu import session as session_module  # noqa: E402
from autotune.gpu.jobs import Job  # noqa: E402
from autotune.gpu.session import GpuSession  # noqa: E402
from autotune.gpu.timing import TimingPolicy  # noqa: E402
from autotune.model.records import Status  # noqa: E402

BLOCKS = 4
TIMED_RUNS = 5
PLAN = KernelPlan(
    Path("counted.cu"),
    (),
    (Launch("counted", (BLOCKS, 1, 1), (32, 1, 1), ("y", "sk")),),
    counters=(("sk", 3),),
)


class FakeCheck:
    """Outputs always right: only the counters can make a run wrong here."""

    timing = TimingPolicy(early_stop=None)
    outputs_back = False

    def arrays(self, session, plan) -> dict:
        return {"y": np.full(1, np.nan, dtype=np.float32)}

    def verdict(self, session, arrays) -> tuple:
        return None, 0.0


def _session(monkeypatch, kernel: Callable[[dict], None]) -> GpuSession:
    """A session whose every launch is `kernel` on the run's arrays (NumPy)."""
    fake_cp = SimpleNamespace(zeros=np.zeros, uint32=np.uint32, count_nonzero=np.count_nonzero)
    monkeypatch.setattr(session_module, "cp", fake_cp)
    monkeypatch.setattr(session_module, "load_module", lambda *args, **kw: (None, {}))
    monkeypatch.setattr(session_module, "opt_in_shared_memory", lambda *args: None)
    session = object.__new__(GpuSession)
    session._tmp = SimpleNamespace(name="")
    session.device = None
    session.sync = lambda: None

    def runner(launches, functions, arrays):
        def run() -> None:
            for _ in launches:
                kernel(arrays)

        return run

    def time_runs(run, policy, best_ms=None, rested=False) -> list[float]:
        for _ in range(TIMED_RUNS):
            run()
        return [1.0] * TIMED_RUNS

    session.runner = runner
    session.rest = lambda policy: None  # no NVML here: nothing to wait for
    session.time_runs = time_runs
    return session


def _evaluate(monkeypatch, kernel):
    return _session(monkeypatch, kernel)._evaluate(Job("counted", PLAN, b"", FakeCheck()))


def test_a_plan_that_resets_its_counters_is_timed_and_found_them_zero_every_run(monkeypatch):
    starts = []

    def counted(arrays):
        sk = arrays["sk"]
        starts.append((sk.dtype, sk.tolist()))
        sk[0] += BLOCKS  # every block arrives
        sk[0] = 0  # the last one resets it

    m = _evaluate(monkeypatch, counted)
    assert m.status is Status.OK and m.time_ms == 1.0, m.error
    assert starts == [(np.uint32, [0, 0, 0])] * (1 + TIMED_RUNS)


def test_a_run_that_leaves_a_counter_is_wrong_after_the_checked_run(monkeypatch):
    timed = []

    def counted(arrays):
        arrays["sk"][2] += BLOCKS
        timed.append(1)

    m = _evaluate(monkeypatch, counted)
    assert m.status is Status.WRONG_RESULT and m.rel_error == 0.0
    assert m.error == (
        "left its counters non-zero after the checked run (sk): a run must reset what it counts"
    )
    assert len(timed) == 1  # not timed


def test_a_run_that_resets_on_its_first_run_only_is_wrong_after_the_timed_runs(monkeypatch):
    def counted(arrays):
        first = bool(np.isnan(arrays["y"][0]))  # poisoned until the first run writes it
        arrays["y"][0] = 1.0
        arrays["sk"][0] += BLOCKS
        if first:
            arrays["sk"][0] = 0

    m = _evaluate(monkeypatch, counted)
    assert m.status is Status.WRONG_RESULT and m.time_ms is None
    assert "non-zero after the timed runs (sk)" in m.error
