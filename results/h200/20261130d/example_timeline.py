"""Where a Kernel Tuner example's tune_kernel calls spend their time, step by step, with the
kernels in this process (tune_kernel's default) or, given `isolate`, in a worker process (where
the steps inside the worker are not seen). For accuracy.py, whose wall time varied from 45.3 s
to 58.7 s between runs of the same code and configurations (../20261130c calls 2 and 4), and
which cProfile cannot split: on Python 3.12 it sees every thread's calls on one stack. Each
step's calls, first start and last end from the first call's start, summed seconds, threads.
From Kernel Tuner's examples/cuda directory:
    python3 .../example_timeline.py accuracy.py [isolate]"""

import contextlib
import functools
import io
import sys
import threading
import time
from pathlib import Path

import autotune
import autotune.gpu.session as gpu_session
import autotune.kt.api as api
from autotune.bench.kt_example_run import rewrite
from autotune.gpu.compiler import Compiler
from autotune.gpu.evaluator import GpuEvaluator, InProcessEvaluator
from autotune.gpu.given import GivenCheck
from autotune.tuning.tuner import Tuner

SPANS: list[tuple[str, str, float, float]] = []


def timed(function, label):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            SPANS.append((label, threading.current_thread().name, start, time.perf_counter()))

    return wrapper


def traced(owner, name, label=None):
    setattr(owner, name, timed(getattr(owner, name), label or f"{owner.__name__}.{name}"))


if __name__ == "__main__":
    script, isolate = sys.argv[1], sys.argv[2:] == ["isolate"]
    extra = {}
    if sys.argv[2:] == ["synthetic"]:  # a check of this script without a GPU
        from autotune.bench.kt_example_run import SYNTHETIC_SESSION

        extra["evaluator"] = InProcessEvaluator(session=SYNTHETIC_SESSION, wait=False)
    for owner, name in [
        (GpuEvaluator, "evaluate"),
        (InProcessEvaluator, "_open"),
        (InProcessEvaluator, "evaluate"),
        (gpu_session.GpuSession, "guarded"),
        (gpu_session.GpuSession, "_evaluate"),
        (gpu_session.GpuSession, "time_runs"),
        (gpu_session.GpuSession, "sync"),
        (GivenCheck, "arrays"),
        (GivenCheck, "_on_device"),
        (GivenCheck, "host_outputs"),
        (Compiler, "compile_source"),
        (Tuner, "run"),
    ]:
        traced(owner, name)
    traced(gpu_session, "load_module", "load_module")
    made = api.output_check

    def output_check(*args, **kwargs):  # the caller's observers and verify, on the outputs
        check = made(*args, **kwargs)
        return None if check is None else timed(check, "output observers and verify")

    api.output_check = output_check
    original_tune = api._tune

    def tune_traced(request, session, storage, started, *rest):
        from autotune.store.database import Store

        for name in ("record", "start_run", "finish_run"):
            traced(Store, name, f"Store.{name}")
        SPANS.append(("open (store and GPU ready)", "main", started, time.perf_counter()))
        return original_tune(request, session, storage, started, *rest)

    api._tune = tune_traced
    tune_kernel = autotune.tune_kernel
    walls = []

    def call(*args, **kwargs):
        kwargs.setdefault("quiet", True)
        start = time.perf_counter()
        results, env = tune_kernel(*args, isolate=isolate, **extra, **kwargs)
        walls.append((start, time.perf_counter(), env.get("tuning_s"), len(results)))
        return results, env

    autotune.tune_kernel = call
    text = rewrite(Path(script).read_text()).text
    script_start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):  # the script prints every result
        exec(compile(text, script, "exec"), {"__name__": "__main__"})
    script_end = time.perf_counter()
    where = "a worker process" if isolate else "this process"
    print(f"{script}, kernels in {where}: script {script_end - script_start:.2f} s")
    for start, end, tuning, count in walls:
        print(f"- a call: {count} results, {end - start:.2f} s wall, tuning_s {tuning:.2f}")
    t0 = walls[0][0]
    print("\n| what | calls | first start (s) | last end (s) | summed (s) | threads |")
    print("|---|--:|--:|--:|--:|---|")
    groups: dict[str, list] = {}
    for span in SPANS:
        groups.setdefault(span[0], []).append(span)
    rows = []
    for label, spans in groups.items():
        first, last = min(s[2] for s in spans), max(s[3] for s in spans)
        total = sum(s[3] - s[2] for s in spans)
        threads = ",".join(sorted({s[1].split("_")[0].split("-")[0] for s in spans}))
        rows.append((first, last, label, len(spans), total, threads))
    for first, last, label, n, total, threads in sorted(rows):
        print(f"| {label} | {n} | {first - t0:.3f} | {last - t0:.3f} | {total:.3f} | {threads} |")
