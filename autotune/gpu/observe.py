"""NVML in the GPU worker: the observations of one evaluation (a sampling thread around the timed
runs and the energy window after them; model/observe.py says what is recorded and why), and the
rest before timed runs (Rest: the clock given back after power or thermal capping).

pynvml (the nvidia-ml-py package) is imported here at first use, in the worker only; the
parent process never calls NVML.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

from autotune.model.observe import (
    ENERGY_J,
    MEM_CLOCK_MHZ,
    POWER_W,
    RESTED_S,
    SM_CLOCK_MAX_MHZ,
    SM_CLOCK_MHZ,
    SM_CLOCK_MIN_MHZ,
    TEMPERATURE_C,
    THROTTLE_DROP,
    THROTTLED,
    Observe,
    ObserveError,
    throttled,
)

# The energy window queues this much work between waits, so the GPU stays busy while the host
# checks the clock, and never more runs than this at once.
WINDOW_BATCH_S = 0.01
WINDOW_BATCH_MAX = 10_000

# The clock event reasons that hold the SM clock down while the GPU works (pynvml's names, or
# their names before NVML 12.5).
CAP_REASONS = ("SwPowerCap", "HwSlowdown", "SwThermalSlowdown", "HwThermalSlowdown")
REST_POLL_S = 0.01

_NVML: Any = None  # the pynvml module, initialised once per process


def nvml() -> Any:
    """pynvml, initialised (nvmlInit) the first time this process uses it."""
    global _NVML
    try:
        import pynvml
    except ImportError:
        raise ObserveError(
            "observing the GPU needs NVML's Python binding: pip install nvidia-ml-py"
        ) from None
    if pynvml is not _NVML:
        pynvml.nvmlInit()
        _NVML = pynvml
    return pynvml


def _reason_bits(n: Any) -> int:
    bits = 0
    for reason in CAP_REASONS:
        bit = getattr(n, f"nvmlClocksEventReason{reason}", None)
        bits |= getattr(n, f"nvmlClocksThrottleReason{reason}", 0) if bit is None else bit
    return bits


def _reasons_reader(n: Any) -> Callable[[Any], int]:
    return (
        getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None)
        or n.nvmlDeviceGetCurrentClocksThrottleReasons
    )


class Rest:
    """The wait before a configuration's timed runs for the SM clock that power or thermal
    capping held down to come back (results/h200/20261201g: 0.1-0.2 s after seconds of load at
    the power limit; a measurement started at once ran 8-10% slower. Between a tuning run's
    evaluations it seldom has to wait: 0-0.03 s there). Rested is: NVML reports
    none of CAP_REASONS, or an SM clock within THROTTLE_DROP of the device's highest. Without
    NVML (no pynvml, no such device) it does not wait."""

    def __init__(self, device: Any) -> None:
        self.nvml: Any = None
        try:
            import pynvml
        except ImportError:
            return
        try:
            n = nvml()
            self.handle = n.nvmlDeviceGetHandleByPciBusId(device.pci_bus_id)
            self.top_mhz = float(n.nvmlDeviceGetMaxClockInfo(self.handle, n.NVML_CLOCK_SM))
            self.reasons, self.caps = _reasons_reader(n), _reason_bits(n)
        except pynvml.NVMLError:  # NVML cannot read this device: nothing to wait on
            return
        self.nvml = n

    def rested(self) -> bool:
        n, h = self.nvml, self.handle
        if not self.reasons(h) & self.caps:
            return True
        return n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM) >= self.top_mhz * (1 - THROTTLE_DROP)

    def __call__(self, max_s: float) -> float | None:
        """Wait until rested or max_s has passed; the seconds waited (None: NVML cannot say)."""
        if self.nvml is None:
            return None
        start = time.perf_counter()
        try:
            while not self.rested() and time.perf_counter() - start < max_s:
                time.sleep(REST_POLL_S)
        except self.nvml.NVMLError:
            return None
        return time.perf_counter() - start


class Watch:
    """What NVML says of one device while one configuration is measured.

    `with Watch(observe, device):` samples from entry to exit on a thread (`device` is anything
    with a `pci_bus_id`: CUDA's and NVML's device numbers differ where devices are hidden or
    ordered otherwise, the bus id is the same); `window()` runs the energy window inside it;
    `readings()` gives the Measurement's fields. Without anything to observe it does nothing."""

    def __init__(self, observe: Observe | None, device: Any) -> None:
        self.observe = observe if observe is not None and observe.any else None
        self._samples: list[tuple[float, float | None, float | None, float | None, float | None]]
        self._samples = []
        self._window: tuple[float, float, int, float | None, float | None] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = time.perf_counter()
        self.top_mhz: float | None = None  # the device's highest SM clock
        if self.observe is not None:
            self.nvml = nvml()
            self.handle = self.nvml.nvmlDeviceGetHandleByPciBusId(device.pci_bus_id)
            if self.observe.clocks:
                self.top_mhz = self._read(
                    self.nvml.nvmlDeviceGetMaxClockInfo, self.nvml.NVML_CLOCK_SM
                )

    # -- sampling ------------------------------------------------------------------------------

    def __enter__(self) -> Watch:
        if self.observe is not None:
            self._sample()
            self._thread = threading.Thread(target=self._loop, name="autotune-nvml", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self._sample()

    def _loop(self) -> None:
        while not self._stop.wait(self.observe.interval_s):
            self._sample()

    def _read(self, function: Callable[..., Any], *args: Any) -> float | None:
        """One NVML reading; None where the device does not report it."""
        try:
            return float(function(self.handle, *args))
        except self.nvml.NVMLError:
            return None

    def _sample(self) -> None:
        o, n = self.observe, self.nvml
        self._samples.append(
            (
                time.perf_counter() - self._t0,
                self._read(n.nvmlDeviceGetPowerUsage) if o.window else None,  # mW
                self._read(n.nvmlDeviceGetClockInfo, n.NVML_CLOCK_SM) if o.clocks else None,
                self._read(n.nvmlDeviceGetClockInfo, n.NVML_CLOCK_MEM) if o.clocks else None,
                self._read(n.nvmlDeviceGetTemperature, n.NVML_TEMPERATURE_GPU)
                if o.temperature
                else None,
            )
        )

    # -- the energy window ---------------------------------------------------------------------

    def window(self, run: Callable[[], None], sync: Callable[[], None], time_ms: float) -> None:
        """Run the configuration back to back for at least the window (no flush between runs:
        its memset is not the kernel's energy), reading NVML's energy counter before and after."""
        if self.observe is None or not self.observe.window:
            return
        batch = max(1, min(WINDOW_BATCH_MAX, math.ceil(WINDOW_BATCH_S * 1e3 / max(time_ms, 1e-6))))
        sync()
        start = time.perf_counter()
        self._sample()  # the window's first and last samples bound its series
        before = self._read(self.nvml.nvmlDeviceGetTotalEnergyConsumption)  # mJ
        runs = 0
        while True:
            for _ in range(batch):
                run()
            runs += batch
            sync()
            if time.perf_counter() - start >= self.observe.window_s:
                break
        after = self._read(self.nvml.nvmlDeviceGetTotalEnergyConsumption)
        self._sample()
        end = time.perf_counter()
        energy_mj = after - before if before is not None and after is not None else None
        self._window = (start - self._t0, end - self._t0, runs, energy_mj, end - start)

    # -- the results ---------------------------------------------------------------------------

    def throttled(self) -> bool:
        """Whether the timed runs (not the energy window after them, which runs back to back and
        is expected at the power limit) ran held down: their SM clock dropped (model/observe.py's
        throttled), or never came within THROTTLE_DROP of the device's highest clock (a
        measurement that started held down and stayed so shows no drop)."""
        end = self._window[0] if self._window is not None else math.inf
        sm = [clock for t, _, clock, *_ in self._samples if clock is not None and t <= end]
        top = self.top_mhz
        low = bool(sm) and top is not None and max(sm) < top * (1 - THROTTLE_DROP)
        return throttled(sm) or low

    def readings(self, rested_s: float | None = None) -> dict[str, Any]:
        """The Measurement's observations and power readings (nothing when not observing);
        rested_s, the timer's wait for the clock before the samples, goes with the clocks."""
        o = self.observe
        if o is None:
            return {}
        out: dict[str, float] = {}
        column = list(zip(*self._samples, strict=True)) if self._samples else [()] * 5
        sm = [v for v in column[2] if v is not None]
        mem = [v for v in column[3] if v is not None]
        temperature = [v for v in column[4] if v is not None]
        if sm:
            out[SM_CLOCK_MHZ] = statistics.fmean(sm)
            out[SM_CLOCK_MIN_MHZ] = min(sm)
            out[SM_CLOCK_MAX_MHZ] = max(sm)
            out[THROTTLED] = float(self.throttled())
            if rested_s is not None:
                out[RESTED_S] = rested_s
        if mem:
            out[MEM_CLOCK_MHZ] = statistics.fmean(mem)
        if temperature:
            out[TEMPERATURE_C] = statistics.fmean(temperature)
        readings: tuple[tuple[float, float], ...] = ()
        if self._window is not None:
            begin, end, runs, energy_mj, elapsed_s = self._window
            window = [
                (t - begin, p / 1e3)
                for t, p, *_ in self._samples
                if begin <= t <= end and p is not None
            ]
            power_w = statistics.median(w for _, w in window) if window else None
            if o.power and power_w is not None:
                out[POWER_W] = power_w
            if o.energy:
                if energy_mj is not None and energy_mj > 0:
                    out[ENERGY_J] = energy_mj / 1e3 / runs
                elif power_w is not None:  # no energy counter on this device: power x time
                    out[ENERGY_J] = power_w * elapsed_s / runs
            if o.power_readings:
                readings = tuple(window)
        return {"observations": tuple(out.items()), "power_readings": readings}


__all__ = ["Rest", "Watch", "nvml"]
