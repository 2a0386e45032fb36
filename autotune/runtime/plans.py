"""A call's prepared plan: compiled, loaded, launches ready to bind per call.

The plan reads the problem over a pre-padded square input in the problem's layout and storage
type. A call whose input is that input (padding 0, side (N - 1) * stride + K) passes it in
place; any other gets one padding launch (of that layout and element size) into the workspace
first. Scratch buffers live in the same per-stream workspace, at offsets fixed here; counters
in a per-stream region of their own, zeroed once (each plan's run leaves them zero), at offsets
from 0 fixed here; a family's own extra input (smem_channels' bias) is a zero buffer of the
plan's.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace

import cupy as cp

from autotune import package_path
from autotune.families import Family
from autotune.families.plan import COUNTER_BYTES, SCRATCH_BYTES, KernelPlan, Launch, cdiv
from autotune.gpu.compiler import Compiler
from autotune.gpu.launch import LAUNCHERS, load_module, opt_in_shared_memory
from autotune.model.problem import ConvProblem
from autotune.model.space import DeviceLimits
from autotune.runtime.calls import DEFAULT_LAUNCHER, Call, CallError
from autotune.runtime.choice import ZERO_INPUTS, Choice
from autotune.tuning.studies import resource_problem

PAD_SOURCE = package_path("autotune.runtime", "pad.cu")
PAD_BLOCK = 256
ALIGN_BYTES = 256
# The padding kernel's entry per (layout, element bytes).
PAD_ENTRIES = {
    ("NCHW", 4): "pad_nchw",
    ("NCHW", 2): "pad_nchw_16",
    ("NHWC", 4): "pad_nhwc",
    ("NHWC", 2): "pad_nhwc_16",
}
# NHWC pixels of whole 16-byte chunks (channels x element bytes): copied a chunk a thread.
PAD_CHUNKS_ENTRY = "pad_nhwc_chunks"
CHUNK_BYTES = 16
_PADS: dict[tuple[str, int], dict] = {}  # the padding kernels, loaded once per device


class NoFit(RuntimeError):
    """A compiled plan that cannot launch on this device (resources)."""


@dataclass(slots=True)
class Entry:
    """A shape's prepared plan: its operations in order (the padding launch, setup, constant
    copies, the timed launches, finish), each called with the call's buffer pointers and
    stream. One call at a time writes an operation's argument slots (the lock)."""

    choice: Choice
    device: int
    epilogue: str  # what the plan applies to its output (the call's, fused), "" for none
    out_shape: tuple[int, int, int, int]  # as the plan writes it (NFHW, or NHWF for NHWC)
    ops: tuple
    pad: object | None  # the padding launch; None: the caller's input is read in place
    scratch: tuple[tuple[str, int], ...]  # (buffer, offset in the workspace)
    workspace_bytes: int
    fixed: dict[str, int]  # pointers of the plan's own inputs (a zero bias)
    counters: tuple[tuple[str, int], ...] = ()  # (buffer, offset in the counters region)
    counter_bytes: int = 0  # of the counters region, from its start
    lock: threading.Lock = field(default_factory=threading.Lock)
    keep: list = field(default_factory=list)  # what must outlive the entry's pointers

    @property
    def exact(self) -> bool:
        return self.choice.exact

    @property
    def nhwc(self) -> bool:
        """Whether the plan reads and writes NHWC (channels-last) tensors."""
        return self.choice.problem.nhwc

    @property
    def out_dims(self) -> tuple[int, int, int, int]:
        """The output's (B, F, N, N), whatever its layout."""
        p = self.choice.problem
        return (p.B, p.F, p.N, p.N)


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
    problem = served_problem(choice, family, call.epilogue)
    plan = family.plan(problem, choice.config)
    compiled = compiler.compile(plan)
    why = resource_problem(compiled, plan.all_launches, limits)
    if why:
        raise NoFit(why)
    module, functions = load_module(compiled.cubin, plan.entries, directory, keep=False)
    opt_in_shared_memory(functions, plan.all_launches)
    buffers = family.buffers(problem)
    element = problem.precision.bytes
    sizes = {n: element * _count(s) for n, s in (*buffers.inputs, *buffers.outputs)}
    sizes.update({n: SCRATCH_BYTES * _count(s) for n, s in plan.scratch})
    keep: list = [module, functions]
    fixed = {}
    for name, _ in buffers.inputs:
        if name in ZERO_INPUTS:
            zeros = cp.zeros(sizes[name], dtype=cp.uint8)  # zero bits: 0.0 in every dtype
            keep.append(zeros)
            fixed[name] = zeros.data.ptr
    pad = None
    offset = 0
    # A padded problem's plan reads the caller's input in place (its zeros read by the
    # kernel); a pre-padded one reads a padded copy.
    if call.padding != problem.padding or call.H != problem.input_size:
        pad = pad_launch(call, problem, compiler, limits, directory, launch_op)
        offset = _aligned(element * _count(problem.input_shape))
    scratch = []
    for name, _ in plan.scratch:
        scratch.append((name, offset))
        offset = _aligned(offset + sizes[name])
    if pad is None and not scratch:
        offset = 0

    def launches(part):
        return [launch_op(functions[launch.kernel], launch) for launch in part]

    counters, counter_bytes = counter_offsets(plan)
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
        epilogue=problem.epilogue,
        out_shape=problem.output_shape,
        ops=tuple(ops),
        pad=pad,
        scratch=tuple(scratch),
        workspace_bytes=offset,
        fixed=fixed,
        counters=counters,
        counter_bytes=counter_bytes,
        keep=keep,
    )


