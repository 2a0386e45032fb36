"""A timeline of one `tune_kernel` call as Kernel Tuner's vector_add example makes it (15
configurations, 10 M floats, brute force, a new results database), with the GPU opened in this
process (tune_kernel's default) or, given `isolate`, in a worker process: when the GPU was
ready, the store's modules landed, the store opened, the tuner ran, each compile and evaluation,
the pools stopped and the session closed, in seconds from the call's start, with the thread
each ran on. (Session 50's copy, ../20261130b/, timed the worker alone.)
On the GPU machine, from the checkout root:
    python3 results/h200/20261130c/kt_call_timeline.py [isolate]"""

import functools
import sys
import threading
import time

import numpy

from autotune import tune_kernel
from autotune.gpu.compiler import Compiler
from autotune.gpu.evaluator import GpuEvaluator, InProcessEvaluator
from autotune.tuning.session import Session
from autotune.tuning.tuner import Tuner

SOURCE = """
__global__ void vector_add(float *c, float *a, float *b, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""
T0 = time.perf_counter()
SPANS: list[tuple[str, str, float, float]] = []


def traced(owner, name, label=None):
    original = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            SPANS.append(
                (label or name, threading.current_thread().name, start, time.perf_counter())
            )

    setattr(owner, name, wrapper)


def watch_modules(names, stop):
    """When each module first appears in sys.modules (polled every 2 ms)."""
    while not stop.is_set() and names:
        for name in [n for n in names if n in sys.modules]:
            now = time.perf_counter()
            SPANS.append((f"module {name} present", "poll", now, now))
            names.remove(name)
        time.sleep(0.002)


if __name__ == "__main__":
    for owner, name in [
        (GpuEvaluator, "__init__"),
        (GpuEvaluator, "_handshake"),
        (GpuEvaluator, "evaluate"),
        (GpuEvaluator, "close"),
        (InProcessEvaluator, "_open"),
        (InProcessEvaluator, "_ready"),
        (InProcessEvaluator, "evaluate"),
        (InProcessEvaluator, "close"),
        (Compiler, "compile_source"),
        (Session, "close"),
        (Tuner, "run"),
        (Tuner, "_start_pools"),
        (Tuner, "_stop_pools"),
        (Tuner, "_history"),
    ]:
        traced(owner, name, f"{owner.__name__}.{name}")
    size = 10_000_000
    a = numpy.random.randn(size).astype(numpy.float32)
    b = numpy.random.randn(size).astype(numpy.float32)
    args = [numpy.zeros_like(b), a, b, numpy.int32(size)]
    params = {"block_size_x": [128 + 64 * i for i in range(15)]}
    stop = threading.Event()
    poller = threading.Thread(
        target=watch_modules,
        args=(["sqlalchemy", "pandas", "autotune.store", "autotune.tuning.session"], stop),
    )
    poller.start()
    # The store's classes are traced once their module has loaded inside the call.
    import autotune.kt.api as api

    original_tune = api._tune

    def tune_traced(request, session, storage, started, *rest):
        from autotune.store.database import Store

        for name in ("evaluations", "finish_run", "record", "start_run", "close"):
            traced(Store, name, f"Store.{name}")
        SPANS.append(("session open (store and GPU ready)", "main", started, time.perf_counter()))
        return original_tune(request, session, storage, started, *rest)

    api._tune = tune_traced
    start = time.perf_counter()
    isolate = sys.argv[1:] == ["isolate"]
    results, env = tune_kernel(
        "vector_add", SOURCE, size, args, params, quiet=True, isolate=isolate
    )
    end = time.perf_counter()
    stop.set()
    poller.join()
    tuning = env["tuning_s"]
    where = "in a worker process" if isolate else "in this process"
    print(
        f"tune_kernel ({where}): {end - start:.3f} s wall; tuning_s {tuning:.3f}; "
        f"{len(results)} results\n"
    )
    groups: dict[str, list] = {}
    for span in SPANS:
        groups.setdefault(span[0], []).append(span)
    rows = []
    for label, spans in groups.items():
        first, last = min(s[2] for s in spans), max(s[3] for s in spans)
        total = sum(s[3] - s[2] for s in spans)
        threads = sorted({s[1].split("_")[0] for s in spans})
        rows.append((first, last, label, len(spans), total, ",".join(threads)))
    print("| what | calls | first start (s) | last end (s) | summed (s) | threads |")
    print("|---|--:|--:|--:|--:|---|")
    for first, last, label, n, total, threads in sorted(rows):
        span = f"{first - start:.3f} | {last - start:.3f}"
        print(f"| {label} | {n} | {span} | {total:.3f} | {threads} |")
