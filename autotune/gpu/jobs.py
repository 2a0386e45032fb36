"""What the parent sends the GPU worker and hears back, without CuPy: a job (a configuration to
check and time) and its check, and the errors that say there is no GPU or that its context is
lost. The worker's session (gpu/session.py) runs them; the tuner and the evaluator in the
user's process only build and pass them, so that process never imports CuPy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from autotune.families.plan import Buffers, KernelPlan
from autotune.gpu.timing import TimingPolicy
from autotune.model.records import Measurement, Status

if TYPE_CHECKING:
    from autotune.gpu.session import GpuSession


class NoGpu(RuntimeError):
    """No usable CUDA device (no driver, no device, or CuPy missing)."""


# CUDA errors after which the context is unusable: the worker must be replaced. Matched without
# underscores or case, since the driver says CUDA_ERROR_ILLEGAL_ADDRESS and the runtime
# cudaErrorIllegalAddress.
STICKY_ERRORS = (
    "ILLEGALADDRESS",
    "LAUNCHFAIL",
    "MISALIGNED",
    "ILLEGALINSTRUCTION",
    "HARDWARESTACKERROR",
    "ASSERT",
    "INVALIDPC",
    "LAUNCHTIMEOUT",
    "ECCUNCORRECTABLE",
)


class StickyCudaError(RuntimeError):
    """A fault that poisons the CUDA context (recorded as CRASH)."""


@dataclass(frozen=True, slots=True)
class Check:
    """How a run is checked and timed, the same for a candidate and a library baseline: fresh
    inputs drawn from the seed, the float64 reference (plan, cubin, cache key) and the tolerance
    its outputs must meet, then the timing policy."""

    buffers: Buffers
    reference_plan: KernelPlan
    reference_cubin: bytes
    reference_key: str
    tolerance: float
    timing: TimingPolicy
    seed: int
    outputs_back = False  # the float64 reference checks here, in the worker

    def arrays(self, session: GpuSession, plan: KernelPlan) -> dict[str, object]:
        """The run's device arrays: fresh random inputs; outputs (in the storage type) and scratch
        (FP32) poisoned with NaN, so that whatever the plan leaves unwritten shows."""
        arrays = session.fresh_inputs(self.buffers, self.seed)
        for name, shape in self.buffers.outputs:
            arrays[name] = session.poisoned(shape, self.buffers.dtype)
        for name, shape in plan.scratch:
            arrays[name] = session.poisoned(shape, "fp32")
        return arrays

    def verdict(
        self, session: GpuSession, arrays: dict[str, object]
    ) -> tuple[Measurement | None, float | None]:
        """(WRONG_RESULT or None, the relative L2 error) of the checked run's outputs."""
        rel_error = session.check_outputs(self, arrays)
        return self.wrong(rel_error), float(rel_error)

    def wrong(self, rel_error: float) -> Measurement | None:
        """WRONG_RESULT when the outputs miss the tolerance (or are not finite), else None."""
        if np.isfinite(rel_error) and rel_error <= self.tolerance:
            return None
        return Measurement(
            Status.WRONG_RESULT,
            rel_error=float(rel_error),
            error=f"relative L2 error {rel_error:.3e} > tolerance {self.tolerance:.0e}",
        )


def counters_left(names: tuple[str, ...], rel_error: float | None, after: str) -> Measurement:
    """WRONG_RESULT of a plan whose runs left counters non-zero (KernelPlan.counters), named
    `names`, as found after the `after` run(s): whatever its outputs, the next run, which
    starts from what it left, would count wrong."""
    return Measurement(
        Status.WRONG_RESULT,
        rel_error=rel_error,
        error=f"left its counters non-zero after the {after} ({', '.join(names)}): a run must "
        "reset what it counts",
    )


@dataclass(frozen=True, slots=True)
class Job:
    """Everything the worker needs to check and time one configuration."""

    label: str
    plan: KernelPlan
    cubin: bytes
    check: Check
    best_ms: float | None = None  # the study's best median so far, for the early stop

    def run(self, session: GpuSession) -> Measurement:
        return session.evaluate(self)
