"""run_kernel: Kernel Tuner's other entry point. One configuration of a kernel, run once on the
GPU, and its arguments returned as the run left them: how a Kernel Tuner script computes its
answer with a reference kernel, and how its tests check a kernel. The kernel is compiled as
tune_kernel compiles it (kt/study.py: NVRTC, Kernel Tuner's defines and launch conventions) and
launched in the caller's process; nothing is timed or stored.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import numpy as np

from autotune.gpu.compiler import DEFAULT_CACHE, Compiler, lowered_plan
from autotune.gpu.evaluator import no_gpu_reason
from autotune.gpu.jobs import NoGpu
from autotune.gpu.nvrtc_library import CompileError
from autotune.kt import api
from autotune.kt.arguments import TuneKernelError, check_request
from autotune.kt.arrays import TunableArgument
from autotune.kt.kernel import DEFAULT_BLOCK, DEFAULT_BLOCK_SIZE_NAMES, GivenKernelError
from autotune.kt.study import compile_options, given_kernel, study_problem
from autotune.kt.tuned import loaded_entry
from autotune.model.space import Config


def run_kernel(
    kernel_name,
    kernel_source,
    problem_size,
    arguments,
    params,
    grid_div_x=None,
    grid_div_y=None,
    grid_div_z=None,
    lang=None,
    device=0,
    platform=0,
    smem_args=None,
    cmem_args=None,
    texmem_args=None,
    compiler=None,
    compiler_options=None,
    defines=None,
    block_size_names=None,
    quiet=False,
    log=None,
    *,
    compiler_cache: Path | None = DEFAULT_CACHE,
) -> list:
    """Run the kernel once at the configuration `params` (a dict of single values) as Kernel
    Tuner's run_kernel does, with its arguments and their meaning: the arrays are copied to the
    GPU, the kernel launched with Kernel Tuner's grid and block for that configuration, and every
    argument returned after the run, arrays as NumPy arrays, scalars as given. A kernel that
    does not compile, or a launch that fails, raises. `compiler_cache`: the cubin cache
    directory (None for none). `quiet` is taken and has nothing to silence."""
    try:
        request = _request(locals(), params)
    except TuneKernelError as err:  # the checks are tune_kernel's; the call is this one
        raise TuneKernelError(str(err).replace("tune_kernel:", "run_kernel:", 1)) from None
    if any(isinstance(a, TunableArgument) for a in request.arguments):
        raise TuneKernelError("run_kernel: a Tunable argument needs tune_kernel; pass its array")
    from autotune.gpu import launch  # CuPy's runtime, only now

    cp = launch.cp
    if cp is None:
        raise NoGpu("run_kernel needs CuPy and a CUDA GPU: pip install 'autotune-dse[cuda13]'")
    try:
        gpu = cp.cuda.Device(request.device)
        capability = gpu.compute_capability
    except Exception as err:  # no driver, no device of that index
        reason = no_gpu_reason(f"{type(err).__name__}: {err}")
        raise NoGpu(f"run_kernel: no usable CUDA GPU {request.device}: {reason}") from None
    family = given_kernel(request, None, api.CACHE_ROOT / "tune_kernel")
    config = Config.of({name: values[0] for name, values in request.tune_params.items()})
    try:
        plan = family.plan(study_problem(request), config)
    except GivenKernelError as err:
        raise TuneKernelError(f"run_kernel: {err}") from None
    # In the caller's process: NVRTC's signal handlers would end it on a Ctrl-C mid-compile.
    nvrtc = Compiler(cache_dir=compiler_cache, options=compile_options(request), in_children=True)
    nvrtc.arch = f"sm_{capability}"
    try:
        compiled = nvrtc.compile(plan)
    except CompileError as err:
        raise CompileError(f"run_kernel: {request.kernel_name} did not compile: {err}") from None
    (entry,) = lowered_plan(plan, compiled).launches
    with gpu:
        _, function = loaded_entry(
            launch,
            compiled.cubin,
            entry.kernel,
            entry.smem_bytes,
            tuple(request.cmem_args.items()),
        )
        on_gpu = [cp.asarray(a) if isinstance(a, np.ndarray) else a for a in request.arguments]
        function(entry.grid, entry.block, tuple(on_gpu), shared_mem=entry.smem_bytes)
        cp.cuda.get_current_stream().synchronize()
        return [cp.asnumpy(a) if isinstance(a, cp.ndarray) else a for a in on_gpu]


def _request(args: dict[str, Any], params: Any):
    """tune_kernel's checked request for one configuration: `params` as tune_params of one
    value each (none given: Kernel Tuner's default block size)."""
    if not isinstance(params, dict):
        raise TuneKernelError("run_kernel: params must be a dict of one value a tunable")
    if not params:
        names = args.get("block_size_names") or DEFAULT_BLOCK_SIZE_NAMES
        params = {names[0]: DEFAULT_BLOCK[0]}
    listed = {}
    for name, value in params.items():
        if isinstance(value, list | tuple | np.ndarray):
            raise TuneKernelError(
                f"run_kernel: params[{name!r}] must be one value, not {type(value).__name__} "
                "(tune_kernel takes lists)"
            )
        listed[name] = [value]
    call = inspect.signature(api.tune_kernel).bind_partial(
        args["kernel_name"], args["kernel_source"], args["problem_size"], args["arguments"], listed
    )
    for name in inspect.signature(run_kernel).parameters:
        if name in call.signature.parameters and name not in call.arguments and name in args:
            call.arguments[name] = args[name]
    call.apply_defaults()
    return check_request(call.arguments)


__all__ = ["run_kernel"]
