"""tune_kernel: Kernel Tuner's entry point, run by our tuner (compile, verify, time, store).

A Kernel Tuner script runs after changing `from kernel_tuner import tune_kernel` to
`from autotune import tune_kernel`: the arguments keep Kernel Tuner 1.5's meaning (kt/arguments.py),
the kernel becomes a family of its own (kt/kernel.py) and a study of the problem kind
`kernel`, keyed by kernel name, problem size and the arguments' dtypes and shapes, so a second
call resumes from the results database instead of measuring again. What comes back is what
Kernel Tuner returns: a list of result dicts and an environment dict.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from autotune import __version__
from autotune.gpu.compiler import DEFAULT_OPTIONS
from autotune.gpu.evaluator import GpuEvaluator
from autotune.gpu.given import GivenCheck, user_verify, write_arguments
from autotune.gpu.timing import TimingPolicy
from autotune.kt.arguments import KernelRequest, TuneKernelError, budget, check_request
from autotune.kt.cache import kt_cache
from autotune.kt.kernel import GivenKernel, GivenKernelError, with_c_linkage, write_source
from autotune.kt.space import bind_space, evaluate_metric, fixed_sizes, signature
from autotune.model.evaluator import Evaluator
from autotune.model.problem import KernelProblem
from autotune.model.records import TIMING_PROTOCOL, Status
from autotune.replay.recording import Outcome, RecordedStudy
from autotune.tuning.session import Session, open_gpu_session
from autotune.tuning.studies import Study

DEFAULT_STORAGE = "results/autotune.db"  # the CLI's default (cli/options.py)
CACHE_ROOT = Path.home() / ".cache" / "autotune"  # the CLI's cubin cache is cubins/ under it


class ErrorConfig(str):
    """A failed configuration's "time", as Kernel Tuner writes it: its error class's name."""

    def __new__(cls) -> ErrorConfig:
        return super().__new__(cls, cls.__name__)


class InvalidConfig(ErrorConfig):
    pass


class CompilationFailedConfig(ErrorConfig):
    pass


class RuntimeFailedConfig(ErrorConfig):
    pass


class VerificationFailedConfig(ErrorConfig):
    """Kernel Tuner stops the whole run on a wrong result; autotune records it and goes on."""


FAILED = {
    Status.COMPILE_ERROR: CompilationFailedConfig,
    Status.RESOURCES: InvalidConfig,
    Status.WRONG_RESULT: VerificationFailedConfig,
}


def tune_kernel(
    kernel_name,
    kernel_source,
    problem_size,
    arguments,
    tune_params,
    grid_div_x=None,
    grid_div_y=None,
    grid_div_z=None,
    restrictions=None,
    answer=None,
    atol=1e-6,
    verify=None,
    verbose=False,
    lang=None,
    device=0,
    platform=0,
    smem_args=None,
    cmem_args=None,
    texmem_args=None,
    compiler=None,
    compiler_options=None,
    defines=None,
    log=None,
    iterations=7,
    block_size_names=None,
    quiet=False,
    strategy=None,
    strategy_options=None,
    cache=None,
    metrics=None,
    simulation_mode=None,
    parallel=None,
    observers=None,
    objective=None,
    objective_higher_is_better=None,
    objectives=None,
    seed=None,
    *,
    storage: str = DEFAULT_STORAGE,
    evaluator: Evaluator | None = None,
    compiler_cache: Path | None = CACHE_ROOT / "cubins",
):
    """Tune a CUDA kernel as Kernel Tuner's tune_kernel does (same arguments, same meaning, same
    return value: results, env), through autotune's tuner. Beyond Kernel Tuner's: `storage` (the
    results database; resume comes from there), `evaluator` (a stand-in for the GPU worker, for
    tests) and `compiler_cache` (the cubin cache directory, None for none)."""
    started = time.perf_counter()
    request = check_request(dict(locals()))  # every argument checked before the GPU starts
    options = (*DEFAULT_OPTIONS, *request.compiler_options)
    if request.include_dir is not None:
        options += (f"-I{request.include_dir}",)
    own_worker = evaluator is None
    session = open_gpu_session(
        storage,
        gpu=request.device,
        cache_dir=compiler_cache,
        evaluator=evaluator,
        options=options,
        # NVRTC in processes beside a GPU worker process; threads for a stand-in in this one.
        compile_processes=own_worker or isinstance(evaluator, GpuEvaluator),
    )
    try:
        return _tune(request, session, storage, started)
    finally:
        if own_worker:
            session.close()
        else:  # the caller's stand-in stays theirs to close
            session.store.close()


def _tune(request: KernelRequest, session: Session, storage: str, started: float):
    runner = session.runner
    info = runner.device
    root = CACHE_ROOT / "tune_kernel"
    space = bind_space(request, runner.limits)
    if not len(space):
        raise TuneKernelError("tune_kernel: no configuration of tune_params meets the restrictions")
    family = GivenKernel(
        request.kernel_name,
        _source_file(request, root),
        space.space,
        problem_size=request.problem_size,
        grid_div=request.grid_div,
        block_size_names=request.block_size_names,
        defines=request.defines,
        smem_size=request.smem_size,
        cmem_symbols=tuple(request.cmem_args),
        arguments=len(request.arguments),
        tolerance=request.atol,
        render=request.render,
    )
    try:  # a launch value that cannot be computed fails here, once, before any GPU work
        family.plan(None, space.configs[0])
    except GivenKernelError as err:
        raise TuneKernelError(f"tune_kernel: {err}") from None
    timing = TimingPolicy(min_repeats=request.iterations)
    data, digest = write_arguments(root, request.arguments, request.answer, request.cmem_args)
    count = len(request.arguments)
    check = GivenCheck(
        data=data,
        digest=digest,
        count=count,
        answered=tuple(i for i, a in enumerate(request.answer or ()) if a is not None),
        atol=request.atol,
        timing=timing,
        outputs_back=request.verify is not None,
    )
    # The caller's verify is called here, in their process, on the outputs the worker sends.
    verify = None
    if request.verify is not None:
        verify = user_verify(request.verify, request.answer, count, request.atol)
    problem = KernelProblem(*fixed_sizes(request), args=signature(request))
    study = Study(family, problem, space, check=check, verify=verify)
    new: dict[str, dict] = {}

    def progress(p) -> None:
        if p.event == "eval" and p.last is not None:
            row = _result(p.config, p.last, request)
            new[p.config.to_json()] = row
            if not request.quiet:
                print(_line(row, request))

    tuner = session.tuner(
        f"tune_kernel {request.kernel_name}",
        strategy=request.strategy,
        seed=request.seed or 0,
        timing=timing,
        on_progress=progress,
    )
    try:
        outcome = tuner.run([study], budget(request, len(space)), request.time_limit_s)
    finally:
        # Only this call's worker reads the file; arguments of gigabytes must not pile up.
        data.unlink(missing_ok=True)
    stored = session.store.evaluations(session.device_id, family.name, problem, runner.protocol)
    results = [
        new.get(h.config.to_json()) or _result(h.config, h, request, stored=True)
        for h in stored
        if space.is_valid(h.config)
    ]
    env = _environment(request, info, runner, outcome, results, storage, problem, started)
    if results and not request.quiet and "best_config" in env:
        print(f"best performing configuration: {_line(env['best_config'], request)}")
    if request.cache is not None:
        _write_cache(request, info.name, stored, problem)
    return results, env


def _source_file(request: KernelRequest, root: Path) -> Path:
    """The kernel's text with C linkage, saved under the digest of that text (a generator's:
    its text at the first value of every tunable, which keys the study)."""
    return write_source(root, request.kernel_name, with_c_linkage(request.source_text))


def _result(config, m, request: KernelRequest, stored: bool = False) -> dict[str, Any]:
    """One of Kernel Tuner's result dicts: the tunables, time (ms; our median under timing
    protocol 2) and times, or the failure's class name as its time; plus status and error."""
    row: dict[str, Any] = {k: config[k] for k in request.tune_params}
    timed = m.status in (Status.OK, Status.SLOW) and m.time_ms is not None
    if timed:
        row["time"] = float(m.time_ms)
        row["times"] = list(getattr(m, "samples_ms", ()) or (m.time_ms,))
    else:
        row["time"] = FAILED.get(m.status, RuntimeFailedConfig)()
    compile_s = getattr(m, "compile_s", None)
    row["compile_time"] = 1e3 * compile_s if compile_s else 0.0
    # Kernel Tuner's other per-configuration timings (ms), which its helpers (store_output_file)
    # read: the time spent in timed runs is the samples' sum; the check, the framework and the
    # strategy are not timed per configuration here (0).
    row["verification_time"] = 0.0
    row["benchmark_time"] = float(sum(row["times"])) if timed else 0.0
    row["framework_time"] = 0.0
    row["strategy_time"] = 0.0
    row["status"] = m.status.value
    if m.error:
        row["error"] = m.error
    if stored:
        row["stored"] = True  # measured by an earlier call (resumed), not this one
    row["timestamp"] = datetime.now(timezone.utc).isoformat()
    if timed and request.metrics:
        values = dict(row)
        for name, metric in request.metrics.items():
            values[name] = row[name] = evaluate_metric(metric, values)
    return row


