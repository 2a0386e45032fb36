"""Kernel Tuner's NVMLObserver and the keys its readings take in tune_kernel's result dicts;
Kernel Tuner's output observers (AccuracyObserver).

The NVML observer here is data: what to observe. NVML is called in autotune's GPU worker
(gpu/observe.py), never in the caller's process; the readings come back with each measurement.
An output observer is the caller's code (Kernel Tuner's own AccuracyObserver, or any object
with its process_output(answer, outputs) and get_results()): it is called in the caller's
process on the checked run's outputs, which the worker sends back; its numeric results are
stored with the evaluation as readings named "output:<key>", so that a resumed call has them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from autotune.model.observe import (
    ENERGY_J,
    MEM_CLOCK_MHZ,
    POWER_W,
    SM_CLOCK_MHZ,
    TEMPERATURE_C,
    THROTTLED,
    Observe,
    ObserveError,
    require_nvml,
)
from autotune.model.records import Measurement, Status

# Kernel Tuner's observable names and the readings they are, in its units: nvml_power in W (the
# median of NVML's readings while the kernel runs), nvml_energy in J per run of the kernel,
# core_freq and mem_freq in MHz, temperature in degrees C; power_readings is the series of
# [seconds, milliwatts] of the energy window.
READINGS = {
    "nvml_power": POWER_W,
    "nvml_energy": ENERGY_J,
    "core_freq": SM_CLOCK_MHZ,
    "mem_freq": MEM_CLOCK_MHZ,
    "temperature": TEMPERATURE_C,
}
OBSERVABLES = (*READINGS, "power_readings")
NOT_OBSERVED = {
    "gr_voltage": "Kernel Tuner reads it from nvidia-smi's text, not NVML; autotune does not",
}
# Kernel Tuner's tunables that set the card's clocks or power limit through NVML. Refused: they
# hold for every process on the GPU and outlast the run (a crash leaves the card changed), and
# they need administrator rights on a shared machine.
DEVICE_TUNABLES = {
    "nvml_gr_clock": "the card's graphics clock",
    "nvml_mem_clock": "the card's memory clock",
    "nvml_pwr_limit": "the card's power limit",
}


class NVMLObserver:
    """Kernel Tuner's NVMLObserver(observables, device=0, ...) for tune_kernel's observers:
    power ("nvml_power"), energy per run ("nvml_energy"), SM and memory clocks ("core_freq",
    "mem_freq"), temperature and "power_readings", each a key of every result dict. With
    "core_freq", a result also says whether its timed runs ran below the top SM clock
    ("throttled"; such a measurement is timed again, twice at most). `continous_duration`
    (Kernel Tuner's spelling; `continuous_duration` too) is the energy window in seconds. Clock
    locking is refused: autotune never changes the card."""

    def __init__(
        self,
        observables: Sequence[str],
        device: int = 0,
        save_all: bool = False,
        nvidia_smi_fallback: str | None = None,  # only used by Kernel Tuner to set clocks
        use_locked_clocks: bool = False,
        continous_duration: float = 1,
        continuous_duration: float | None = None,
    ) -> None:
        if isinstance(observables, str) or not all(isinstance(o, str) for o in observables):
            raise ObserveError("NVMLObserver: observables must be a list of names")
        for name in observables:
            if name in NOT_OBSERVED:
                raise ObserveError(f"NVMLObserver: {name} is not supported ({NOT_OBSERVED[name]})")
            if name not in OBSERVABLES:
                raise ObserveError(
                    f"NVMLObserver: observable {name!r} is not one of {', '.join(OBSERVABLES)}"
                )
        if use_locked_clocks:
            raise ObserveError(
                "NVMLObserver: use_locked_clocks is not supported (autotune never changes the "
                "card's clocks)"
            )
        if save_all:
            raise ObserveError(
                "NVMLObserver: save_all is not supported (readings are per configuration)"
            )
        window = continuous_duration if continuous_duration is not None else continous_duration
        if isinstance(window, bool) or not isinstance(window, int | float) or not window > 0:
            raise ObserveError("NVMLObserver: continous_duration must be seconds > 0")
        self.observables = tuple(dict.fromkeys(observables))
        self.device = device
        self.window_s = float(window)

    def __repr__(self) -> str:
        return f"NVMLObserver({list(self.observables)!r}, device={self.device})"


def observing(observers: Any, device: int) -> tuple[Observe | None, tuple[str, ...]]:
    """tune_kernel's observers as what the worker observes, and the observable names asked."""
    if observers is None:
        return None, ()
    if not isinstance(observers, list | tuple):
        raise ObserveError("tune_kernel: observers must be a list of observers")
    names: list[str] = []
    window = None
    for observer in observers:
        if is_output_observer(observer):
            continue  # output_observers' (called in this process on the outputs)
        if not isinstance(observer, NVMLObserver):
            raise ObserveError(
                f"tune_kernel: observer {type(observer).__name__} is not supported; autotune "
                "observes through its NVMLObserver (from autotune import NVMLObserver) and "
                "output observers (Kernel Tuner's AccuracyObserver)"
            )
        if observer.device != device:
            raise ObserveError(
                f"tune_kernel: an NVMLObserver of device {observer.device} cannot observe "
                f"device {device}"
            )
        names += observer.observables
        window = observer.window_s if window is None else max(window, observer.window_s)
    if not names:
        return None, ()
    require_nvml("tune_kernel")
    asked = set(names)
    observe = Observe(
        power="nvml_power" in asked,
        energy="nvml_energy" in asked,
        clocks=bool(asked & {"core_freq", "mem_freq"}),
        temperature="temperature" in asked,
        power_readings="power_readings" in asked,
        window_s=window or 1.0,
    )
    return observe, tuple(dict.fromkeys(names))


def observed_keys(m: Any, observables: tuple[str, ...]) -> dict[str, Any]:
    """A measurement's (or stored evaluation's) readings as Kernel Tuner's result keys; a
    reading the device did not give is left out."""
    values = dict(getattr(m, "observations", ()) or ())
    out: dict[str, Any] = {}
    for name in observables:
        if name in READINGS and READINGS[name] in values:
            out[name] = values[READINGS[name]]
        elif name == "power_readings" and getattr(m, "power_readings", ()):
            out[name] = [[t, w * 1e3] for t, w in m.power_readings]
    if "core_freq" in observables and THROTTLED in values:
        out["throttled"] = bool(values[THROTTLED])
    for name, value in values.items():
        if name.startswith(OUTPUT):
            out[name.removeprefix(OUTPUT)] = value
    return out


# -- output observers ------------------------------------------------------------------------

OUTPUT = "output:"  # the stored readings of output observers, by their result keys


def is_output_observer(observer: Any) -> bool:
    """Kernel Tuner's OutputObserver interface (its AccuracyObserver is one)."""
    return callable(getattr(observer, "process_output", None)) and callable(
        getattr(observer, "get_results", None)
    )


def output_observers(observers: Any) -> tuple[Any, ...]:
    if not isinstance(observers, list | tuple):
        return ()
    return tuple(o for o in observers if is_output_observer(o))


def output_keys(observers: Sequence[Any]) -> list[str]:
    """The result keys the observers declare (AccuracyObserver's `key`), for printing."""
    return [k for o in observers if isinstance(k := getattr(o, "key", None), str)]


def output_check(
    observers: Sequence[Any],
    verify: Callable[[list], Measurement | None] | None,
    answer: Sequence[Any] | None,
) -> Callable[[list, Measurement], Measurement] | None:
    """What is done in this process with a checked run's outputs, as Kernel Tuner does: each
    output observer's process_output(answer, outputs), its results added to the measurement;
    then the verify function where given. Without one, a configuration with output observers
    is correct (Kernel Tuner leaves the answer to the observers); None where there is neither."""
    if not observers:
        return None if verify is None else (lambda outputs, m: verify(outputs) or m)
    expected = None if answer is None else [None if a is None else np.asarray(a) for a in answer]

    def check(outputs: list, m: Measurement) -> Measurement:
        readings: dict[str, float] = {}
        for observer in observers:
            try:
                observer.process_output(expected, outputs)
                results = dict(observer.get_results())
            except Exception as err:  # the caller's code: its failure is this configuration's
                why = f"{type(observer).__name__} raised {type(err).__name__}: {err}"
                return Measurement(Status.WRONG_RESULT, error=why)
            readings.update(_numbers(results))
        wrong = verify(outputs) if verify is not None else None
        if wrong is not None:
            return wrong
        added = tuple((OUTPUT + k, v) for k, v in readings.items())
        return dataclasses.replace(m, observations=(*m.observations, *added))

    return check


def _numbers(results: dict) -> dict[str, float]:
    """The results that can be stored: numbers, not NaN (a reading is a non-null float)."""
    out = {}
    for key, value in results.items():
        value = value.item() if isinstance(value, np.generic) else value
        if isinstance(value, int | float) and not isinstance(value, bool):
            if not math.isnan(value):
                out[str(key)] = float(value)
    return out


__all__ = [
    "DEVICE_TUNABLES",
    "OUTPUT",
    "READINGS",
    "NVMLObserver",
    "is_output_observer",
    "observed_keys",
    "observing",
    "output_check",
    "output_keys",
    "output_observers",
]
