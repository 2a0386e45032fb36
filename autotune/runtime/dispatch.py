"""The runtime: run the stored plan for a shape on the caller's arrays, on the caller's stream.

Per shape, once per process: the lookup (lookup.py) picks a configuration, the compiler gives
its cubin (from the disk cache when it holds it), the module is loaded and the launches are
prepared. Per call: the arguments are checked, the output allocated by the caller's framework,
scratch taken from a per-stream workspace, and the prepared launches queued on the caller's
current stream. Nothing waits for the GPU.
"""

from __future__ import annotations

import sys
import tempfile
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import cupy as cp
import numpy as np

from autotune import package_path
from autotune.families import FAMILIES, Family, get_family
from autotune.families.plan import cdiv
from autotune.gpu.compiler import DEFAULT_CACHE, CompileError, Compiler
from autotune.gpu.launch import (
    attribute,
    bind,
    device_arch,
    device_limits,
    device_name,
    load_module,
    opt_in_shared_memory,
    prepare,
    run,
)
from autotune.model.problem import ConvProblem
from autotune.model.records import TIMING_PROTOCOL
from autotune.model.space import DeviceLimits
from autotune.runtime.lookup import (
    MISS_POLICIES,
    ZERO_INPUTS,
    Catalogue,
    Choice,
    LookupMiss,
    resolve,
)
from autotune.tuning.studies import resource_problem

# The commands' default database (cli/options.py), relative to the working directory.
DEFAULT_DATABASE = "results/autotune.db"
# Evaluations per family when a shape is tuned on a miss: local search with transfer reaches
# about 0.98 of the optimum at 10 on the recorded spaces (README, strategies).
DEFAULT_TUNE_BUDGET = 10
PAD_SOURCE = package_path("autotune.runtime", "pad.cu")
PAD_BLOCK = 256
ALIGN_BYTES = 256
FLOAT_BYTES = 4
DEVICE_TO_DEVICE = 3  # cudaMemcpyDeviceToDevice


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
    """A shape's prepared plan: launches bound per call to the caller's pointers."""

    choice: Choice
    device: int
    out_shape: tuple[int, int, int, int]
    pad: tuple | None  # (function, grid, block, int args after the two pointers), or None
    setup: tuple
    launches: tuple
    finish: tuple
    constants: tuple[tuple[int, str, int], ...]  # (symbol address, buffer, bytes)
    scratch: tuple[tuple[str, int], ...]  # (buffer, offset in the workspace)
    workspace_bytes: int
    fixed: dict[str, int]  # pointers of the plan's own inputs (a zero bias)
    keep: list = field(default_factory=list)  # what must outlive the entry's pointers

    @property
    def exact(self) -> bool:
        return self.choice.exact


