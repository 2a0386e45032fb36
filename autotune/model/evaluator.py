"""The evaluator interface: the GPU worker (or a test double) behind the GPU runner, and the
tasks a GPU worker runs."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from autotune.model.records import TIMING_PROTOCOL, DeviceInfo, Measurement
from autotune.model.space import DeviceLimits

if TYPE_CHECKING:
    from autotune.gpu.jobs import Job


@dataclass(frozen=True, slots=True)
class WithOutputs:
    """A worker's answer to a job whose outputs are checked by the caller (a verify function
    of theirs, called in their process): the measurement and the checked run's outputs, a large
    array among them as a SpilledArray (`received` gives them all as arrays)."""

    measurement: Measurement
    outputs: list

    def received(self) -> list:
        """The outputs, each spilled array read back (and its file removed)."""
        return [o.load() if isinstance(o, SpilledArray) else o for o in self.outputs]


# An output at least this large travels from the worker to the caller as a file rather than
# through the worker's pipe: Kernel Tuner's accuracy example sends 800 MB for every
# configuration, which a pipe carries at about a fifth of a file's speed (4.6 s against 0.4 s
# to write and 1.0 s to read on the 2-core machine).
SPILL_BYTES = 64 << 20


@dataclass(frozen=True, slots=True)
class SpilledArray:
    """An output array the worker left in a .npy file for the caller to take once."""

    path: str

    def load(self):
        """The array, mapped from the file rather than read (its pages are still in memory,
        written moments ago), copy-on-write so that the caller may change it; the file is
        removed at once (the mapping outlives its name)."""
        import numpy as np

        try:
            return np.load(self.path, mmap_mode="c", allow_pickle=False)
        finally:
            os.unlink(self.path)


def spill(outputs: list, directory: Path | None) -> list:
    """The outputs with each array of at least SPILL_BYTES written into a file in `directory`
    and given as a SpilledArray (for the caller to load), the rest as they are. An array is a
    NumPy array or one with CuPy's get(out=): a device array is copied straight into the file's
    mapped pages, the one copy Kernel Tuner's in-process run makes into host memory too. Small
    device arrays come back as NumPy arrays; with no directory (the caller's own process),
    every device array does."""
    import numpy as np

    spilled = []
    for value in outputs:
        on_device = not isinstance(value, np.ndarray) and hasattr(value, "get")
        large = (isinstance(value, np.ndarray) or on_device) and value.nbytes >= SPILL_BYTES
        if large and directory is not None:
            directory.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(dir=directory, suffix=".npy")
            os.close(fd)
            target = np.lib.format.open_memmap(name, "w+", value.dtype, value.shape)
            if on_device:
                value.get(out=target)
            else:
                target[...] = value
            del target  # unmapped, not flushed: the caller maps the same pages
            value = SpilledArray(name)
        elif on_device:
            value = value.get()
        spilled.append(value)
    return spilled


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
    # Whether its tasks run in the caller's process (the caller may then hand data over in
    # memory rather than through files).
    in_process: bool = False

    def evaluate(self, job: Job, timeout_s: float) -> Measurement | WithOutputs: ...

    def call(self, task: Task, timeout_s: float) -> Any: ...

    def close(self) -> None: ...


__all__ = ["SPILL_BYTES", "Evaluator", "SpilledArray", "Task", "WithOutputs", "spill"]
