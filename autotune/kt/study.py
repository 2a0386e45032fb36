"""What a tune_kernel call's study is: its source file, its family, its problem (the key) and
its launch conventions. One definition for tune_kernel, which measures the study, tuned_kernel,
which runs its best, and the kernel header export, which writes it out from the store."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from autotune.gpu.compiler import DEFAULT_OPTIONS
from autotune.gpu.timing import TimingPolicy
from autotune.kt.arguments import KernelRequest
from autotune.kt.arrays import TunableArgument
from autotune.kt.kernel import DEFAULT_BLOCK_SIZE_NAMES, GivenKernel, with_c_linkage, write_source
from autotune.kt.space import fixed_sizes, signature
from autotune.model.problem import KernelProblem
from autotune.model.space import SearchSpace


class LaunchUnknown(ValueError):
    """A stored launch convention that only the caller's Python can compute (a function)."""


def source_file(request: KernelRequest, root: Path) -> Path:
    """The kernel's text with C linkage, saved under the digest of that text for NVRTC and the
    cubin cache (a generator's: its text at the first value of every tunable, which keys the
    study; each configuration renders its own)."""
    return write_source(
        root, request.kernel_name, with_c_linkage(request.source_text, request.kernel_name)
    )


def timing_policy(request: KernelRequest) -> TimingPolicy:
    """How each configuration is timed: `iterations` samples, as Kernel Tuner takes them, with no
    minimum wall time and no more samples for a noisy spread (protocol 2's extras, which made a
    small example's call slower than Kernel Tuner's). With observers, protocol 2's minimum time
    still applies, so that the clock and temperature sampler sees the timed runs. An objective
    other than time times every candidate to the end: the early stop judges by time, and a
    slower configuration may still be the one of least energy."""
    early = {} if request.objective == "time" else {"early_stop": None}
    n = request.iterations
    if request.observe is not None and request.observe.any:
        return TimingPolicy(min_repeats=n, observe=request.observe, **early)
    return TimingPolicy(
        min_repeats=n,
        max_repeats=n,
        min_time_s=0.0,
        max_spread=math.inf,
        observe=request.observe,
        **early,
    )


def compile_options(request: KernelRequest) -> tuple[str, ...]:
    """NVRTC's options for this kernel: ours, the caller's, and the source's own directory."""
    options = (*DEFAULT_OPTIONS, *request.compiler_options)
    if request.include_dir is not None:
        options += (f"-I{request.include_dir}",)
    return options


def given_kernel(request: KernelRequest, space: SearchSpace | None, root: Path) -> GivenKernel:
    """The family the kernel becomes (its source saved under `root`)."""
    return GivenKernel(
        request.kernel_name,
        source_file(request, root),
        space,  # type: ignore[arg-type]  # None where only plans are made (tuned_kernel)
        problem_size=request.problem_size,
        grid_div=request.grid_div,
        block_size_names=request.block_size_names,
        defines=request.defines,
        smem_size=request.smem_size,
        cmem_symbols=tuple(request.cmem_args),
        arguments=len(request.arguments),
        tolerance=request.atol,
        render=request.render,
        options={
            i: a.index for i, a in enumerate(request.arguments) if isinstance(a, TunableArgument)
        },
    )


def study_problem(request: KernelRequest) -> KernelProblem:
    """The problem that keys the study: sizes, the arguments' signature and the launch."""
    return KernelProblem(*fixed_sizes(request), args=signature(request), launch=launch(request))


# -- the launch conventions, stored with the study -------------------------------------------


def launch(request: KernelRequest) -> str:
    """The launch conventions that are not Kernel Tuner's defaults (block size names, grid
    divisors, dynamic shared memory, defines, a problem size given as expressions), as canonical
    JSON: "" when all are defaults. Stored in the study's shape, so that an export can compute
    each configuration's grid, block and defines from the store alone; part of the key, since
    another grid divisor or define is another kernel launch. A function is stored by name only
    (the export then refers the user to tuned_kernel)."""
    found: dict[str, Any] = {}
    if tuple(request.block_size_names) != DEFAULT_BLOCK_SIZE_NAMES:
        found["block_size_names"] = list(request.block_size_names)
    if any(d is not None for d in request.grid_div):
        found["grid_div"] = [_plain(d) for d in request.grid_div]
    if request.smem_size is not None:
        found["smem_size"] = _plain(request.smem_size)
    if request.defines is not None:
        found["defines"] = {str(k): _plain(v) for k, v in request.defines.items()}
    size = request.problem_size
    if callable(size) or not all(isinstance(s, int) for s in size):
        found["problem_size"] = _plain(size)
    return json.dumps(found, sort_keys=True, separators=(",", ":")) if found else ""


def stored_kernel(name: str, shape: Mapping[str, Any]) -> GivenKernel:
    """A stored study's family, for its plans only (no source, no space): from the shape the
    store holds (X, Y, Z, args, launch). LaunchUnknown where a convention is a function."""
    given = json.loads(shape.get("launch") or "{}")
    for what, value in given.items():
        if _has_function(value):
            raise LaunchUnknown(
                f"its {what} is a Python function ({_function_names(value)}), which the store "
                "cannot evaluate; autotune.kt.tuned_kernel computes it from the call"
            )
    sizes = given.get("problem_size") or [shape.get(n, 1) for n in ("X", "Y", "Z")]
    grid_div = tuple(given.get("grid_div") or (None, None, None))
    return GivenKernel(
        name,
        Path(f"{name}.cu"),
        None,  # type: ignore[arg-type]
        problem_size=sizes,
        grid_div=grid_div,  # type: ignore[arg-type]
        block_size_names=given.get("block_size_names") or DEFAULT_BLOCK_SIZE_NAMES,
        defines=given.get("defines"),
        smem_size=given.get("smem_size"),
    )


def _plain(value: Any) -> Any:
    if callable(value):
        return {"function": getattr(value, "__qualname__", type(value).__name__)}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return str(value)  # as GivenKernel passes such a define: its text


def _has_function(value: Any) -> bool:
    if isinstance(value, dict):
        return "function" in value or any(_has_function(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_function(v) for v in value)
    return False


def _function_names(value: Any) -> str:
    if isinstance(value, dict):
        if "function" in value:
            return str(value["function"])
        return ", ".join(_function_names(v) for v in value.values() if _has_function(v))
    return ", ".join(_function_names(v) for v in value if _has_function(v))


__all__ = [
    "LaunchUnknown",
    "compile_options",
    "given_kernel",
    "launch",
    "source_file",
    "stored_kernel",
    "study_problem",
]