def _line(row: dict, request: KernelRequest) -> str:
    keys = [*request.tune_params, "time", *(request.metrics or {})]
    parts = []
    for k in keys:
        if k in row:
            v = row[k]
            parts.append(f"{k}={v:.3f}ms" if k == "time" and isinstance(v, float) else f"{k}={v}")
    return ", ".join(parts)


def _environment(request, info, runner, outcome, results, storage, problem, started) -> dict:
    ok = [r for r in results if isinstance(r["time"], float) and r["status"] == Status.OK.value]
    env: dict[str, Any] = {
        "device_name": info.name,
        "compute_capability": info.compute_capability,
        "sm_count": info.sm_count,
        "driver_version": info.driver_version,
        "nvrtc_version": runner.compiler_version,
        "iterations": request.iterations,
        "compiler_options": list(runner.compiler.options),
        "block_size_names": list(request.block_size_names),
        "problem_size": request.problem_size if not callable(request.problem_size) else "callable",
        "strategy": request.strategy,
        "objective": "time",
        "timing_protocol": TIMING_PROTOCOL,
        "storage": storage,
        "study": f"{request.kernel_name} {problem.key}",
        "evaluations": len(results),
        "new_evaluations": sum(1 for r in results if not r.get("stored")),
        "tuning_s": outcome.elapsed_s,
        "stopped": [s.stopped for s in outcome.studies if s.stopped],
        "autotune_version": __version__,
    }
    if ok:
        env["best_config"] = min(ok, key=lambda r: r["time"])
    env["total_compile_time"] = sum(r["compile_time"] for r in results if not r.get("stored"))
    env["overhead_time"] = 1e3 * (time.perf_counter() - started)
    return env


def _write_cache(request: KernelRequest, device: str, stored, problem) -> None:
    """Kernel Tuner's cache file of the study (every stored evaluation), for its own tools."""
    recorded = RecordedStudy(
        family=request.kernel_name,
        problem=problem,
        device=device,
        outcomes={h.config: Outcome(h.status, h.time_ms, h.error) for h in stored},
        tunables=list(request.tune_params.items()),
    )
    data = kt_cache(recorded, kernel_name=request.kernel_name)
    size = request.problem_size
    data["problem_size"] = "callable" if callable(size) else list(size)
    request.cache.parent.mkdir(parents=True, exist_ok=True)
    request.cache.write_text(json.dumps(data, indent=1))


__all__ = ["TuneKernelError", "tune_kernel"]
