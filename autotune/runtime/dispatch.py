"""The runtime: run the stored plan for a shape on the caller's arrays, on the caller's stream.

Per shape, once per process: the lookup (lookup.py) picks a configuration, the compiler gives
its cubin (from the disk cache when it holds it), the module is loaded and the launches are
prepared. Per call: the arguments are checked, the output allocated by the caller's framework,
scratch taken from a per-stream workspace and counters from a per-stream zeroed region
(stream_memory.py), and the prepared launches queued on the caller's current stream. Nothing
waits for the GPU.
"""

from __future__ import annotations

import sys
import tempfile
import threading
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

import cupy as cp

from autotune.families import FAMILIES, Family, get_family, kernel_digests
from autotune.gpu.compiler import DEFAULT_CACHE, CompileError, Compiler
from autotune.gpu.launch import (
    LAUNCHERS,
    DriverError,
    device_arch,
    device_limits,
    device_name,
)
from autotune.model.problem import ConvProblem
from autotune.model.records import TIMING_PROTOCOL
from autotune.model.space import DeviceLimits
from autotune.runtime import cupy_arrays
from autotune.runtime.calls import DEFAULT_LAUNCHER, Call, CallError, Request
from autotune.runtime.choice import Choice
from autotune.runtime.lookup import MISS_POLICIES, Catalogue, LookupMiss, resolve
from autotune.runtime.plans import Entry, NoFit, build_entry, served_problem
from autotune.runtime.stream_memory import StreamMemory
from autotune.store import default_storage

# Evaluations per family when a shape is tuned on a miss: local search with transfer reaches
# about 0.98 of the optimum at 10 on the recorded spaces (README, strategies).
DEFAULT_TUNE_BUDGET = 10


