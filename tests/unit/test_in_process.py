"""The GPU opened in the caller's process (InProcessEvaluator, tune_kernel's default), with a
stand-in session in the GPU's place: it opens on a thread while the caller goes on, runs each
task here with the session's device current, and after an error that poisons the CUDA context
sends the remaining tasks to a worker process."""

from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager

import numpy as np
import pytest

from autotune.gpu.evaluator import GpuEvaluator, InProcessEvaluator
from autotune.gpu.jobs import NoGpu, StickyCudaError
from autotune.gpu.synthetic import NAME, SyntheticSession
from autotune.kt.arguments import TuneKernelError
from autotune.model.records import Status

SYNTHETIC = "autotune.gpu.synthetic:SyntheticSession"
SOURCE = """
__global__ void scale(float* y, const float* x, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
"""


class Pid:
    """A task answering with the process and thread it ran in, and the session's device."""

    def run(self, session):
        return os.getpid(), threading.get_ident(), getattr(session, "entered", None)


class SlowSession(SyntheticSession):
    """A session whose opening takes 1 s (a CUDA context's creation takes a few tenths), and
    which records the thread that made its device current."""

    def __init__(self, device_index: int = 0) -> None:
        time.sleep(1.0)
        super().__init__(device_index)
        self.entered = None

    @contextmanager
    def current(self):
        self.entered = threading.get_ident()
        yield
        self.entered = "left"


class PoisonedHere(SyntheticSession):
    """A session whose first task poisons the CUDA context of the test's own process only (a
    worker process's session answers normally)."""

    def evaluate(self, job):
        self.run_task()
        return super().evaluate(job)

    def run_task(self):
        if os.environ.get("POISON_PID") == str(os.getpid()):
            raise StickyCudaError("cudaErrorIllegalAddress: an illegal memory access")
        return os.getpid()


class PoisonTask:
    def run(self, session):
        return session.run_task()


class BrokenSession:
    def __init__(self, device_index: int = 0) -> None:
        raise RuntimeError("cudaErrorDevicesUnavailable: all CUDA-capable devices are busy")


def test_the_session_opens_on_a_thread_and_tasks_run_in_this_process_with_its_device():
    start = time.monotonic()
    evaluator = InProcessEvaluator(session=f"{__name__}:SlowSession", wait=False)
    try:
        assert time.monotonic() - start < 0.5  # the caller went on while it opens
        assert evaluator.device.name == NAME  # waited for on first use
        pid, thread, entered = evaluator.call(Pid(), timeout_s=5)
        assert pid == os.getpid() and thread == threading.get_ident()
        assert entered == threading.get_ident()  # the device current on the calling thread
        assert evaluator._ready()[0].entered == "left"  # and the caller's back after it
    finally:
        evaluator.close()


@pytest.mark.parametrize(
    "session, said",
    [
        ("tests.unit.test_worker_start:NoDriverSession", "no NVIDIA driver found"),
        (f"{__name__}:BrokenSession", "devices are busy"),
    ],
)
def test_no_gpu_is_said_on_first_use_and_again_when_asked_again(session, said):
    evaluator = InProcessEvaluator(session=session, wait=False)
    try:
        with pytest.raises(NoGpu, match=said):
            _ = evaluator.device
        with pytest.raises(NoGpu, match=said):
            evaluator.call(Pid(), timeout_s=5)
    finally:
        evaluator.close()


def test_a_poisoned_context_is_a_crash_and_the_remaining_tasks_go_to_a_worker(monkeypatch):
    monkeypatch.setenv("POISON_PID", str(os.getpid()))
    evaluator = InProcessEvaluator(session=f"{__name__}:PoisonedHere")
    try:
        with pytest.warns(RuntimeWarning, match="restart Python"):
            crashed = evaluator.call(PoisonTask(), timeout_s=30)
        assert crashed.status is Status.CRASH and "illegal memory access" in crashed.error
        assert "illegal" in evaluator.poisoned
        answered = [evaluator.call(PoisonTask(), timeout_s=60) for _ in range(2)]
        assert answered[0] == answered[1] != os.getpid()  # one worker process answers both
    finally:
        evaluator.close()


def test_an_unforeseen_error_of_a_task_is_a_crash_not_the_callers():
    class Fails:
        def run(self, session):
            raise ValueError("a task's own bug")

    with InProcessEvaluator(session=SYNTHETIC) as evaluator:
        crashed = evaluator.call(Fails(), timeout_s=5)
        assert crashed.status is Status.CRASH and "ValueError: a task's own bug" in crashed.error
        assert evaluator.poisoned is None


