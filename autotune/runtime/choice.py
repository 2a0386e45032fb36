"""A plan choice: a stored configuration of a family for a problem, with what a call of it is
expected to cost, and which families a runtime call can take at all (runtime/lookup.py chooses)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from autotune.families import Family, UnsupportedProblem
from autotune.model.problem import ConvProblem
from autotune.model.space import Config

# The buffers a runtime call has: the input, the filters and the output. A family may declare
# one more input, a per-filter bias (smem_channels), which the runtime passes as zeros.
CALL_BUFFERS = {"x", "w", "y"}
ZERO_INPUTS = {"bias"}


@dataclass(frozen=True, slots=True)
class Choice:
    """A configuration chosen for a problem, and what it was measured as."""

    family: str
    config: Config
    problem: ConvProblem  # the problem it serves
    measured_on: str  # the key of the problem it was measured on
    time_ms: float  # its stored median there (protocol `TIMING_PROTOCOL`)
    untimed_ms: float  # per-call work outside the timed region, estimated (0 without any)
    gflops: float = math.nan  # its stored GFlop/s there
    layout_ms: float = 0.0  # the call's layout copies, when its tensors are in the other layout
    epilogue_ms: float = 0.0  # the call's epilogue applied after a plan that does not fuse it
    padding_ms: float = 0.0  # the call's padding copy, for a pre-padded plan of a padded call

    @property
    def exact(self) -> bool:
        """Measured on this very shape (not borrowed from the nearest one), plainly or with
        the call's epilogue fused (ConvProblem.key names the epilogue last)."""
        return self.measured_on.split(",epilogue=")[0] == self.problem.key

    @property
    def expected_ms(self) -> float:
        return self.time_ms + self.untimed_ms + self.layout_ms + self.epilogue_ms + self.padding_ms

    def costs(self, time_ms: float | None = None) -> tuple[int, float]:
        """(how many of its costs are unknown, the sum of the known ones): its rank, with
        `time_ms` in place of its stored time where that is scaled to another shape."""
        parts = (
            self.time_ms if time_ms is None else time_ms,
            self.untimed_ms,
            self.layout_ms,
            self.epilogue_ms,
            self.padding_ms,
        )
        unknown = sum(math.isinf(p) for p in parts)
        return unknown, sum(p for p in parts if not math.isinf(p))


def callable_family(family: Family, problem: ConvProblem) -> str | None:
    """Why the runtime cannot call this family for `problem`, or None when it can."""
    if family.problem_type is not ConvProblem:
        return f"{family.name} computes {family.problem_type.__name__}, not a 2D convolution"
    try:
        family.check(problem)
    except UnsupportedProblem as err:
        return str(err)
    buffers = family.buffers(problem)
    names = {name for name, _ in (*buffers.inputs, *buffers.outputs)}
    extra = names - CALL_BUFFERS
    if not CALL_BUFFERS <= names or not extra <= ZERO_INPUTS:
        return f"{family.name} takes buffers {sorted(names)}, not x, w -> y"
    return None


def rank(choice: Choice) -> tuple[int, float, str]:
    """Its place among choices: by how many costs are unknown (fewest first), then the
    expected time, then the name."""
    return (*choice.costs(), choice.family)


__all__ = ["CALL_BUFFERS", "ZERO_INPUTS", "Choice", "callable_family", "rank"]