class Runtime:
    """Dispatch state of one process for one results database: the device's catalogue of
    stored bests, compiled modules and prepared plans per shape, workspaces per stream."""

    def __init__(
        self,
        database: str = DEFAULT_DATABASE,
        *,
        families: Iterable[str] | None = None,
        cache_dir: Path | None = DEFAULT_CACHE,
        tune_budget: int = DEFAULT_TUNE_BUDGET,
        tune_timing=None,
        protocol: int = TIMING_PROTOCOL,
    ) -> None:
        self.database = str(database)
        names = list(families) if families is not None else list(FAMILIES)
        self.families: dict[str, Family] = {n: get_family(n) for n in names}
        self.cache_dir = cache_dir
        self.tune_budget = tune_budget
        self.tune_timing = tune_timing
        self.protocol = protocol
        self._store = None
        self._catalogues: dict[int, Catalogue] = {}
        self._limits: dict[int, DeviceLimits] = {}
        self._compilers: dict[str, Compiler] = {}
        self._entries: dict[tuple, Entry] = {}  # by the call's shape, as Call's fields
        self._pads: dict[int, tuple] = {}
        self._workspaces: dict[tuple[int, int], object] = {}
        self._streams: dict[int, object] = {}
        self._lock = threading.RLock()
        self._tmp = tempfile.TemporaryDirectory(prefix="autotune-runtime-")

    # -- the call ------------------------------------------------------------------------------

    def conv2d(self, x, w, stride: int = 1, padding: int = 0, on_miss: str = "nearest"):
        """y = conv2d(x, w): FP32 NCHW input, FCKK filters, NFHW output of the caller's kind
        (a CuPy array for CuPy or any other DLPack producer, a tensor for PyTorch)."""
        if x.__class__ is cp.ndarray:
            return self._cupy(x, w, stride, padding, on_miss)
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(x, torch.Tensor):
            return self._torch(torch, x, w, stride, padding, on_miss)
        if hasattr(x, "__dlpack__") and hasattr(w, "__dlpack__"):
            return self._cupy(cp.from_dlpack(x), cp.from_dlpack(w), stride, padding, on_miss)
        raise CallError(
            f"x must be a CuPy array, a PyTorch tensor or a DLPack producer, not {type(x).__name__}"
        )

    def _torch(self, torch, x, w, stride, padding, on_miss):
        if x.dtype is not torch.float32 or w.dtype is not torch.float32:
            raise CallError(f"x and w must be float32, got {x.dtype} and {w.dtype}")
        if not x.is_cuda or w.device != x.device:
            raise CallError(f"x and w must be on one CUDA device, got {x.device} and {w.device}")
        if x.dim() != 4 or w.dim() != 4:
            raise CallError("x must be (B, C, H, W) and w (F, C, K, K)")
        if not x.is_contiguous():
            x = x.contiguous()
        if not w.is_contiguous():
            w = w.contiguous()
        device = x.device.index
        entry = self._entry(device, x.shape, w.shape, stride, padding, on_miss)
        stream_ptr = _torch_stream(torch, device)
        stream = self._streams.get(stream_ptr)
        if stream is None:
            stream = self._streams[stream_ptr] = cp.cuda.ExternalStream(stream_ptr, device)
        y = torch.empty(entry.out_shape, dtype=torch.float32, device=x.device)
        self._launch(entry, x.data_ptr(), w.data_ptr(), y.data_ptr(), stream_ptr, stream)
        return y

    def _cupy(self, x, w, stride, padding, on_miss):
        if x.dtype != np.float32 or w.dtype != np.float32:
            raise CallError(f"x and w must be float32, got {x.dtype} and {w.dtype}")
        if x.ndim != 4 or w.ndim != 4:
            raise CallError("x must be (B, C, H, W) and w (F, C, K, K)")
        device = x.device.id
        if w.device.id != device:
            raise CallError(f"x and w must be on one device, got {device} and {w.device.id}")
        x, w = cp.ascontiguousarray(x), cp.ascontiguousarray(w)
        entry = self._entry(device, x.shape, w.shape, stride, padding, on_miss)
        stream = cp.cuda.get_current_stream()
        y = cp.empty(entry.out_shape, dtype=cp.float32)
        self._launch(entry, x.data.ptr, w.data.ptr, y.data.ptr, stream.ptr, stream)
        return y

    def _entry(self, device: int, x_shape, w_shape, stride, padding, on_miss) -> Entry:
        if on_miss not in MISS_POLICIES:
            raise CallError(f"on_miss must be one of {', '.join(MISS_POLICIES)}, not {on_miss!r}")
        key = (device, *x_shape, *w_shape, stride, padding)
        entry = self._entries.get(key)
        if entry is not None and (entry.choice.exact or on_miss == "nearest"):
            return entry
        if len(key) != 11:
            raise CallError("x must be (B, C, H, W) and w (F, C, K, K)")
        return self._resolve(key, on_miss)

    def _launch(self, entry: Entry, x: int, w: int, y: int, stream_ptr: int, stream) -> None:
        if entry.device != cp.cuda.runtime.getDevice():
            with cp.cuda.Device(entry.device):
                return self._launch(entry, x, w, y, stream_ptr, stream)
        ptrs = {"x": x, "w": w, "y": y}
        if entry.fixed:
            ptrs.update(entry.fixed)
        if entry.workspace_bytes:
            base = self._workspace(entry.device, stream_ptr, stream, entry.workspace_bytes)
            for name, offset in entry.scratch:
                ptrs[name] = base + offset
            if entry.pad is not None:
                fn, grid, block, tail = entry.pad
                fn(grid, block, (x, base, *tail), stream=stream)
                ptrs["x"] = base  # the padded input is the workspace's first region
        if entry.setup:
            run(bind(entry.setup, ptrs), stream)
        for symbol, buffer, nbytes in entry.constants:
            cp.cuda.runtime.memcpyAsync(symbol, ptrs[buffer], nbytes, DEVICE_TO_DEVICE, stream_ptr)
        run(bind(entry.launches, ptrs), stream)
        if entry.finish:
            run(bind(entry.finish, ptrs), stream)
        return None

    def _workspace(self, device: int, stream_ptr: int, stream, nbytes: int) -> int:
        """A buffer of at least nbytes kept per (device, stream): calls on one stream run in
        order, so they share it; a larger one replaces it (CuPy's pool hands the old one only
        to later work on that stream)."""
        held = self._workspaces.get((device, stream_ptr))
        if held is None or held.mem.size < nbytes:
            with stream:
                held = cp.cuda.alloc(nbytes)
            self._workspaces[(device, stream_ptr)] = held
        return held.ptr

    # -- preparing a shape ---------------------------------------------------------------------

    def _resolve(self, key: tuple, on_miss: str) -> Entry:
        values = [_single(v) for v in key]
        call = Call(*values)
        if not isinstance(call.stride, int) or not isinstance(call.padding, int):
            raise CallError("stride and padding must be integers")
        if call.stride < 1 or call.padding < 0:
            raise CallError(
                f"stride must be >= 1 and padding >= 0, got {call.stride}, {call.padding}"
            )
        with self._lock, cp.cuda.Device(call.device):
            problem = call.problem()
            catalogue, found = resolve(
                self.catalogue(call.device),
                problem,
                self.limits(call.device),
                on_miss,
                lambda p: self._tune(p, call.device),
            )
            why = []
            for choice in found:
                try:
                    entry = self._build(choice, call)
                except (CompileError, _NoFit) as err:
                    why.append(f"{choice.family}: {str(err).splitlines()[0][:200]}")
                    continue
                self._entries[key] = entry
                return entry
            reason = catalogue.miss_reason(problem, on_miss)
            raise LookupMiss(reason + (f" ({'; '.join(why)})" if why else ""))

    def _build(self, choice: Choice, call: Call) -> Entry:
        family = self.families[choice.family]
        problem = choice.problem
        plan = family.plan(problem, choice.config)
        compiled = self.compiler(call.device).compile(plan)
        why = resource_problem(compiled, plan.all_launches, self.limits(call.device))
        if why:
            raise _NoFit(why)
        module, functions = load_module(compiled.cubin, plan.entries, self._tmp.name, keep=False)
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
            pad = self._pad(call, problem)
            offset = _aligned(FLOAT_BYTES * _count(problem.input_shape))
        scratch = []
        for name, _ in plan.scratch:
            scratch.append((name, offset))
            offset = _aligned(offset + sizes[name])
        constants = tuple(
            (module.get_global(symbol).ptr, buffer, sizes[buffer])
            for symbol, buffer in plan.constants
        )
        if pad is None and not scratch:
            offset = 0
        return Entry(
            choice=choice,
            device=call.device,
            out_shape=problem.output_shape,
            pad=pad,
            setup=prepare(plan.setup, functions),
            launches=prepare(plan.launches, functions),
            finish=prepare(plan.finish, functions),
            constants=constants,
            scratch=tuple(scratch),
            workspace_bytes=offset,
            fixed=fixed,
            keep=keep,
        )

    def _pad(self, call: Call, problem: ConvProblem) -> tuple:
        """The padding launch: the caller's (B, C, H, W) into the (B, C, S, S) input the plan
        reads, S = (N - 1) * stride + K, zeros around (and the unused tail dropped)."""
        fn = self._pads.get(call.device)
        if fn is None:
            compiled = self.compiler(call.device).compile_source(PAD_SOURCE, ())
            module, functions = load_module(
                compiled.cubin, ("pad_nchw",), self._tmp.name, keep=False
            )
            fn = functions["pad_nchw"]
            self._pads[call.device] = fn
        side = problem.input_size
        total = call.B * call.C * side * side
        sms = attribute(call.device, "MultiProcessorCount")
        grid = (max(1, min(cdiv(total, PAD_BLOCK), 32 * sms)), 1, 1)
        tail = tuple(np.int32(v) for v in (call.B * call.C, call.H, call.W, side, call.padding))
        return (fn, grid, (PAD_BLOCK, 1, 1), tail)

    # -- per device ----------------------------------------------------------------------------

    def store(self):
        if self._store is None:
            from autotune.store import Store

            self._store = Store(self.database, protocol=self.protocol)
        return self._store

    def catalogue(self, device: int, reload: bool = False) -> Catalogue:
        if reload or device not in self._catalogues:
            self._catalogues[device] = Catalogue.from_store(
                self.store(), device_name(device), self.protocol, self.families
            )
        return self._catalogues[device]

    def limits(self, device: int) -> DeviceLimits:
        if device not in self._limits:
            self._limits[device] = device_limits(device)
        return self._limits[device]

    def compiler(self, device: int) -> Compiler:
        arch = device_arch(device)
        if arch not in self._compilers:
            self._compilers[arch] = Compiler(arch=arch, cache_dir=self.cache_dir)
        return self._compilers[arch]

    def _tune(self, problem: ConvProblem, device: int) -> Catalogue:
        """Tune `problem` now with the runtime's small budget per family and store it; the
        catalogue read again."""
        from autotune.runtime.tune import tune_shape

        tune_shape(
            self.database,
            problem,
            self.families,
            self.tune_budget,
            device,
            self.cache_dir,
            self.tune_timing,
        )
        return self.catalogue(device, reload=True)

    def compile_ahead(
        self, problems: Iterable[ConvProblem], device: int = 0, processes: int | None = None
    ) -> int:
        """Compile the plans these problems will run (their first choice) in parallel NVRTC
        processes into the disk cache, so that their first calls only load them. Returns how
        many plans were compiled or found cached."""
        import os
        from concurrent.futures import ThreadPoolExecutor

        with cp.cuda.Device(device):
            catalogue, limits = self.catalogue(device), self.limits(device)
            compiler = self.compiler(device)
        plans = []
        for problem in problems:
            choice = next(catalogue.candidates(problem, limits), None)
            if choice is not None:
                plans.append(self.families[choice.family].plan(problem, choice.config))
        jobs = max(1, processes or os.cpu_count() or 1)
        compiler.start_pool(jobs)
        try:
            with ThreadPoolExecutor(jobs) as pool:
                done = list(pool.map(_compile_or_none(compiler), plans))
        finally:
            compiler.stop_pool()
        return sum(d is not None for d in done)

    def prepared(self) -> dict[Call, Choice]:
        """What each shape called so far runs."""
        return {Call(*key): entry.choice for key, entry in self._entries.items()}


