"""tune_kernel: Kernel Tuner's entry point, run by our tuner (compile, verify, time, store).

A Kernel Tuner script runs after changing `from kernel_tuner import tune_kernel` to
`from autotune import tune_kernel`: the arguments keep Kernel Tuner 1.5's meaning (kt/arguments.py),
the kernel becomes a family of its own (kt/kernel.py) and a study of the problem kind
`kernel`, keyed by kernel name, problem size and the arguments' dtypes and shapes, so a second
call resumes from the results database instead of measuring again. What comes back is what
Kernel Tuner returns: a list of result dicts and an environment dict.
"""

from __future__ import annotations

import math
import shutil
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune import __version__
from autotune.gpu.child import start_ahead
from autotune.gpu.compiler import NVRTC_IN_A_CHILD
from autotune.gpu.evaluator import GpuEvaluator, InProcessEvaluator
from autotune.gpu.given import (
    GivenCheck,
    argument_arrays,
    hold_arguments,
    option_buffer,
    release_arguments,
    user_verify,
    write_arguments,
)
from autotune.kt.arguments import KernelRequest, TuneKernelError, check_request
from autotune.kt.arrays import TunableArgument
from autotune.kt.kernel import GivenKernelError
from autotune.kt.observers import observed_keys, output_check, output_keys
from autotune.kt.space import bind_space, evaluate_metric
from autotune.kt.strategies import budget
from autotune.kt.study import compile_options, given_kernel, study_problem, timing_policy
from autotune.model.evaluator import Evaluator
from autotune.model.records import TIMING_PROTOCOL, Status
from autotune.tuning.pipeline import compile_jobs
from autotune.tuning.studies import Study

if TYPE_CHECKING:
    from autotune.tuning.session import Session

CACHE_ROOT = Path.home() / ".cache" / "autotune"  # the CLI's cubin cache is cubins/ under it

# The store's modules (SQLAlchemy: kt.cache, kt.cache_file, store, tuning.session) are imported
# inside the functions, after tune_kernel has started opening the GPU, so that it opens while
# they load: `from autotune import tune_kernel` leaves them out.


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
    storage: str | None = None,
    isolate: bool = False,
    evaluator: Evaluator | None = None,
    compiler_cache: Path | None = CACHE_ROOT / "cubins",
):
    """Tune a CUDA kernel as Kernel Tuner's tune_kernel does (same arguments, same meaning, same
    return value: results, env), through autotune's tuner. Beyond Kernel Tuner's: `storage` (the
    results database, resume comes from there; store/location.py's default when None),
    `isolate` (run the kernels in a GPU worker process of their own rather than in this
    process, as Kernel Tuner runs them: a kernel that hangs is then stopped after the tuner's
    time limit, and one that corrupts its CUDA context leaves this process's CUDA usable; the
    worker's start costs about 0.4 s more), `evaluator` (a stand-in for the GPU, for tests) and
    `compiler_cache` (the cubin cache directory, None for none). Without `isolate`, a kernel
    that corrupts the CUDA context is recorded as a crash and the configurations after it run
    in a worker process."""
    started = time.perf_counter()
    request = check_request(dict(locals()))  # every argument checked before the GPU starts
    if not isinstance(isolate, bool):
        raise TuneKernelError(f"tune_kernel: isolate must be True or False, not {isolate!r}")
    own_worker = evaluator is None
    if own_worker:
        # Either opens the GPU (on a thread here, or in the spawned worker) while this process
        # loads the store (SQLAlchemy and the store's modules: 0.3 s on the 2-core machine) and
        # opens the database. A worker's exit at the end is not waited for (0.3-0.4 s of a CUDA
        # context's teardown on the H200).
        evaluator = (
            GpuEvaluator(request.device, wait=False, exit_in_background=True)
            if isolate
            else InProcessEvaluator(request.device, wait=False)
        )
    # NVRTC in processes beside the GPU (its signal handlers would end the caller's process on
    # a Ctrl-C); in threads beside a test's stand-in evaluator.
    in_process = getattr(evaluator, "in_process", False)
    compile_processes = own_worker or in_process or isinstance(evaluator, GpuEvaluator)
    if compile_processes:
        # The compile pool's first children (as many as the tuner runs, no more than there are
        # configurations) start while the GPU opens (a worker boots in 1.2-1.7 s on the H200):
        # started with the first compile, each added 0.2-0.5 s before it.
        configurations = math.prod(len(values) for values in request.tune_params.values())
        start_ahead(NVRTC_IN_A_CHILD, min(configurations, compile_jobs()))
    try:
        from autotune.store import default_storage
        from autotune.tuning.session import open_gpu_session

        storage = storage or default_storage()
        session = open_gpu_session(
            storage,
            gpu=request.device,
            cache_dir=compiler_cache,
            evaluator=evaluator,
            options=compile_options(request),
            compile_processes=compile_processes,
        )
    except BaseException:
        if own_worker:
            evaluator.close()
        raise
    try:
        return _tune(request, session, storage, started, in_process)
    finally:
        if own_worker:
            session.close()
        else:  # the caller's stand-in stays theirs to close
            session.store.close()


