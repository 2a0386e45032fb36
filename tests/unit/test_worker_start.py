"""The GPU worker started without waiting (tune_kernel spawns it before the store's modules
load): it boots beside the caller, and the first use of its device waits for it, or says
there is no GPU then. The real worker process, with a stand-in session inside."""

from __future__ import annotations

import atexit
import os
import time

import pytest

from autotune.gpu import child as children
from autotune.gpu.child import ChildPool, start_ahead
from autotune.gpu.evaluator import GpuEvaluator
from autotune.gpu.jobs import NoGpu
from autotune.gpu.synthetic import NAME, SyntheticSession

SYNTHETIC = "autotune.gpu.synthetic:SyntheticSession"


class SlowExitSession(SyntheticSession):
    """The stand-in session of a worker whose exit takes 1.5 s, as a CUDA context's teardown
    takes a few tenths of one."""

    def __init__(self, device_index: int = 0) -> None:
        super().__init__(device_index)
        atexit.register(time.sleep, 1.5)


def pid_after(seconds: float) -> int:
    """What a pool's child runs in the tests below: its process id, after a while."""
    time.sleep(seconds)
    return os.getpid()


class NoDriverSession:
    """A session that finds no GPU, as GpuSession does on a machine without a driver."""

    def __init__(self, device_index: int = 0) -> None:
        raise NoGpu("no NVIDIA driver found (a stand-in)")


def test_a_worker_spawned_without_waiting_is_waited_for_on_first_use():
    worker = GpuEvaluator(session=SYNTHETIC, wait=False)
    try:
        assert worker.worker_pid is not None  # the process is there
        assert worker._opened is None  # and nothing was waited for yet
        assert worker.device.name == NAME and worker.limits is not None
    finally:
        worker.close()


def test_no_gpu_is_said_on_first_use_of_a_worker_not_waited_for():
    worker = GpuEvaluator(session=f"{__name__}:NoDriverSession", wait=False)
    try:
        with pytest.raises(NoGpu, match="no NVIDIA driver found"):
            _ = worker.device
        with pytest.raises(NoGpu, match="no NVIDIA driver found"):  # asked again: again
            _ = worker.limits
    finally:
        worker.close()
    with pytest.raises(NoGpu, match="no NVIDIA driver found"):  # waited for at once, as before
        GpuEvaluator(session=f"{__name__}:NoDriverSession")


def test_importing_tune_kernel_loads_neither_cupy_nor_the_store():
    """A Kernel Tuner script's first line: what it loads is waited for before the worker is
    even spawned (the store's pandas and SQLAlchemy load after, while the worker boots)."""
    import subprocess
    import sys

    probe = (
        "import sys; from autotune import tune_kernel; "
        "print(sorted(m for m in ('cupy', 'pandas', 'sqlalchemy') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


@pytest.mark.parametrize("isolate", [False, True])
def test_tune_kernel_without_a_gpu_says_so_and_creates_no_database(tmp_path, monkeypatch, isolate):
    """Its GPU opened first (here or in a worker), tune_kernel still creates a new results
    file only once the GPU is up: a machine without one is left without an empty database."""
    import functools

    import numpy as np

    import autotune.kt.api as api
    from autotune.gpu.evaluator import InProcessEvaluator

    no_driver = f"{__name__}:NoDriverSession"
    monkeypatch.setattr(api, "GpuEvaluator", functools.partial(GpuEvaluator, session=no_driver))
    monkeypatch.setattr(
        api, "InProcessEvaluator", functools.partial(InProcessEvaluator, session=no_driver)
    )
    database = tmp_path / "results.db"
    with pytest.raises(NoGpu, match="no NVIDIA driver found"):
        api.tune_kernel(
            "scale", "__global__ void scale(float *a) { a[threadIdx.x] *= 2.0f; }", 32,
            [np.ones(32, np.float32)], {"block_size_x": [32]}, storage=str(database),
            isolate=isolate,
        )  # fmt: skip
    assert not database.exists()


def test_a_worker_told_to_exit_in_the_background_is_waited_for_by_the_next_spawn():
    first = GpuEvaluator(session=f"{__name__}:SlowExitSession", exit_in_background=True)
    assert first.device.name == NAME
    exiting = first._child.proc
    start = time.monotonic()
    first.close()
    assert time.monotonic() - start < 1.0  # the caller went on
    assert exiting.poll() is None  # while the worker was still exiting
    second = GpuEvaluator(session=SYNTHETIC)
    try:
        assert exiting.poll() is not None  # gone before the next worker was spawned
        assert second.device.name == NAME
    finally:
        second.close()


def test_a_pool_takes_the_children_started_ahead_before_starting_its_own():
    function = f"{__name__}:pid_after"
    start_ahead(function, 3)
    ahead = children._AHEAD[function]
    ahead[-1].kill()  # one that ended while it waited (the first a pool would take) is not taken
    alive = {c.proc.pid for c in ahead[:-1]}
    pool = ChildPool(function, 2)
    try:
        served = {f.result(timeout=60) for f in [pool.submit(0.5), pool.submit(0.5)]}
    finally:
        pool.stop()
    assert served == alive
    assert children._AHEAD[function] == []
