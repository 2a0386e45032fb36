"""Values that cross rooms: evaluation status, measurements and the device description."""

from __future__ import annotations

import enum
import statistics
from dataclasses import asdict, dataclass, field

# The timing protocol of DESIGN section 2 that this version measures with. 1: one run between two
# events on an idle GPU with a warm L2 (everything stored before 2026-11-24); 2: an L2 flush queued
# before each sample and the host's submission hidden behind it. Measurements of different
# protocols are never compared: every stored time carries its number.
TIMING_PROTOCOL = 2


class Status(enum.Enum):
    OK = "OK"
    COMPILE_ERROR = "COMPILE_ERROR"
    RESOURCES = "RESOURCES"
    LAUNCH_ERROR = "LAUNCH_ERROR"
    WRONG_RESULT = "WRONG_RESULT"
    TIMEOUT = "TIMEOUT"
    CRASH = "CRASH"
    # Correct, but timing stopped early: its first samples were already several times slower
    # than the study's best (autotune/early_stop.py). Its samples and median are kept; never best.
    SLOW = "SLOW"

    @property
    def ok(self) -> bool:
        return self is Status.OK

    @property
    def timed(self) -> bool:
        """Checked correct and timed (fully, or until stopped early as slower)."""
        return self is Status.OK or self is Status.SLOW


@dataclass(frozen=True, slots=True)
class Resources:
    """What ptxas reported for one kernel entry."""

    registers: int = 0
    smem_bytes: int = 0  # static shared memory
    spill_stores: int = 0
    spill_loads: int = 0
    stack_bytes: int = 0
    cmem_bytes: int = 0


@dataclass(frozen=True, slots=True)
class Measurement:
    """The outcome of evaluating one configuration on one problem."""

    status: Status
    time_ms: float | None = None  # median of samples
    samples_ms: tuple[float, ...] = ()
    error: str = ""
    rel_error: float | None = None
    compile_s: float | None = None
    registers: int | None = None
    smem_bytes: int | None = None
    spills: int | None = None
    scratch_bytes: int | None = None  # extra device memory the plan allocates (im2col's matrix)
    protocol: int = TIMING_PROTOCOL  # how time_ms was measured (a replay keeps its recording's)
    # The device observed around the timed runs (model/observe.py's names: power_w, energy_j,
    # clocks, temperature, throttled), stored beside the evaluation; empty when not observed.
    observations: tuple[tuple[str, float], ...] = ()
    # NVML's power readings of the energy window, (seconds from its start, watts): returned to
    # the caller who asked for them (Kernel Tuner's power_readings), not stored.
    power_readings: tuple[tuple[float, float], ...] = ()

    @classmethod
    def from_samples(cls, samples_ms: list[float], **extra: object) -> Measurement:
        return cls(
            Status.OK,
            time_ms=statistics.median(samples_ms),
            samples_ms=tuple(samples_ms),
            **extra,  # type: ignore[arg-type]
        )

    @property
    def spread(self) -> float | None:
        """Interquartile range over the median of the samples (None with fewer than two)."""
        return spread(self.samples_ms)

    @property
    def observed(self) -> dict[str, float]:
        return dict(self.observations)

    def gflops(self, flops: int) -> float | None:
        if self.status is not Status.OK or not self.time_ms:
            return None
        return flops / (self.time_ms * 1e-3) / 1e9


def spread(samples_ms: tuple[float, ...] | list[float]) -> float | None:
    """Interquartile range of the samples over their median: the noise of a measurement, in a
    unit that compares across kernels of any duration. None with fewer than two samples."""
    if len(samples_ms) < 2:
        return None
    q1, _, q3 = statistics.quantiles(samples_ms, n=4, method="inclusive")
    median = statistics.median(samples_ms)
    return (q3 - q1) / median if median > 0 else None


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    name: str
    compute_capability: str  # "9.0"
    sm_count: int
    driver_version: str = ""
    runtime_version: str = ""
    nvrtc_version: str = ""
    clock_mhz: int = 0
    memory_bytes: int = 0
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def arch(self) -> str:
        return "sm_" + self.compute_capability.replace(".", "")

    def as_dict(self) -> dict[str, object]:
        return asdict(self)
