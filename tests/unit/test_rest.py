"""The timer's rest and its throttled runs, without a GPU: gpu/observe.py's Rest and Watch against
a fake pynvml, GpuSession.timed against made-up measurements. Rest waits while NVML says power or
heat holds the SM clock down, and no longer than asked; the watch judges the timed runs alone
(not the energy window) and calls throttled a measurement held down from its first sample, which
a drop alone cannot see; a throttled measurement is timed again, and the first one not throttled
is kept."""

from __future__ import annotations

import sys

from autotune.gpu.observe import Rest, Watch
from autotune.gpu.session import GpuSession
from autotune.gpu.timing import REST_MAX_S, TimingPolicy
from autotune.model.observe import RESTED_S, THROTTLED, TRIES, Observe
from autotune.model.records import Measurement, Status
from tests.fake_nvml import FakeDevice, install

CLOCKS = Observe(clocks=True, window_s=0.02)


def capped_for(fake, polls: int) -> None:
    """The fake's clock held down by the power cap for `polls` reads of the reasons, then free."""
    reads = {"n": 0}
    cap, idle = fake.nvmlClocksEventReasonSwPowerCap, fake.nvmlClocksEventReasonGpuIdle

    def reasons() -> int:
        reads["n"] += 1
        return cap | idle if reads["n"] <= polls else idle

    fake.reasons = reasons
    fake.sm_clock = lambda: 1500 if reads["n"] <= polls else 1980


def test_rest_waits_while_the_power_cap_holds_the_clock(monkeypatch):
    fake = install(monkeypatch)
    capped_for(fake, 4)
    waited = Rest(FakeDevice())(1.0)
    assert fake.calls.count("reasons") == 5  # four capped reads, then the free one
    assert 0.03 <= waited < 0.5  # a poll every 10 ms


def test_a_capped_reason_with_the_clock_back_at_the_top_is_rested(monkeypatch):
    # NVML keeps reporting SwPowerCap for about half a second after the clock is back (call 1).
    fake = install(monkeypatch)
    fake.reasons = lambda: fake.nvmlClocksEventReasonSwPowerCap
    fake.sm_clock = lambda: 1965  # within THROTTLE_DROP of 1980
    assert Rest(FakeDevice())(1.0) < 0.01
    assert fake.calls.count("reasons") == 1


def test_an_idle_clock_is_not_waited_on(monkeypatch):
    # An idle GPU reports a low SM clock and no capping reason: nothing to wait for.
    fake = install(monkeypatch)
    fake.sm_clock = lambda: 345
    assert Rest(FakeDevice())(1.0) < 0.01


def test_rest_gives_up_after_its_bound(monkeypatch):
    fake = install(monkeypatch)
    capped_for(fake, 10**9)
    waited = Rest(FakeDevice())(0.05)
    assert 0.05 <= waited < 0.5


def test_without_nvml_there_is_no_wait(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    assert Rest(FakeDevice())(1.0) is None


def test_a_device_nvml_cannot_read_is_not_waited_on(monkeypatch):
    install(monkeypatch)

    class Elsewhere:
        pci_bus_id = "0000:01:00.0"  # NVML has no such device: Not Found

    assert Rest(Elsewhere())(1.0) is None


def test_the_timer_rests_by_default_for_at_most_a_second():
    assert TimingPolicy().rest_s == REST_MAX_S == 1.0


def watched(fake, timed_mhz, window_mhz=1500, rested_s: float | None = 0.02):
    """A measurement as GpuSession.timed makes one: the timed runs with the SM clock at
    timed_mhz (each sample's reading in turn), then the energy window at window_mhz."""
    clocks = iter(timed_mhz)
    fake.sm_clock = lambda: next(clocks, timed_mhz[-1])
    watch = Watch(Observe(clocks=True, energy=True, interval_s=10.0, window_s=0.02), FakeDevice())
    with watch:
        watch._sample(), watch._sample()  # the thread's samples, at their own pace in the worker
        fake.sm_clock = lambda: window_mhz
        watch.window(lambda: None, lambda: None, 5.0)
    return dict(watch.readings(rested_s=rested_s)["observations"])


def test_the_energy_window_at_the_power_limit_is_not_throttling(monkeypatch):
    # Back to back the window is expected at the limit; the timed runs ran at the top clock.
    seen = watched(install(monkeypatch), [1980, 1980, 1980], window_mhz=1500)
    assert seen[THROTTLED] == 0.0
    assert seen[RESTED_S] == 0.02


def test_timed_runs_held_down_from_the_start_are_throttled(monkeypatch):
    # No drop within them (session 63's 1,651 MHz all through), but far below the top.
    seen = watched(install(monkeypatch), [1650, 1650, 1650], window_mhz=1650, rested_s=None)
    assert seen[THROTTLED] == 1.0
    assert RESTED_S not in seen  # the timer did not rest (rest_s 0, or no NVML)


def test_an_idle_first_reading_is_not_throttling(monkeypatch):
    # NVML may still report the idle clock at the first sample: a rise, not a drop.
    assert watched(install(monkeypatch), [345, 1980, 1980])[THROTTLED] == 0.0


def test_one_step_below_the_top_is_not_throttling(monkeypatch):
    assert watched(install(monkeypatch), [1965, 1965, 1965])[THROTTLED] == 0.0


class Timings:
    """GpuSession.timed's own logic over made-up measurements, one a try."""

    def __init__(self, *measured: Measurement) -> None:
        self.queue, self.tries = list(measured), 0

    def _timed_once(self, run, policy, rel_error, best_ms) -> Measurement:
        self.tries += 1
        return self.queue.pop(0)

    def timed(self, policy: TimingPolicy) -> Measurement:
        return GpuSession.timed(self, lambda: None, policy)  # type: ignore[arg-type]


def measured(ms: float, held: bool, status: Status = Status.OK) -> Measurement:
    return Measurement(status, time_ms=ms, observations=((THROTTLED, float(held)),))


CLOCKED = TimingPolicy(observe=CLOCKS)


def test_a_throttled_measurement_is_timed_again_until_one_is_not():
    t = Timings(measured(1.04, True), measured(0.90, False), measured(0.85, False))
    m = t.timed(CLOCKED)
    assert (m.time_ms, t.tries, m.observed[TRIES]) == (0.90, 2, 2.0)


def test_all_throttled_keeps_the_fastest_and_says_so():
    t = Timings(measured(1.04, True), measured(0.99, True), measured(1.01, True))
    m = t.timed(CLOCKED)
    assert (m.time_ms, t.tries, m.observed[THROTTLED], m.observed[TRIES]) == (0.99, 3, 1.0, 3.0)


def test_no_retry_without_clocks_or_when_stopped_early():
    t = Timings(measured(1.04, True), measured(0.90, False))
    assert t.timed(TimingPolicy()).time_ms == 1.04 and t.tries == 1
    t = Timings(measured(1.04, True, Status.SLOW), measured(0.90, False))
    assert t.timed(CLOCKED).status is Status.SLOW and t.tries == 1
    t = Timings(measured(1.04, True), measured(0.90, False))
    assert t.timed(TimingPolicy(observe=CLOCKS, throttled_retries=0)).time_ms == 1.04