def _tune(request: KernelRequest, session: Session, storage: str, started: float, in_process: bool):
    from autotune.kt.cache_file import entry_key, open_cache

    runner = session.runner
    info = runner.device
    root = CACHE_ROOT / "tune_kernel"
    space = bind_space(request, runner.limits)
    if not len(space):
        raise TuneKernelError("tune_kernel: no configuration of tune_params meets the restrictions")
    family = given_kernel(request, space.space, root)
    launched: set[str] = set()  # the buffers some configuration launches with
    try:  # a launch value that cannot be computed fails here, once, before any GPU work
        family.plan(None, space.configs[0])
        if family.options:  # every configuration must select one of its Tunables' arrays
            for config in space.configs:
                launched.update(family.launch_arguments(config.as_dict()))
    except GivenKernelError as err:
        raise TuneKernelError(f"tune_kernel: {err}") from None
    timing = timing_policy(request)
    # A Tunable argument travels as its options (gpu/given.py names each one's buffer), those
    # that no configuration selects left out (TunablePrecision converts to bfloat16 too, where
    # ml_dtypes is installed: a dtype that neither the archive nor CuPy may take).
    given = [
        tuple(v if option_buffer(i, j) in launched else None for j, (_, v) in enumerate(a.options))
        if isinstance(a, TunableArgument)
        else a
        for i, a in enumerate(request.arguments)
    ]
    content = argument_arrays(given, request.answer, request.cmem_args)
    if in_process:  # handed over in memory; a worker process maps them from files
        data, digest = None, hold_arguments(content)
    else:
        data, digest = write_arguments(root, content)
    del content
    try:
        count = len(request.arguments)
        check = GivenCheck(
            data=data,
            digest=digest,
            count=count,
            answered=tuple(i for i, a in enumerate(request.answer or ()) if a is not None),
            atol=request.atol,
            timing=timing,
            outputs_back=request.verify is not None or bool(request.output_observers),
        )
        # The caller's verify and output observers are called here, in their process, on the
        # outputs the worker sends.
        verify = None
        if request.verify is not None:
            verify = user_verify(request.verify, request.answer, count, request.atol)
        verify = output_check(request.output_observers, verify, request.answer)
        problem = study_problem(request)
        study = Study(family, problem, space, check=check, verify=verify, objective=_told(request))
        cache = open_cache(request, session, family, problem, space) if request.cache else None
        new: dict[str, dict] = {}

        def progress(p) -> None:
            if p.event == "eval" and p.last is not None:
                row = _result(p.config, p.last, request)
                new[p.config.to_json()] = row
                if cache is not None:
                    cache.append(entry_key(row, list(request.tune_params)), row)
                if not request.quiet:
                    print(_line(row, request))

        # Kernel Tuner's contract: the caller gets each configuration's measurement and picks
        # from them (by its objective, which need not be time); measuring one again would
        # spend its GPU time on what it never reads.
        tuner = session.tuner(
            f"tune_kernel {request.kernel_name}",
            strategy=request.strategy,
            seed=request.seed or 0,
            timing=timing,
            on_progress=progress,
            confirm_best=False,
        )
        try:
            outcome = tuner.run([study], budget(request, len(space)), request.time_limit_s)
        finally:
            stored = session.store.evaluations(
                session.device_id,
                family.name,
                problem,
                runner.protocol,
                kernel_digest=runner.kernel_digest(family),
            )
            if cache is not None:  # every stored result, those of earlier calls too, then closed
                for h in stored:
                    key = entry_key(h.config.as_dict(), list(request.tune_params))
                    if h.config.to_json() not in new and key not in cache.entries:
                        cache.append(key, _result(h.config, h, request))
                cache.close()
        results = [
            new.get(h.config.to_json()) or _result(h.config, h, request, stored=True)
            for h in stored
            if space.is_valid(h.config)
        ]
        env = _environment(request, info, runner, outcome, results, storage, problem, started)
        if results and not request.quiet and "best_config" in env:
            print(f"best performing configuration: {_line(env['best_config'], request)}")
        return results, env
    finally:
        # Only this call's session reads the arguments; gigabytes of them must not pile up.
        if data is None:
            release_arguments(digest)
        else:
            shutil.rmtree(data, ignore_errors=True)


def _result(config, m, request: KernelRequest, stored: bool = False) -> dict[str, Any]:
    """One of Kernel Tuner's result dicts: the tunables, time (ms; our median under timing
    protocol 2) and times, or the failure's class name as its time; plus status and error."""
    from autotune.kt.cache import FAILED, RuntimeFailedConfig

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
    row.update(observed_keys(m, request.observables))
    if timed and request.metrics:
        values = dict(row)
        for name, metric in request.metrics.items():
            values[name] = row[name] = evaluate_metric(metric, values)
    return row


def _told(request: KernelRequest):
    """The value the strategy is told for an objective other than time (lower is better):
    the result dict's objective, its reciprocal where higher is better; None without one."""
    if request.objective == "time":
        return None

    def told(config, m) -> float | None:
        value = _result(config, m, request).get(request.objective)
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            return None
        return 1.0 / value if request.higher_is_better else float(value)

    return told


def _line(row: dict, request: KernelRequest) -> str:
    observed = [k for k in request.observables if k != "power_readings"]
    observed += output_keys(request.output_observers)
    keys = [*request.tune_params, "time", *observed, *(request.metrics or {})]
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
        "objective": request.objective,
        "objective_higher_is_better": request.higher_is_better,
        "timing_protocol": TIMING_PROTOCOL,
        "storage": storage,
        "study": f"{request.kernel_name} {problem.key}",
        "evaluations": len(results),
        "new_evaluations": sum(1 for r in results if not r.get("stored")),
        "tuning_s": outcome.elapsed_s,
        "stopped": [s.stopped for s in outcome.studies if s.stopped],
        "autotune_version": __version__,
    }
    scored = [r for r in ok if isinstance(r.get(request.objective), int | float)]
    if scored:
        pick = max if request.higher_is_better else min
        env["best_config"] = pick(scored, key=lambda r: r[request.objective])
    env["total_compile_time"] = sum(r["compile_time"] for r in results if not r.get("stored"))
    env["overhead_time"] = 1e3 * (time.perf_counter() - started)
    return env


__all__ = ["TuneKernelError", "tune_kernel"]
