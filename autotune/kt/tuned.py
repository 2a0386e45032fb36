"""tuned_kernel: a kernel of one's own, tuned through tune_kernel, compiled at its stored best
configuration for a problem size and ready to launch.

It takes tune_kernel's arguments and keys the study as tune_kernel does (kt/study.py), reads
the study's best current measurement from the results database (kt/stored.py), compiles the
kernel with NVRTC at that configuration and returns it with its launch geometry. Launching
needs a GPU and CuPy, imported only then; everything before runs without one.
"""

from __future__ import annotations

import inspect
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from autotune.gpu.compiler import DEFAULT_CACHE, Compiler, lowered_plan
from autotune.kt import api
from autotune.kt.arguments import TuneKernelError, check_request
from autotune.kt.space import bind_space
from autotune.kt.stored import KIND, StudyBest, study_best
from autotune.kt.study import compile_options, given_kernel, study_problem
from autotune.model.space import Config, DeviceLimits, Value
from autotune.store import Store, default_storage, hide_passwords


class NoTunedKernel(TuneKernelError):
    """The results database holds no usable measurement of the study asked for (one line)."""


@dataclass(frozen=True, eq=False)  # it holds arrays and, once launched, a loaded module
class TunedKernel:
    """A kernel compiled at its study's best stored configuration, with the launch it was
    measured with. Call it with the kernel's arguments (CuPy arrays, NumPy scalars) to launch
    it on the GPU: `kernel(c, a, b, np.int32(n), stream=None)`."""

    name: str
    config: dict[str, Value]  # the tunables' values
    defines: dict[str, Value]  # what the source was compiled with (Kernel Tuner's conventions)
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem_bytes: int  # dynamic shared memory of a launch
    cubin: bytes
    arch: str
    time_ms: float  # its stored median time
    device: str  # the GPU it was measured on (as stored)
    study: str  # kernel name and problem key, as tune_kernel's env["study"]
    arguments: int
    constants: tuple[tuple[str, np.ndarray], ...] = ()  # cmem_args, copied in at load
    entry: str = ""  # the name in the cubin, where it is not `name` (a template's instance)
    _loaded: dict = field(default_factory=dict, repr=False, compare=False)

    def __call__(self, *args: Any, stream: Any = None) -> None:
        """Launch on `stream` (a CuPy stream, an object with a `cuda_stream` handle such as
        PyTorch's, a raw handle as an int; None: CuPy's current stream). Asynchronous."""
        if len(args) != self.arguments:
            raise TypeError(f"{self.name} takes {self.arguments} arguments, {len(args)} given")
        from autotune.gpu import launch  # CuPy's runtime, only now

        cp = launch.cp
        if cp is None:
            raise RuntimeError(f"{self.name}: launching needs CuPy, which is not installed")
        function = self._function(launch, cp.cuda.runtime.getDevice())
        if stream is None:
            function(self.grid, self.block, args, shared_mem=self.smem_bytes)
            return
        handle = stream if isinstance(stream, int) else getattr(stream, "cuda_stream", None)
        target = launch.external_stream(handle) if handle is not None else stream
        with target:
            function(self.grid, self.block, args, shared_mem=self.smem_bytes)

    def _function(self, launch, device: int):
        found = self._loaded.get(device)
        if found is None:
            found = self._loaded[device] = loaded_entry(
                launch, self.cubin, self.entry or self.name, self.smem_bytes, self.constants
            )
        return found[1]


def loaded_entry(launch, cubin: bytes, entry: str, smem_bytes: int, constants) -> tuple:
    """(module, function) of a given kernel's cubin on the current device, its dynamic shared
    memory opted into and its constant memory (cmem_args: (symbol, array) pairs) copied in."""
    # A directory of its own: the file goes once the function is fetched.
    with tempfile.TemporaryDirectory() as scratch:
        module, functions = launch.load_module(cubin, (entry,), scratch, False)
    if smem_bytes > launch.DEFAULT_DYNAMIC_SMEM:
        functions[entry].max_dynamic_shared_size_bytes = smem_bytes
    for symbol, values in constants:
        data = np.ascontiguousarray(values)
        module.get_global(symbol).copy_from_host(data.ctypes.data, data.nbytes)
    return module, functions[entry]