def test_tune_kernel_runs_in_this_process_unless_isolated(tmp_path, monkeypatch):
    import autotune.kt.api as api

    made = []

    def in_process(device, wait):
        made.append("here")
        return InProcessEvaluator(device, session=SYNTHETIC, wait=wait)

    def worker(device, wait, exit_in_background):
        made.append("worker")
        return GpuEvaluator(device, session=SYNTHETIC, wait=wait)

    monkeypatch.setattr(api, "InProcessEvaluator", in_process)
    monkeypatch.setattr(api, "GpuEvaluator", worker)
    n = 100
    x = np.arange(n, dtype=np.float32)
    for isolate in (False, True):
        results, _ = api.tune_kernel(
            "scale", SOURCE, n, [np.zeros_like(x), x, np.int32(n)],
            {"block_size_x": [32, 64]}, answer=[2 * x, None, None], isolate=isolate,
            storage=str(tmp_path / f"r{isolate}.db"), compiler_cache=None, quiet=True,
        )  # fmt: skip
        assert sorted(r["block_size_x"] for r in results) == [32, 64]
        assert all(isinstance(r["time"], float) for r in results)
    assert made == ["here", "worker"]


def test_isolate_must_be_a_flag(tmp_path):
    from autotune import tune_kernel

    with pytest.raises(TuneKernelError, match="isolate must be True or False"):
        tune_kernel(
            "scale", SOURCE, 10, [np.zeros(10, np.float32)], {"block_size_x": [32]},
            isolate="yes", storage=str(tmp_path / "r.db"),
        )  # fmt: skip
    assert not (tmp_path / "r.db").exists()


def test_arguments_go_to_a_session_in_this_process_in_memory_and_are_let_go(tmp_path, monkeypatch):
    """No file is written for a session here (Kernel Tuner's reduction.py passes 3.2 GB to each
    of twelve calls), the outputs a verify needs come back as arrays, and nothing is held after
    the call, on the host or the device."""
    import autotune.gpu.given as given
    import autotune.kt.api as api

    def no_files(*args, **kwargs):
        raise AssertionError("arguments written to files for a session in this process")

    monkeypatch.setattr(api, "write_arguments", no_files)
    seen = []

    def verify(answer, result, atol=None):
        seen.append(type(result[0]).__name__)
        return bool(np.allclose(result[0], answer[0]))

    n = 100
    x = np.arange(n, dtype=np.float32)
    with InProcessEvaluator(session=SYNTHETIC) as here:
        results, _ = api.tune_kernel(
            "scale", SOURCE, n, [np.zeros_like(x), x, np.int32(n)], {"block_size_x": [32, 64]},
            answer=[2 * x, None, None], verify=verify, evaluator=here,
            storage=str(tmp_path / "r.db"), compiler_cache=None, quiet=True,
        )  # fmt: skip
    assert [r["status"] for r in results] == ["OK", "OK"]
    assert seen == ["ndarray", "ndarray"]
    assert given._HELD == {} and given._ON_DEVICE == {}


def test_a_tune_kernel_call_loads_no_pandas(tmp_path):
    """The store's queries build pandas frames for reports; a call reads none, so it does
    without pandas' import (0.3 s on the 2-core machine, in the call's wall time)."""
    import subprocess
    import sys

    probe = f"""
import sys
import numpy as np
from autotune import tune_kernel
from autotune.gpu.evaluator import InProcessEvaluator
x = np.arange(64, dtype=np.float32)
with InProcessEvaluator(session={SYNTHETIC!r}) as here:
    tune_kernel("scale", {SOURCE!r}, 64, [np.zeros_like(x), x, np.int32(64)],
                {{"block_size_x": [32, 64]}}, answer=[2 * x, None, None], evaluator=here,
                storage={str(tmp_path / "r.db")!r}, compiler_cache=None, quiet=True)
print("pandas" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"


def test_after_a_poisoned_context_the_worker_gets_the_arguments_in_files(tmp_path, monkeypatch):
    """The arguments a session here held in memory reach the worker that takes over as files,
    written once, checked and timed there, and removed when the evaluator closes."""
    import autotune.gpu.given as given
    import autotune.kt.api as api

    monkeypatch.setenv("POISON_PID", str(os.getpid()))
    n = 100
    x = np.arange(n, dtype=np.float32)
    with InProcessEvaluator(session=f"{__name__}:PoisonedHere") as here:
        with pytest.warns(RuntimeWarning, match="restart Python"):
            results, _ = api.tune_kernel(
                "scale", SOURCE, n, [np.zeros_like(x), x, np.int32(n)],
                {"block_size_x": [32, 64, 128]}, answer=[2 * x, None, None], evaluator=here,
                storage=str(tmp_path / "r.db"), compiler_cache=None, quiet=True,
                strategy="brute_force",
            )  # fmt: skip
        written = list(here._written.values())
    assert sorted(r["status"] for r in results) == ["CRASH", "OK", "OK"]
    assert len(written) == 1 and not written[0].exists()  # one directory, removed at close
    assert given._HELD == {}
