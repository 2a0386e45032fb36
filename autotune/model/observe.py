"""What the GPU worker observes of the device per evaluation (NVML power, energy, clocks,
temperature), and the names its readings are stored under."""

from __future__ import annotations

from dataclasses import dataclass

# The readings, as stored (observations table) and carried by a Measurement. Power is the median
# of NVML's power readings during the energy window; energy is per run of the configuration.
POWER_W = "power_w"
ENERGY_J = "energy_j"
SM_CLOCK_MHZ = "sm_clock_mhz"  # mean of the samples
SM_CLOCK_MIN_MHZ = "sm_clock_min_mhz"
SM_CLOCK_MAX_MHZ = "sm_clock_max_mhz"
MEM_CLOCK_MHZ = "mem_clock_mhz"
TEMPERATURE_C = "temperature_c"
# 1.0 when the SM clock dropped during the timed runs, or never came within THROTTLE_DROP of the
# device's highest clock in them (started held down and stayed so), else 0.0.
THROTTLED = "throttled"
RESTED_S = "rested_s"  # how long the timer waited for the clock to come back before sampling
TRIES = "tries"  # how many times it was timed: a throttled measurement is timed again

# An SM clock this much below its highest sample so far, later in the same measurement, is a
# drop (power or thermal capping), not the clock rising from idle at the start.
THROTTLE_DROP = 0.03

QUANTITIES = ("power", "energy", "clocks", "temperature")


class ObserveError(ValueError):
    """An observation that cannot be asked for (one line naming it)."""


@dataclass(frozen=True, slots=True)
class Observe:
    """What to record per evaluation, around its timed runs.

    Power and energy come from an energy window after the timed samples: the configuration runs
    back to back, without the L2 flush that every timed sample begins with (its memset would
    count as the kernel's energy), for at least `window_s`; energy per run is NVML's total
    energy counter's difference over the runs. Clocks and temperature are sampled every
    `interval_s` by a thread in the worker from the first timed sample to the window's end."""

    power: bool = False
    energy: bool = False
    clocks: bool = False
    temperature: bool = False
    power_readings: bool = False  # keep the series of (seconds, watts) of the window
    window_s: float = 1.0  # Kernel Tuner's continuous_duration default
    interval_s: float = 0.01

    def __post_init__(self) -> None:
        if not self.window_s > 0 or not self.interval_s > 0:
            raise ObserveError("observing needs a window and a sampling interval above 0 s")

    @property
    def any(self) -> bool:
        return self.power or self.energy or self.clocks or self.temperature or self.power_readings

    @property
    def window(self) -> bool:
        """True when the energy window runs (power or energy asked)."""
        return self.power or self.energy or self.power_readings

    @classmethod
    def parse(cls, text: str) -> Observe:
        """`power,energy,clocks,temperature` (any of them, comma-separated) as an Observe."""
        names = [n.strip().lower() for n in text.split(",") if n.strip()]
        unknown = [n for n in names if n not in QUANTITIES]
        if unknown or not names:
            raise ObserveError(
                f"cannot observe {', '.join(unknown) or 'nothing'}; choose from "
                f"{', '.join(QUANTITIES)}"
            )
        return cls(**{n: True for n in names})


def require_nvml(who: str) -> None:
    """Fail before any GPU work where the worker could not observe: it imports NVML's Python
    binding from the same environment (this only imports it; NVML starts in the worker)."""
    try:
        import pynvml  # noqa: F401
    except ImportError:
        raise ObserveError(
            f"{who}: observing needs NVML's Python binding: pip install nvidia-ml-py"
        ) from None


def throttled(sm_clocks_mhz: list[float] | tuple[float, ...]) -> bool:
    """True when a sample falls more than THROTTLE_DROP below the highest one before it."""
    highest = 0.0
    for clock in sm_clocks_mhz:
        if clock < highest * (1 - THROTTLE_DROP):
            return True
        highest = max(highest, clock)
    return False


__all__ = [
    "ENERGY_J",
    "MEM_CLOCK_MHZ",
    "POWER_W",
    "QUANTITIES",
    "RESTED_S",
    "SM_CLOCK_MAX_MHZ",
    "SM_CLOCK_MHZ",
    "SM_CLOCK_MIN_MHZ",
    "TEMPERATURE_C",
    "THROTTLED",
    "TRIES",
    "Observe",
    "ObserveError",
    "require_nvml",
    "throttled",
]