def tuned_kernel(
    kernel_name,
    kernel_source,
    problem_size,
    arguments,
    tune_params,
    *,
    storage: str | None = None,
    device_name: str | None = None,
    compiler_cache: Path | None = DEFAULT_CACHE,
    **options,
) -> TunedKernel:
    """The kernel of a tune_kernel call, compiled at the best configuration stored for it.

    Give the arguments of that call (kernel_name, kernel_source, problem_size, arguments,
    tune_params and the options that shape the study: grid divisors, block_size_names,
    defines, smem_args, cmem_args, compiler_options, restrictions, ...); `storage` the results
    database it was stored in; `device_name` the GPU (as stored) whose best to take, needed
    only where several have one. Compiled for that GPU's architecture; `compiler_cache` the
    cubin cache directory (None for none)."""
    call = inspect.signature(api.tune_kernel).bind(
        kernel_name, kernel_source, problem_size, arguments, tune_params, **options
    )
    call.apply_defaults()
    request = check_request(call.arguments)
    problem = study_problem(request)
    study = f"{request.kernel_name} {problem.key}"
    root = api.CACHE_ROOT / "tune_kernel"
    family = given_kernel(request, None, root)
    # Kernel Tuner's restrictions and tune_params still bound the answer: a configuration
    # outside them is not this call's. Threads per block were checked where it was measured.
    space = bind_space(request, DeviceLimits(MAX_THREADS=1 << 30))
    # In the caller's process: NVRTC's signal handlers would end it on a Ctrl-C mid-compile.
    compiler = Compiler(
        cache_dir=compiler_cache, options=compile_options(request), in_children=True
    )
    # Where evaluations store their code's digest, prefer those of this code as it is now.
    digest = compiler.kernel_digest(family) if hasattr(compiler, "kernel_digest") else None
    storage = storage or default_storage()
    best, compiler.arch = _stored_best(request, problem, study, storage, device_name, space, digest)
    plan = family.plan(problem, best.config)
    compiled = compiler.compile(plan)
    arch = compiler.arch
    (entry,) = lowered_plan(plan, compiled).launches
    return TunedKernel(
        name=request.kernel_name,
        config=best.config.as_dict(),
        defines=dict(plan.defines),
        grid=entry.grid,
        block=entry.block,
        smem_bytes=entry.smem_bytes,
        cubin=compiled.cubin,
        arch=arch,
        time_ms=best.time_ms,
        device=best.device,
        study=study,
        arguments=len(request.arguments),
        constants=tuple(request.cmem_args.items()),
        entry=entry.kernel,
    )


def _stored_best(
    request, problem, study, storage, device_name, space, digest
) -> tuple[StudyBest, str]:
    if "://" not in storage and not Path(storage).expanduser().exists():
        raise NoTunedKernel(f"no results database at {storage}; {_how(study, storage)}")
    store = Store(storage, create=False)
    try:
        history = store.history(device=device_name, family=request.kernel_name, kind=KIND)
        devices = store.devices()
        protocol = store.protocol
    finally:
        store.close()
    history = history[history["problem_key"] == problem.key]
    valid = np.array([space.is_valid(_config(c)) for c in history["config"]], dtype=bool)
    history = history[valid]
    where = f" on {device_name}" if device_name else ""
    groups = history.groupby("device")
    bests = [b for _, rows in groups if (b := study_best(rows, digest)) is not None]
    if not bests:
        raise NoTunedKernel(
            f"no verified measurement of study {study!r}{where} (timing protocol {protocol}) in "
            f"{hide_passwords(storage)}; {_how(study, storage)}"
        )
    if len(bests) > 1:
        names = ", ".join(sorted(b.device for b in bests))
        raise NoTunedKernel(f"study {study!r} has a best on {names}; choose one: device_name=")
    best = bests[0]
    capability = devices[devices["name"] == best.device]["compute_capability"].iloc[-1]
    major, _, minor = str(capability).partition(".")
    return best, f"sm_{major}{minor or '0'}"


def _how(study: str, storage: str) -> str:
    return (
        f"tune it first with tune_kernel(...) and the same arguments, "
        f"storage={hide_passwords(storage)!r} "
        "(a study is keyed by problem size, argument types, source and launch)"
    )


def _config(raw: object) -> Config:
    return Config.from_json(raw) if isinstance(raw, str) else Config.of(raw)  # type: ignore[arg-type]


__all__ = ["NoTunedKernel", "TunedKernel", "loaded_entry", "tuned_kernel"]
