"""A call's shape and its prepared plan: compiled, loaded, launches ready to bind per call.

The plan reads the problem over a pre-padded square input. A call whose input is that input
(padding 0, side (N - 1) * stride + K) passes it in place; any other gets one padding launch
into the workspace first. Scratch buffers live in the same per-stream workspace, at offsets
fixed here; a family's own extra input (smem_channels' bias) is a zero buffer of the plan's.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import cupy as cp
import numpy as np

from autotune import package_path
from autotune.families import Family
from autotune.families.plan import Launch, cdiv
from autotune.gpu.compiler import Compiler
from autotune.gpu.launch import LAUNCHERS, load_module, opt_in_shared_memory
from autotune.model.problem import ConvProblem
from autotune.model.space import DeviceLimits
from autotune.runtime.lookup import ZERO_INPUTS, Choice
from autotune.tuning.studies import resource_problem

PAD_SOURCE = package_path("autotune.runtime", "pad.cu")
PAD_BLOCK = 256
ALIGN_BYTES = 256
FLOAT_BYTES = 4
# The CuPy launch path is the one the H100 runs verified; "driver" saves host time a launch.
DEFAULT_LAUNCHER = "cupy"
_PADS: dict[tuple[str, int], object] = {}  # the padding kernel, loaded once per device


class NoFit(RuntimeError):
    """A compiled plan that cannot launch on this device (resources)."""


class CallError(ValueError):
    """Arguments autotune.conv2d cannot take (the message says which and why)."""


@dataclass(frozen=True, slots=True)
class Call:
    """One call's shape, as the cache of prepared plans is keyed."""

    device: int
    B: int
    C: int
    H: int
    W: int
    F: int
    Cw: int
    KH: int
    KW: int
    stride: int
    padding: int

    @classmethod
    def of(cls, key: tuple) -> Call:
        return cls(*(_single(v) for v in key))

    def problem(self) -> ConvProblem:
        """The problem over the pre-padded input: square images and filters only."""
        if self.C != self.Cw:
            raise CallError(f"x has {self.C} channels, w {self.Cw}")
        if self.KH != self.KW:
            raise CallError(f"filters must be square, got {self.KH} x {self.KW}")
        if min(self.B, self.C, self.H, self.W, self.F, self.KH) < 1:
            raise CallError("every extent of x and w must be at least 1")
        if self.H != self.W:
            raise CallError(
                f"images must be square (the store's shapes are), got {self.H} x {self.W}"
            )
        side = self.H + 2 * self.padding
        if side < self.KH:
            raise CallError(
                f"a {self.KH} x {self.KH} filter is larger than the padded image ({side})"
            )
        n = (side - self.KH) // self.stride + 1
        return ConvProblem(N=n, K=self.KH, C=self.C, F=self.F, B=self.B, stride=self.stride)


@dataclass(slots=True)
class Entry:
    """A shape's prepared plan: its operations in order (the padding launch, setup, constant
    copies, the timed launches, finish), each called with the call's buffer pointers and
    stream. One call at a time writes an operation's argument slots (the lock)."""

    choice: Choice
    device: int
    out_shape: tuple[int, int, int, int]
    ops: tuple
    pad: object | None  # the padding launch; None: the caller's input is read in place
    scratch: tuple[tuple[str, int], ...]  # (buffer, offset in the workspace)
    workspace_bytes: int
    fixed: dict[str, int]  # pointers of the plan's own inputs (a zero bias)
    lock: threading.Lock = field(default_factory=threading.Lock)
    keep: list = field(default_factory=list)  # what must outlive the entry's pointers

    @property
    def exact(self) -> bool:
        return self.choice.exact


