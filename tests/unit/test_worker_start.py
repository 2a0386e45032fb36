"""The GPU worker started without waiting (tune_kernel spawns it before the store's modules
load): it boots beside the caller, and the first use of its device waits for it, or says
there is no GPU then. The real worker process, with a stand-in session inside."""

from __future__ import annotations

import pytest

from autotune.gpu.evaluator import GpuEvaluator
from autotune.gpu.jobs import NoGpu
from autotune.gpu.synthetic import NAME

SYNTHETIC = "autotune.gpu.synthetic:SyntheticSession"


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


def test_tune_kernel_without_a_gpu_says_so_and_creates_no_database(tmp_path, monkeypatch):
    """Its worker spawned first, tune_kernel still creates a new results file only once the
    GPU is up: a machine without one is left without an empty database."""
    import functools

    import numpy as np

    import autotune.kt.api as api

    no_driver = functools.partial(GpuEvaluator, session=f"{__name__}:NoDriverSession")
    monkeypatch.setattr(api, "GpuEvaluator", no_driver)
    database = tmp_path / "results.db"
    with pytest.raises(NoGpu, match="no NVIDIA driver found"):
        api.tune_kernel(
            "scale", "__global__ void scale(float *a) { a[threadIdx.x] *= 2.0f; }", 32,
            [np.ones(32, np.float32)], {"block_size_x": [32]}, storage=str(database),
        )  # fmt: skip
    assert not database.exists()