class Runtime:
    """Dispatch state of one process for one results database: the device's catalogue of
    stored bests, compiled modules and prepared plans per shape, workspaces and counters per
    stream."""

    def __init__(
        self,
        database: str | None = None,
        *,
        families: Iterable[str] | None = None,
        cache_dir: Path | None = DEFAULT_CACHE,
        tune_budget: int = DEFAULT_TUNE_BUDGET,
        tune_timing=None,
        protocol: int = TIMING_PROTOCOL,
        launcher: str = DEFAULT_LAUNCHER,
    ) -> None:
        if launcher not in LAUNCHERS:
            raise CallError(f"launcher must be one of {', '.join(LAUNCHERS)}, not {launcher!r}")
        self.launcher = launcher
        # The commands' default (store/location.py) when none is named.
        self.database = str(database) if database else default_storage()
        names = list(families) if families is not None else list(FAMILIES)
        self.families: dict[str, Family] = {n: get_family(n) for n in names}
        if families is None:  # by default every family that computes the calls served here
            self.families = {n: f for n, f in self.families.items() if serves_calls(f)}
        for name, family in self.families.items():
            if not serves_calls(family):
                raise CallError(
                    f"{name} computes {family.problem_type.__name__} problems; the runtime "
                    "serves 2D convolutions only"
                )
        self.cache_dir = cache_dir
        self.tune_budget = tune_budget
        self.tune_timing = tune_timing
        self.protocol = protocol
        self._store = None
        self._catalogues: dict[int, Catalogue] = {}
        self._limits: dict[int, DeviceLimits] = {}
        self._compilers: dict[str, Compiler] = {}
        self.entries: dict[tuple, Entry] = {}  # by the call's shape, as Call's fields
        self._memory = StreamMemory()  # per (device, stream): workspace, counters
        self._lock = threading.RLock()
        self._tmp = tempfile.TemporaryDirectory(prefix="autotune-runtime-")

    # -- the call ------------------------------------------------------------------------------

    def conv2d(
        self,
        x,
        w,
        stride: int = 1,
        padding: int = 0,
        on_miss: str = "nearest",
        bias=None,
        residual=None,
        activation: str = "",
    ):
        """y = activation(conv2d(x, w) + bias + residual): (B, C, H, W) input, (F, C, K, K)
        filters, (F,) bias or None, (B, F, N, N) output of the caller's kind (a CuPy array for
        CuPy or any other DLPack producer, a tensor for PyTorch), in the input's storage type
        and, for a tensor, its memory format. A plan whose family fuses the epilogue applies it
        in its store. A residual and an activation are taken with tensors only."""
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(x, torch.Tensor):
            tensors = torch_tensors()
            return tensors.call(self, x, w, stride, padding, on_miss, bias, residual, activation)
        if residual is not None or activation:
            raise CallError("a residual and an activation are taken with PyTorch tensors only")
        if cupy_arrays.takes(x, w):
            return cupy_arrays.call(self, x, w, stride, padding, on_miss, bias)
        raise CallError(
            f"x must be a CuPy array, a PyTorch tensor or a DLPack producer, not {type(x).__name__}"
        )

    def entry(self, key: tuple, on_miss: str) -> Entry:
        if on_miss not in MISS_POLICIES:
            raise CallError(f"on_miss must be one of {', '.join(MISS_POLICIES)}, not {on_miss!r}")
        entry = self.entries.get(key)
        if entry is not None and (on_miss == "nearest" or entry.choice.exact):
            return entry
        return self._resolve(key, on_miss)

    def launch(
        self,
        entry: Entry,
        x: int,
        w: int,
        y: int,
        stream: int,
        workspace: int | None = None,
        bias: int | None = None,
        residual: int | None = None,
        counters: int | None = None,
    ) -> None:
        """Queue the entry's operations for these buffers (`bias`, `residual`: what its fused
        epilogue reads, when it has one) on `stream`. `workspace` (None: the stream's own)
        holds the entry's scratch; `counters` (None: the stream's own region) its zeroed
        counters, which its run leaves zero."""
        if entry.device != cp.cuda.runtime.getDevice():
            with cp.cuda.Device(entry.device):
                return self.launch(entry, x, w, y, stream, workspace, bias, residual, counters)
        ptrs = {"x": x, "w": w, "y": y}
        if entry.fixed:
            ptrs.update(entry.fixed)
        if entry.epilogue:
            ptrs["bias"] = bias
            if residual is not None:
                ptrs["residual"] = residual
        if entry.workspace_bytes:
            base = workspace
            if base is None:
                base = self._memory.workspace(entry.device, stream, entry.workspace_bytes)
            for name, offset in entry.scratch:
                ptrs[name] = base + offset
            if entry.pad is not None:
                ptrs["x_caller"] = x
                ptrs["x"] = base  # the padded input is the workspace's first region
        if entry.counters:
            if counters is None:
                counters = self._memory.counters(entry.device, stream, entry.counter_bytes)
            for name, offset in entry.counters:
                ptrs[name] = counters + offset
        with entry.lock:
            try:
                for op in entry.ops:
                    op(ptrs, stream)
            except DriverError as err:
                # A thread whose first CUDA work this is may have no current context yet: the
                # first operation fails and nothing is queued; bind the device's, once.
                if "INVALID_CONTEXT" not in str(err) or entry.ops[0] is not op:
                    raise
                cp.cuda.runtime.setDevice(entry.device)
                for op in entry.ops:
                    op(ptrs, stream)
        return None

    # -- preparing a shape ---------------------------------------------------------------------

    def _resolve(self, key: tuple, on_miss: str) -> Entry:
        if len(key) not in (11, 14, 15):
            raise CallError("x must be (B, C, H, W) and w (F, C, K, K)")
        call = Call.of(key)
        problem = call.problem()  # CallError for what no plan computes
        with self._lock, cp.cuda.Device(call.device):
            catalogue, found = resolve(
                self.catalogue(call.device),
                problem,
                self.limits(call.device),
                on_miss,
                lambda problems: self._tune(problems, call.device),
                call.request,
            )
            why = []
            for choice in found:
                try:
                    entry = build_entry(
                        choice,
                        call,
                        self.families[choice.family],
                        self.compiler(call.device),
                        self.limits(call.device),
                        self._tmp.name,
                        self.launcher,
                    )
                except (CompileError, NoFit) as err:
                    why.append(f"{choice.family}: {str(err).splitlines()[0][:200]}")
                    continue
                self.entries[key] = entry
                return entry
            reason = catalogue.miss_reason(problem, on_miss)
            raise LookupMiss(reason + (f" ({'; '.join(why)})" if why else ""))

    # -- per device ----------------------------------------------------------------------------

    def store(self):
        if self._store is None:
            from autotune.store import Store

            self._store = Store(self.database, protocol=self.protocol)
            # Only measurements of the kernels as they are now choose a plan.
            self._store.read_current(kernel_digests(self.families))
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
            # In the caller's process (a script, a notebook, PyTorch's), NVRTC's own signal
            # handlers would end it with code 4 on a Ctrl-C during a compile.
            self._compilers[arch] = Compiler(arch=arch, cache_dir=self.cache_dir, in_children=True)
        return self._compilers[arch]

    def _tune(self, problems: list[ConvProblem], device: int) -> Catalogue:
        """Tune `problems` (every problem that may serve a call) now with the runtime's small
        budget per family and store them; the catalogue read again."""
        from autotune.runtime.tune import tune_shape

        tune_shape(
            self.database,
            problems,
            self.families,
            self.tune_budget,
            device,
            self.cache_dir,
            self.tune_timing,
        )
        return self.catalogue(device, reload=True)

    def compile_ahead(
        self,
        calls: Iterable[ConvProblem | tuple[ConvProblem, Request]],
        device: int = 0,
        processes: int | None = None,
    ) -> int:
        """Compile the plans these calls will run (their first choice) in parallel NVRTC
        processes into the disk cache, so that their first calls only load them. A call is a
        problem (served in exactly its dtype and layout) or the sizes and a request; its
        epilogue is the one the call fuses (a bias). Returns how many plans were compiled or
        found cached."""
        import os
        from concurrent.futures import ThreadPoolExecutor

        with cp.cuda.Device(device):
            compiler = self.compiler(device)
        plans = []
        for call in calls:
            sizes, request = call if isinstance(call, tuple) else (call, Request.exactly(call))
            choice = self.first_choice(sizes, request, device)
            if choice is not None:
                family = self.families[choice.family]
                problem = served_problem(choice, family, sizes.epilogue)
                plans.append(family.plan(problem, choice.config))
        jobs = max(1, processes or os.cpu_count() or 1)
        compiler.start_pool(jobs)
        try:
            with ThreadPoolExecutor(jobs) as pool:
                done = list(pool.map(_compile_or_none(compiler), plans))
        finally:
            compiler.stop_pool()
        return sum(d is not None for d in done)

    def first_choice(self, sizes: ConvProblem, request: Request, device: int = 0) -> Choice | None:
        """The plan the store would serve a call of these sizes and request first, priced
        (no compile; None when nothing is stored or near). `sizes.epilogue` is the call's."""
        with cp.cuda.Device(device):
            catalogue, limits = self.catalogue(device), self.limits(device)
        # The call's plain problem, its epilogue in the request: it picks a family's best
        # measured fused where there is one, and prices the choice (a plan that
        # does not fuse it pays a pass over the output) and goes on the chosen plan.
        plain = replace(sizes, epilogue="")
        request = replace(request, epilogue=sizes.epilogue)
        return next(catalogue.for_call(plain, request, limits), None)

    def prepared(self) -> dict[Call, Choice]:
        """What each shape called so far runs."""
        return {Call.of(key): entry.choice for key, entry in self.entries.items()}


