"""On a CUDA device: the timer of protocol 2 measures kernels, not the host or the L2.

An empty kernel must measure under 3 us (the host's submission is hidden behind the flush), a
kernel that spins a known number of cycles within 5% of cycles / SM clock, and a plan of three
launches within 10% of the sum of the three timed alone.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from autotune.gpu.compiler import Compiler
from autotune.gpu.timing import TimingPolicy

pytestmark = pytest.mark.gpu

SOURCE = Path(__file__).resolve().parents[1] / "data" / "timer_kernels.cu"
POLICY = TimingPolicy(early_stop=None)


@pytest.fixture(scope="module")
def session():
    from autotune.gpu.session import GpuSession

    return GpuSession(0)


@pytest.fixture(scope="module")
def kernels(session):
    compiled = Compiler(arch=session.info().arch).compile_source(SOURCE, ())
    return session.load(compiled.cubin, ("empty_kernel", "spin"))


def _median(session, run) -> float:
    return float(np.median(session.time_runs(run, POLICY)))


def _spin(kernels, cycles: int, out=None):
    import cupy as cp

    args = (np.int64(cycles), out if out is not None else cp.uint64(0))
    return lambda: kernels["spin"]((1,), (1,), args)


@pytest.mark.xfail(
    reason="target of issue 16 not met: two CUDA events around an empty kernel measure 3.7 to "
    "4.2 us on the lent H100 (driver 580) whatever the flush, and 3.9 us with no flush at all "
    "once the host is ahead (results/h100/protocol2/flush_choice.txt)",
    strict=False,
)
def test_an_empty_kernel_measures_under_3_us(session, kernels) -> None:
    median_ms = _median(session, lambda: kernels["empty_kernel"]((1,), (1,), ()))
    print(f"empty kernel: {median_ms * 1e3:.2f} us")
    assert median_ms < 3e-3


def test_the_hosts_submission_is_not_counted(session, kernels) -> None:
    """Protocol 1 (the host waits after every sample, so each sample starts on an idle GPU that
    waits for the launch) counted the host's launch path; protocol 2 must not."""
    import cupy as cp

    def run() -> None:
        kernels["empty_kernel"]((1,), (1,), ())

    start, end = cp.cuda.Event(), cp.cuda.Event()
    waited = []
    for _ in range(200):
        start.record()
        run()
        end.record()
        end.synchronize()
        waited.append(cp.cuda.get_elapsed_time(start, end))
    hidden, exposed = _median(session, run), float(np.median(waited))
    print(f"empty kernel: {hidden * 1e3:.2f} us; {exposed * 1e3:.2f} us with the host exposed")
    assert hidden < 0.75 * exposed


@pytest.mark.parametrize("cycles", [200_000, 2_000_000])
def test_a_spinning_kernel_measures_its_cycles_over_the_sm_clock(session, kernels, cycles) -> None:
    import cupy as cp

    out = cp.zeros(2, dtype=cp.uint64)
    _spin(kernels, cycles, out)()
    session.sync()
    elapsed_ns, counted = (int(v) for v in out.get())
    clock_ghz = counted / elapsed_ns  # the clock the SM ran at, by the global timer
    expected_ms = cycles / clock_ghz / 1e6
    median_ms = _median(session, _spin(kernels, cycles))
    nominal = session.info().clock_mhz
    print(
        f"{cycles} cycles: {median_ms * 1e3:.2f} us measured, {expected_ms * 1e3:.2f} us at the "
        f"{clock_ghz * 1e3:.0f} MHz the kernel ran at (nominal {nominal} MHz)"
    )
    assert median_ms == pytest.approx(expected_ms, rel=0.05)


def test_a_plan_of_three_launches_measures_the_sum_of_its_launches(session, kernels) -> None:
    parts = [_spin(kernels, cycles) for cycles in (50_000, 100_000, 200_000)]
    alone = [_median(session, part) for part in parts]

    def plan() -> None:
        for part in parts:
            part()

    together = _median(session, plan)
    print(f"three launches: {together * 1e3:.2f} us; alone {[round(a * 1e3, 2) for a in alone]}")
    assert together == pytest.approx(sum(alone), rel=0.10)
