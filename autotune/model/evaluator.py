"""The evaluator interface: what the tuner evaluates with (the GPU worker, a replay of a
recording, a test double), and the tasks a GPU worker runs."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from autotune.model.records import TIMING_PROTOCOL, DeviceInfo, Measurement
from autotune.model.space import DeviceLimits

if TYPE_CHECKING:
    from autotune.gpu.session import Job


class Task(Protocol):
    """Work for the GPU worker: a picklable value whose run() uses the worker's GpuSession.
    A Job (one configuration) is one; baselines and ceilings are others."""

    def run(self, session: Any) -> Any: ...


class Evaluator(Protocol):
    """What the tuner evaluates with: the GPU worker, a replay of a recording, or a test double.
    Subclass it for the defaults of an evaluator that measures (no recording, every subspace)."""

    device: DeviceInfo
    limits: DeviceLimits
    # The timing protocol of the times it returns (DESIGN section 2): the tuner resumes, seeds
    # and stops early only from stored measurements of the same protocol.
    protocol: int = TIMING_PROTOCOL
    # The value lists per family and parameter it can answer for (a recording's subspaces);
    # empty when it measures whatever it is given.
    pins: Mapping[str, Mapping[str, tuple]] = MappingProxyType({})

    @property
    def replays(self) -> bool:
        """True when answers come from a recording: nothing is compiled or launched, and one
        config at a time keeps a replayed search decided by its seed alone."""
        return False

    def recorded(self, study: Any, config: Any) -> Measurement:
        """The recorded outcome of a config (only asked when replays is True)."""
        raise NotImplementedError(f"{type(self).__name__} measures; it holds no recording")

    def evaluate(self, job: Job, timeout_s: float) -> Measurement: ...

    def call(self, task: Task, timeout_s: float) -> Any: ...

    def close(self) -> None: ...


__all__ = ["Evaluator", "Task"]