class _NoFit(RuntimeError):
    """A compiled plan that cannot launch on this device (resources)."""


def _compile_or_none(compiler: Compiler):
    def compile_one(plan):
        try:
            return compiler.compile(plan)
        except CompileError:
            return None  # the call will try the next choice

    return compile_one


def _single(value):
    """An extent as an int: a NumPy integer, or a pair of equal ints (PyTorch's (s, s))."""
    if isinstance(value, tuple | list) and len(value) == 2 and value[0] == value[1]:
        value = value[0]
    return int(value) if isinstance(value, np.integer) else value


def _torch_stream(torch, device: int) -> int:
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw(device)
    return torch.cuda.current_stream(device).cuda_stream


def _count(shape: tuple[int, ...]) -> int:
    count = 1
    for extent in shape:
        count *= extent
    return count


def _aligned(nbytes: int) -> int:
    return cdiv(nbytes, ALIGN_BYTES) * ALIGN_BYTES


_RUNTIMES: dict[str, Runtime] = {}


def runtime(database: str | None = None) -> Runtime:
    """The process's runtime for a database (the default one when None)."""
    key = DEFAULT_DATABASE if database is None else str(database)
    found = _RUNTIMES.get(key)
    if found is None:
        found = _RUNTIMES[key] = Runtime(key)
    return found


def conv2d(x, w, stride: int = 1, padding: int = 0, *, on_miss: str = "nearest", database=None):
    """2D convolution (cross-correlation, as PyTorch's conv2d) by the fastest stored kernel.

    x: (B, C, H, W) float32, w: (F, C, K, K) float32, CuPy arrays or PyTorch tensors on one GPU
    (contiguous, or copied to be); returns (B, F, N, N) of the same kind, queued on the caller's
    current stream. `padding` zeros on every side (a pre-padded input with padding=0 is used in
    place). `on_miss` for a shape with nothing stored: "nearest" (the nearest stored shape's
    best, made valid), "tune" (tune it now and store it) or "error" (LookupMiss).
    `database`: the results database (SQLite path or SQLAlchemy URL); results/autotune.db when
    None.
    """
    rt = _RUNTIMES.get(DEFAULT_DATABASE if database is None else database)
    if rt is None:
        rt = runtime(database)
    return rt.conv2d(x, w, stride, padding, on_miss)


__all__ = [
    "DEFAULT_DATABASE",
    "MISS_POLICIES",
    "Call",
    "CallError",
    "Runtime",
    "conv2d",
    "runtime",
]
