"""The compile-ahead pipeline: hand-off order, process-pool compiles, the shared cubin cache and
the GPU busy fraction, against a synthetic evaluator."""

from __future__ import annotations

import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from autotune.families.direct_naive import DirectNaive
from autotune.gpu.compiler import CompileError, Compiler
from autotune.model.problem import ConvProblem
from autotune.model.space import DeviceLimits
from autotune.store import Store
from autotune.tuning.pipeline import next_ready
from autotune.tuning.runners import GpuRunner
from autotune.tuning.studies import plan_studies
from autotune.tuning.tuner import Tuner

PROBLEM = ConvProblem(N=29, K=5, C=7, F=9)


def _done(value) -> Future:
    future: Future = Future()
    future.set_result(value)
    return future


def test_next_ready_takes_the_first_finished_keeping_ask_order() -> None:
    slow: Future = Future()
    pending = deque([("a", slow), ("b", _done(2)), ("c", _done(3))])
    assert next_ready(pending)[0] == "b"  # "a" still compiles: the GPU does not wait for it
    assert next_ready(pending)[0] == "c"
    with ThreadPoolExecutor(1) as pool:
        pool.submit(lambda: (time.sleep(0.05), slow.set_result(1)))
        assert next_ready(pending)[0] == "a"  # nothing finished: waits for the first
    assert not pending
    with pytest.raises(IndexError):
        next_ready(pending)


def test_next_ready_with_everything_finished_is_fifo() -> None:
    pending = deque((name, _done(name)) for name in "abcdef")
    assert [next_ready(pending)[0] for _ in range(6)] == list("abcdef")


def _studies():
    studies, _ = plan_studies([(DirectNaive(), PROBLEM)], DeviceLimits())
    return studies


def test_process_pool_campaign_loses_and_repeats_nothing(tmp_path, synthetic_evaluator) -> None:
    compiler = Compiler(cache_dir=tmp_path / "cubins")
    store = Store(str(tmp_path / "t.db"))
    (study,) = _studies()
    tuner = Tuner(
        GpuRunner(compiler, synthetic_evaluator, processes=True), store, strategy="random", jobs=2
    )
    outcome = tuner.run([study], budget=12)
    keys = [tuple(sorted(j.plan.defines)) for j in synthetic_evaluator.jobs]
    stored = store.evaluations(tuner.device_id, "direct_naive", PROBLEM)
    assert outcome.evaluated == len(stored) == 12
    search, confirmed = keys[: outcome.evaluated], keys[outcome.evaluated :]
    assert len(set(search)) == len(search)  # launched configs: no duplicates
    assert len(confirmed) == 2 and set(confirmed) <= set(search)  # then the best, twice more
    launched = {dict(k)["BLOCK_X"] for k in keys}
    assert launched <= {c["BLOCK_X"] for c in study.space}
    assert compiler._pool is None  # the pool goes with the campaign
    # The busy fraction is the tuner's own figure: evaluate() time over the wall time.
    assert outcome.gpu_busy_fraction is not None and 0 < outcome.gpu_busy_fraction <= 1
    assert 0 < outcome.gpu_busy_s <= outcome.compile_wall_s <= outcome.elapsed_s

    # A second campaign on the same cache compiles nothing: the cubins come from disk.
    cubins = sorted((tmp_path / "cubins").glob("*.cubin"))
    assert len(cubins) >= 12 and not list((tmp_path / "cubins").glob("*.tmp"))
    again = Tuner(
        GpuRunner(Compiler(cache_dir=tmp_path / "cubins"), synthetic_evaluator, processes=True),
        Store(str(tmp_path / "u.db")),
        strategy="random",
        jobs=2,
    )
    before = {p: p.stat().st_mtime_ns for p in cubins}
    assert again.run([study], budget=12).evaluated == 12
    assert {p: p.stat().st_mtime_ns for p in cubins} == before  # read, never rewritten


def test_process_pool_compile_matches_in_process(tmp_path) -> None:
    plan = DirectNaive().plan(PROBLEM, next(iter(_studies()[0].space)))
    alone = Compiler().compile(plan)
    pooled = Compiler()
    pooled.start_pool(2)
    try:
        remote = pooled.compile(plan)
    finally:
        pooled.stop_pool()
    assert remote.resources == alone.resources and remote.key == alone.key
    assert remote.cubin[:4] == b"\x7fELF"


# About 6 s of ptxas on one core: 1,024 dependent multiply-adds with address arithmetic.
SLOW_SOURCE = """
#define R4(s) s s s s
#define R256(s) R4(R4(R4(R4(s))))
extern "C" __global__ void slow(float* x) {
    float a = x[threadIdx.x];
    unsigned i = threadIdx.x;
    R256(R4(a = a * 1.0001f + x[i & 1023]; i = i * 1103515245u + 12345u;))
    x[threadIdx.x] = a;
}
"""


def test_stopping_the_pool_mid_compile_ends_its_processes_and_threads_at_once(tmp_path) -> None:
    # A stop on Ctrl-C must leave nothing of the pool running, and must not wait for NVRTC.
    source = tmp_path / "slow.cu"
    source.write_text(SLOW_SOURCE)
    compiler = Compiler()
    compiler.start_pool(2)
    pool = compiler._pool
    with ThreadPoolExecutor(1) as caller:
        compiling = caller.submit(compiler.compile_source, source, ())
        deadline = time.monotonic() + 30
        while not pool._children and time.monotonic() < deadline:  # the worker has started
            time.sleep(0.01)
        time.sleep(1.0)  # and is inside NVRTC
        assert not compiling.done()
        workers = [child.proc for child in pool._children]
        threads = list(pool._threads)
        start = time.monotonic()
        compiler.stop_pool()
        took = time.monotonic() - start
        with pytest.raises(CompileError, match="pool was stopped"):
            compiling.result(timeout=30)
    assert took < 3, f"stop_pool waited {took:.1f} s for the compile in flight"
    assert workers and all(w.poll() is not None for w in workers)
    assert threads and not any(t.is_alive() for t in threads)
    assert compiler._pool is None


def test_cache_key_holds_everything_that_changes_the_binary() -> None:
    base = Compiler(arch="sm_90")
    base._version = "13.0"
    text, defines = "__global__ void k() {}", (("A", 1), ("B", 2))
    key = base.cache_key(text, defines)
    assert base.cache_key(text, tuple(reversed(defines))) == key  # order of defines is no change
    assert base.cache_key(text, defines, (), False, ()) == key  # no ptxas options: as before
    changed = [
        base.cache_key(text + " ", defines),
        base.cache_key(text, (("A", 1), ("B", 3))),
        _with_version(Compiler(arch="sm_80")).cache_key(text, defines),
        _with_version(Compiler(options=("-std=c++17",))).cache_key(text, defines),
        _with_version(Compiler(), "13.1").cache_key(text, defines),
        base.cache_key(text, defines, ptxas_options=("--register-usage-level=10",)),
    ]
    assert key not in changed and len(set(changed)) == len(changed)


def _with_version(compiler: Compiler, version: str = "13.0") -> Compiler:
    compiler._version = version
    return compiler