def build_entry(
    choice: Choice,
    call: Call,
    family: Family,
    compiler: Compiler,
    limits: DeviceLimits,
    directory: str,
    launcher: str = DEFAULT_LAUNCHER,
) -> Entry:
    """Compile (or read from the cache), load and prepare the chosen plan for a call's shape
    (its launches made by `launcher`, a key of LAUNCHERS); NoFit when it cannot launch on the
    device, CompileError when it does not compile."""
    launch_op, copy_op = LAUNCHERS[launcher]
    problem = choice.problem
    plan = family.plan(problem, choice.config)
    compiled = compiler.compile(plan)
    why = resource_problem(compiled, plan.all_launches, limits)
    if why:
        raise NoFit(why)
    module, functions = load_module(compiled.cubin, plan.entries, directory, keep=False)
    opt_in_shared_memory(functions, plan.all_launches)
    buffers = family.buffers(problem)
    sizes = {n: FLOAT_BYTES * _count(s) for n, s in (*buffers.inputs, *buffers.outputs)}
    sizes.update({n: FLOAT_BYTES * _count(s) for n, s in plan.scratch})
    keep: list = [module, functions]
    fixed = {}
    for name, shape in buffers.inputs:
        if name in ZERO_INPUTS:
            zeros = cp.zeros(shape, dtype=cp.float32)
            keep.append(zeros)
            fixed[name] = zeros.data.ptr
    pad = None
    offset = 0
    if call.padding or call.H != problem.input_size:
        pad = pad_launch(call, problem, compiler, limits, directory, launch_op)
        offset = _aligned(FLOAT_BYTES * _count(problem.input_shape))
    scratch = []
    for name, _ in plan.scratch:
        scratch.append((name, offset))
        offset = _aligned(offset + sizes[name])
    if pad is None and not scratch:
        offset = 0

    def launches(part):
        return [launch_op(functions[launch.kernel], launch) for launch in part]

    copies = [
        copy_op(module.get_global(symbol).ptr, buffer, sizes[buffer])
        for symbol, buffer in plan.constants
    ]
    ops = [
        *([pad] if pad is not None else []),
        *launches(plan.setup),
        *copies,
        *launches(plan.launches),
        *launches(plan.finish),
    ]
    return Entry(
        choice=choice,
        device=call.device,
        out_shape=problem.output_shape,
        ops=tuple(ops),
        pad=pad,
        scratch=tuple(scratch),
        workspace_bytes=offset,
        fixed=fixed,
        keep=keep,
    )


def pad_launch(
    call: Call,
    problem: ConvProblem,
    compiler: Compiler,
    limits: DeviceLimits,
    directory: str,
    launch_op=None,
):
    """The padding launch: the caller's (B, C, H, W) input (buffer "x_caller") into the
    (B, C, S, S) input the plan reads ("x", the workspace's first region), S = (N - 1) *
    stride + K, zeros around (and an unused tail dropped)."""
    fn = _PADS.get((compiler.arch, call.device))
    if fn is None:
        compiled = compiler.compile_source(PAD_SOURCE, ())
        _, functions = load_module(compiled.cubin, ("pad_nchw",), directory, keep=False)
        fn = _PADS[(compiler.arch, call.device)] = functions["pad_nchw"]
    side = problem.input_size
    total = call.B * call.C * side * side
    grid = (max(1, min(cdiv(total, PAD_BLOCK), 32 * limits.SM_COUNT)), 1, 1)
    args = ("x_caller", "x", call.B * call.C, call.H, call.W, side, call.padding)
    return (launch_op or LAUNCHERS[DEFAULT_LAUNCHER][0])(
        fn, Launch("pad_nchw", grid, (PAD_BLOCK, 1, 1), args)
    )


def _single(value):
    """An extent as an int: a NumPy integer, or a pair of equal ints (PyTorch's (s, s))."""
    if isinstance(value, tuple | list) and len(value) == 2 and value[0] == value[1]:
        value = value[0]
    return int(value) if isinstance(value, np.integer) else value


def _count(shape: tuple[int, ...]) -> int:
    count = 1
    for extent in shape:
        count *= extent
    return count


def _aligned(nbytes: int) -> int:
    return cdiv(nbytes, ALIGN_BYTES) * ALIGN_BYTES


__all__ = ["Call", "CallError", "Entry", "NoFit", "build_entry", "pad_launch"]