def counter_offsets(plan: KernelPlan) -> tuple[tuple[tuple[str, int], ...], int]:
    """Each counters buffer's offset in a counters region (the first at 0, each aligned as
    workspace buffers are), and the bytes of the region the plan uses."""
    offsets, end = [], 0
    for name, count in plan.counters:
        offset = _aligned(end)
        offsets.append((name, offset))
        end = offset + COUNTER_BYTES * count
    return tuple(offsets), end


def served_problem(choice: Choice, family: Family, epilogue: str) -> ConvProblem:
    """The problem a call's plan computes: the chosen one, with the call's epilogue where the
    family fuses it (the configuration is the plain problem's: an epilogue changes only what
    the store does, not what fits), else without (the caller applies it)."""
    if epilogue and epilogue in family.epilogues:
        return replace(choice.problem, epilogue=epilogue)
    return choice.problem


def pad_launch(
    call: Call,
    problem: ConvProblem,
    compiler: Compiler,
    limits: DeviceLimits,
    directory: str,
    launch_op=None,
):
    """The padding launch: the caller's (B, C, H, W) input (buffer "x_caller", in the plan's
    layout) into the (B, C, S, S) input the plan reads ("x", the workspace's first region), S =
    (N - 1) * stride + K, zeros around (and an unused tail dropped)."""
    functions = _PADS.get((compiler.arch, call.device))
    if functions is None:
        compiled = compiler.compile_source(PAD_SOURCE, ())
        entries = (*PAD_ENTRIES.values(), PAD_CHUNKS_ENTRY)
        _, functions = load_module(compiled.cubin, entries, directory, keep=False)
        _PADS[(compiler.arch, call.device)] = functions
    entry, args, total = pad_arguments(call, problem)
    grid = (max(1, min(cdiv(total, PAD_BLOCK), 32 * limits.SM_COUNT)), 1, 1)
    return (launch_op or LAUNCHERS[DEFAULT_LAUNCHER][0])(
        functions[entry], Launch(entry, grid, (PAD_BLOCK, 1, 1), args)
    )


def pad_arguments(call: Call, problem: ConvProblem) -> tuple[str, tuple, int]:
    """The padding kernel's entry and arguments for a call served by `problem`'s plan, and how
    many items (elements, or 16-byte chunks) it copies."""
    entry = PAD_ENTRIES[(problem.layout, problem.precision.bytes)]
    side = problem.input_size
    pixels = call.B * side * side
    if problem.nhwc:
        pixel_bytes = call.C * problem.precision.bytes
        chunks = pixel_bytes // CHUNK_BYTES
        if pixel_bytes % CHUNK_BYTES == 0 and pixels * chunks < 2**31:
            args = ("x_caller", "x", call.B, call.H, call.W, side, call.padding, chunks)
            return PAD_CHUNKS_ENTRY, args, pixels * chunks
        args = ("x_caller", "x", call.B, call.H, call.W, side, call.padding, call.C)
        return entry, args, pixels * call.C
    args = ("x_caller", "x", call.B * call.C, call.H, call.W, side, call.padding)
    return entry, args, pixels * call.C


def _count(shape: tuple[int, ...]) -> int:
    count = 1
    for extent in shape:
        count *= extent
    return count


def _aligned(nbytes: int) -> int:
    return cdiv(nbytes, ALIGN_BYTES) * ALIGN_BYTES


__all__ = [
    "Call",
    "CallError",
    "Entry",
    "NoFit",
    "build_entry",
    "counter_offsets",
    "pad_launch",
    "served_problem",
]
