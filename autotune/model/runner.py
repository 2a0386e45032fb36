"""The runner interface: (study, configuration) -> measurement, whatever measures it.

The tuner asks a runner to prepare a configuration (the CPU half: plan, compile, resource check;
run on the tuner's compile threads, several at once) and then to measure it (the GPU half, one
at a time). The GPU runner checks and times in the GPU worker process; the replay runner answers
from a recording; tests put a synthetic worker behind the GPU runner.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from autotune.model.records import DeviceInfo, Measurement
from autotune.model.space import Config, DeviceLimits


@dataclass(frozen=True, slots=True)
class Prepared:
    """A configuration ready to measure (`ready` holds what measuring it needs: plan and cubin),
    or, with `ready` None, its outcome already (a compile error, too many resources, a
    recording's answer). `early` carries what preparing it found either way (compile time,
    registers, shared memory)."""

    early: Measurement
    ready: Any = None


class Runner(Protocol):
    """What the tuner measures with."""

    device: DeviceInfo
    limits: DeviceLimits
    # The timing protocol of the times it returns (DESIGN section 2): the tuner resumes, seeds
    # and stops early only from stored measurements of the same protocol.
    protocol: int
    # The value lists per family and parameter it can answer for (a recording's subspaces);
    # empty when it measures whatever it is given.
    pins: Mapping[str, Mapping[str, tuple]]
    # The compiler's version, recorded with the device (a recording's, for a replay).
    compiler_version: str
    # True: one configuration in flight, so every result is told in ask order and a replayed
    # search is decided by its seed alone.
    in_order: bool
    # Why compiled kernels could not be cached on disk (None when they were, or nothing compiles).
    cache_error: str | None
    # True where measuring a configuration again is a new measurement (the GPU), so that the
    # tuner confirms a study's best; a replay answers with its recording again.
    remeasures: bool

    def kernel_digest(self, family: Any) -> str:
        """The digest of the family's code as this runner builds it: stored with each of its
        evaluations, and what a resume takes as current."""
        ...

    def start(self, jobs: int) -> None:
        """Make ready to prepare up to `jobs` configurations at once (compile processes)."""

    def stop(self) -> None:
        """End what start() began; a preparation in flight may be abandoned."""

    def prepare(self, study: Any, config: Config) -> Prepared: ...

    def measure(
        self,
        study: Any,
        config: Config,
        prepared: Prepared,
        *,
        best_ms: float | None,
        timing: Any,
        seed: int,
    ) -> Measurement:
        """The configuration's measurement; never raises for a failing configuration. `best_ms`
        is the study's best so far (for the early stop), `timing` the timing policy, `seed` the
        input data's seed."""
        ...

    def close(self) -> None: ...


__all__ = ["Prepared", "Runner"]
