"""The evaluator interface: the GPU worker (or a test double) behind the GPU runner, and the
tasks a GPU worker runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from autotune.model.records import TIMING_PROTOCOL, DeviceInfo, Measurement
from autotune.model.space import DeviceLimits

if TYPE_CHECKING:
    from autotune.gpu.session import Job


@dataclass(frozen=True, slots=True)
class WithOutputs:
    """A worker's answer to a job whose outputs are checked by the caller (a verify function
    of theirs, called in their process): the measurement and the checked run's outputs."""

    measurement: Measurement
    outputs: list


class Task(Protocol):
    """Work for the GPU worker: a picklable value whose run() uses the worker's GpuSession.
    A Job (one configuration) is one; baselines and ceilings are others."""

    def run(self, session: Any) -> Any: ...


class Evaluator(Protocol):
    """The GPU worker's interface (gpu/evaluator.py), or a test double's: a Job in, a
    Measurement (or WithOutputs) out; any other Task's own result from call()."""

    device: DeviceInfo
    limits: DeviceLimits
    # The timing protocol of the times it returns (DESIGN section 2).
    protocol: int = TIMING_PROTOCOL

    def evaluate(self, job: Job, timeout_s: float) -> Measurement | WithOutputs: ...

    def call(self, task: Task, timeout_s: float) -> Any: ...

    def close(self) -> None: ...


__all__ = ["Evaluator", "Task", "WithOutputs"]