def _compile_or_none(compiler: Compiler):
    def compile_one(plan):
        try:
            return compiler.compile(plan)
        except CompileError:
            return None  # the call will try the next choice

    return compile_one


_RUNTIMES: dict[str, Runtime] = {}


def runtime(database: str | None = None) -> Runtime:
    """The process's runtime for a database (the default one when None)."""
    key = default_storage() if database is None else str(database)
    found = _RUNTIMES.get(key)
    if found is None:
        found = _RUNTIMES[key] = Runtime(key)
    return found


def runtime_key(rt: Runtime) -> str:
    """The name the custom op (torch_op.py) carries for `rt`: an op's arguments are tensors,
    numbers and strings, never objects. A runtime of `runtime(database)` is its database."""
    for key, found in _RUNTIMES.items():
        if found is rt:
            return key
    key = f"{rt.database}#runtime-{id(rt)}"
    _RUNTIMES[key] = rt
    return key


def runtime_named(key: str) -> Runtime:
    """The runtime `runtime_key` named (a database's own when it was never named)."""
    found = _RUNTIMES.get(key)
    return found if found is not None else runtime(key)


def conv2d(
    x,
    w,
    stride: int = 1,
    padding: int = 0,
    *,
    bias=None,
    residual=None,
    activation: str = "",
    on_miss: str = "nearest",
    database=None,
):
    """2D convolution (cross-correlation, as PyTorch's conv2d) by the fastest stored kernel.

    x: (B, C, H, W), w: (F, C, K, K), bias: (F,) or None, CuPy arrays or PyTorch tensors on one
    GPU (contiguous, or copied to be), FP32, BF16 (tensors) or FP16; the bias is added in the
    kernel's store where the plan's family fuses epilogues, as are a `residual` (the output's
    shape; tensors only) and an `activation` ("relu", "silu", "gelu"; tensors only), in that
    order. Returns (B, F, N, N) of the same kind, queued on the caller's current stream; under
    torch.autocast("cuda") tensors are computed in autocast's lower precision, as PyTorch's
    conv2d computes them. `padding` zeros on every side (a pre-padded input with padding=0 is
    used in place). `on_miss` for a shape with nothing stored:
    "nearest" (the nearest stored shape's best, made valid), "tune" (tune it now and store it)
    or "error" (LookupMiss).
    `database`: the results database (SQLite path or SQLAlchemy URL); the user's (AUTOTUNE_DB,
    else in the user's data directory: store/location.py) when None.
    """
    rt = _RUNTIMES.get(default_storage() if database is None else database)
    if rt is None:
        rt = runtime(database)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):  # under torch.autocast, as F.conv2d
        x, w, bias, residual = torch_tensors().autocast_inputs(x, w, bias, residual)
    return rt.conv2d(x, w, stride, padding, on_miss, bias, residual, activation)


def serves_calls(family: Family) -> bool:
    """Whether the family computes calls the runtime serves: 2D convolutions, in any dtype and
    layout (the plan choice picks, per call, the problems its tensors allow)."""
    return family.problem_type is ConvProblem


_TORCH_TENSORS = None


def torch_tensors():
    """runtime/torch_tensors.py, imported on the first tensor call (it imports PyTorch)."""
    global _TORCH_TENSORS
    if _TORCH_TENSORS is None:
        from autotune.runtime import torch_tensors as module

        _TORCH_TENSORS = module
    return _TORCH_TENSORS


__all__ = [
    "MISS_POLICIES",
    "Call",
    "CallError",
    "Runtime",
    "conv2d",
    "runtime",
    "runtime_key",
    "runtime_named",
    "serves_calls",
]
