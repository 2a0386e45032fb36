"""NVML observations of one evaluation, in the GPU worker: a sampling thread around the timed
runs and the energy window after them (model/observe.py says what is recorded and why).

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
    SM_CLOCK_MAX_MHZ,
    SM_CLOCK_MHZ,
    SM_CLOCK_MIN_MHZ,
    TEMPERATURE_C,
    THROTTLED,
    Observe,
    ObserveError,
    throttled,
)

# The energy window queues this much work between waits, so the GPU stays busy while the host
# checks the clock, and never more runs than this at once.
WINDOW_BATCH_S = 0.01
WINDOW_BATCH_MAX = 10_000

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
        if self.observe is not None:
            self.nvml = nvml()
            self.handle = self.nvml.nvmlDeviceGetHandleByPciBusId(device.pci_bus_id)

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

    def readings(self) -> dict[str, Any]:
        """The Measurement's observations and power readings (nothing when not observing)."""
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
            out[THROTTLED] = float(throttled(sm))
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


__all__ = ["Watch", "nvml"]
