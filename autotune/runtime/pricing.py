"""What a plan costs per call besides its timed run (no GPU needed): the work it does outside
the timed region (layout conversions, constant copies), the layout copies of a call whose
tensors are in the other layout, and the pass over the output of an epilogue the plan does
not fuse, all priced at the device's measured copy bandwidth."""

from __future__ import annotations

import math

from autotune.families import Family
from autotune.families.plan import COUNTER_BYTES, SCRATCH_BYTES, KernelPlan
from autotune.model.epilogue import epilogue_of
from autotune.model.problem import ConvProblem
from autotune.runtime.calls import (
    LAYOUT_COPIES,
    epilogue_pass_bytes,
    layout_copy_bytes,
    padding_copy_bytes,
)

# What one extra operation on the stream costs at least, besides its bytes (a launch or a copy
# queued behind the previous one).
OPERATION_MS = 0.002


def untimed_bytes(family: Family, problem: ConvProblem, plan: KernelPlan) -> int:
    """Bytes the plan moves outside its timed launches on every call: each buffer a setup or
    finish launch touches read or written once, each constant copied (read and written)."""
    element = problem.precision.bytes
    buffers = family.buffers(problem)
    sizes = {name: element * _elements(shape) for name, shape in buffers.inputs}
    sizes.update({name: element * _elements(shape) for name, shape in buffers.outputs})
    sizes.update({name: SCRATCH_BYTES * _elements(shape) for name, shape in plan.scratch})
    sizes.update({name: COUNTER_BYTES * count for name, count in plan.counters})
    total = 0
    for launch in (*plan.setup, *plan.finish):
        total += sum(sizes.get(a, 0) for a in dict.fromkeys(launch.args) if isinstance(a, str))
    total += sum(2 * sizes.get(buffer, 0) for _, buffer in plan.constants)
    return total


def untimed_ms(
    family: Family, problem: ConvProblem, plan: KernelPlan, copy_gbps: float | None
) -> float:
    operations = len(plan.setup) + len(plan.finish) + len(plan.constants)
    if not operations:
        return 0.0
    if not copy_gbps:
        return math.inf if plan.setup or plan.finish else operations * OPERATION_MS
    seconds = untimed_bytes(family, problem, plan) / (copy_gbps * 1e9)
    return seconds * 1e3 + operations * OPERATION_MS


def layout_ms(problem: ConvProblem, copy_gbps: float | None) -> float:
    """What a call in the other layout than `problem`'s pays for its copies (infinite without a
    copy bandwidth: such a plan then ranks after every plan in the call's own layout)."""
    if not copy_gbps:
        return math.inf
    seconds = layout_copy_bytes(problem) / (copy_gbps * 1e9)
    return seconds * 1e3 + LAYOUT_COPIES * OPERATION_MS


def epilogue_ms(problem: ConvProblem, copy_gbps: float | None, residual: bool = False) -> float:
    """What a call pays to apply its epilogue after a plan that does not fuse it: one pass
    over the output (and its residual) and its launch (infinite without a copy bandwidth: such
    a plan then ranks after every plan that fuses it)."""
    if not copy_gbps:
        return math.inf
    return epilogue_pass_bytes(problem, residual) / (copy_gbps * 1e9) * 1e3 + OPERATION_MS


def padding_ms(problem: ConvProblem, height: int, width: int, copy_gbps: float | None) -> float:
    """What the runtime's padding of a call's height x width input into the plan's pre-padded
    one costs at the copy bandwidth (a padded problem's plan, which reads the input in place,
    pays none; infinite without a copy bandwidth)."""
    if not copy_gbps:
        return math.inf
    return padding_copy_bytes(problem, height, width) / (copy_gbps * 1e9) * 1e3 + OPERATION_MS


def call_costs(problem: ConvProblem, family: Family | None, request, copy_gbps) -> dict:
    """What a call of `request` (calls.Request) pays besides the run of a plan of `family` for
    `problem`, as Choice's fields: layout copies where its tensors are in the other layout
    (`layout_ms`), a pass over the output where the family does not fuse the call's epilogue
    (`epilogue_ms`), the padding copy where the call's input (padded, or with a tail) could be
    read in place but the plan reads a pre-padded one (`padding_ms`); empty when nothing."""
    costs = {}
    if problem.layout != request.layout:
        costs["layout_ms"] = layout_ms(problem, copy_gbps)
    own_input = request.padding or request.tail
    if own_input and problem.pre_padded:  # the runtime copies the input into a pre-padded one
        side = problem.input_size - 2 * request.padding + request.tail
        costs["padding_ms"] = padding_ms(problem, side, side, copy_gbps)
    if request.epilogue and (family is None or request.epilogue not in family.epilogues):
        residual = epilogue_of(request.epilogue).residual
        costs["epilogue_ms"] = epilogue_ms(problem, copy_gbps, residual)
    return costs


def _elements(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


__all__ = [
    "OPERATION_MS",
    "call_costs",
    "epilogue_ms",
    "layout_ms",
    "padding_ms",
    "untimed_bytes",
    "untimed_ms",
]
