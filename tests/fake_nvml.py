"""A stand-in for pynvml (nvidia-ml-py) on a machine without a GPU: one device, found by its PCI
bus id only, whose readings the test sets. It refuses what real NVML refuses (a call before
nvmlInit, another handle, an unknown bus id) and answers each clock type with its own value, so
a test fails when the code stops calling NVML as it must."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable

BUS_ID = "00000000:C1:00.0"


class FakeNvml(types.ModuleType):
    # pynvml's values (nvidia-ml-py 13): the code must pass these names, not numbers of its own.
    NVML_CLOCK_GRAPHICS = 0
    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_TEMPERATURE_GPU = 0
    nvmlClocksEventReasonGpuIdle = 0x1
    nvmlClocksEventReasonSwPowerCap = 0x4
    nvmlClocksEventReasonHwSlowdown = 0x8
    nvmlClocksEventReasonSwThermalSlowdown = 0x20
    nvmlClocksEventReasonHwThermalSlowdown = 0x40

    class NVMLError(Exception):
        pass

    def __init__(self) -> None:
        super().__init__("pynvml")
        self.initialised = False
        self.handle = object()
        self.energy_mj = 1_000_000  # the counter since the driver loaded
        self.energy_supported = True
        self.power_mw = 300_000
        self.sm_clock: Callable[[], int] = lambda: 1980
        self.graphics_clock = 1755  # never what the SM clock reads: the wrong type shows
        self.mem_clock = 2619
        self.temperature = 41
        self.max_sm_clock = 1980
        self.reasons: Callable[[], int] = lambda: self.nvmlClocksEventReasonGpuIdle
        self.calls: list[str] = []

    def _device(self, handle: object, call: str) -> None:
        if not self.initialised:
            raise self.NVMLError("Uninitialized")
        if handle is not self.handle:
            raise self.NVMLError("Invalid Argument")
        self.calls.append(call)

    def nvmlInit(self) -> None:
        self.initialised = True

    def nvmlDeviceGetHandleByPciBusId(self, bus_id: str) -> object:
        if not self.initialised:
            raise self.NVMLError("Uninitialized")
        if _bus(bus_id) != _bus(BUS_ID):  # NVML reads the numbers, in hex, any width
            raise self.NVMLError("Not Found")
        return self.handle

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: object) -> int:
        self._device(handle, "energy")
        if not self.energy_supported:
            raise self.NVMLError("Not Supported")
        return self.energy_mj

    def nvmlDeviceGetPowerUsage(self, handle: object) -> int:
        self._device(handle, "power")
        return self.power_mw

    def nvmlDeviceGetClockInfo(self, handle: object, clock_type: int) -> int:
        self._device(handle, "clock")
        clocks = {
            self.NVML_CLOCK_GRAPHICS: lambda: self.graphics_clock,
            self.NVML_CLOCK_SM: self.sm_clock,
            self.NVML_CLOCK_MEM: lambda: self.mem_clock,
        }
        if clock_type not in clocks:
            raise self.NVMLError("Invalid Argument")
        return clocks[clock_type]()

    def nvmlDeviceGetMaxClockInfo(self, handle: object, clock_type: int) -> int:
        self._device(handle, "max clock")
        if clock_type != self.NVML_CLOCK_SM:
            raise self.NVMLError("Invalid Argument")
        return self.max_sm_clock

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: object) -> int:
        self._device(handle, "reasons")
        return self.reasons()

    def nvmlDeviceGetTemperature(self, handle: object, sensor: int) -> int:
        self._device(handle, "temperature")
        if sensor != self.NVML_TEMPERATURE_GPU:
            raise self.NVMLError("Invalid Argument")
        return self.temperature


def _bus(text: str) -> tuple[int, ...]:
    domain, bus, rest = text.split(":")
    device, function = rest.split(".")
    return tuple(int(part, 16) for part in (domain, bus, device, function))


class FakeDevice:
    """What the worker's Watch reads of a CUDA device: its PCI bus id (CuPy's form)."""

    pci_bus_id = "0000:C1:00.0"


def install(monkeypatch) -> FakeNvml:
    """A fresh fake in place of pynvml for one test."""
    fake = FakeNvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    return fake
