"""The evaluator: a supervised GPU worker process behind a narrow evaluate(job) interface."""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
from collections.abc import Callable
from typing import Any

from autotune.gpu.interrupt import children_ignore_interrupts
from autotune.gpu.session import Job, NoGpu
from autotune.model.evaluator import Evaluator, Task
from autotune.model.records import TIMING_PROTOCOL, DeviceInfo, Measurement, Status
from autotune.model.space import DeviceLimits

__all__ = ["Evaluator", "GpuEvaluator", "Job", "NoGpu", "Task"]


def no_gpu_reason(text: str, driver_present: Callable[[], bool] | None = None) -> str:
    """The worker's reason, except that the CUDA runtime calls a driver that is not there at
    all an insufficient one ("driver version is insufficient"), which sends people upgrading."""
    if "InsufficientDriver" in text and not (driver_present or _driver_present)():
        return f"no NVIDIA driver found (libcuda.so.1 cannot be loaded; CUDA said {text})"
    return text


def _driver_present() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")  # loading it initialises nothing
    except OSError:
        return False
    return True


def _worker_main(conn, device_index: int) -> None:
    # Imported here so the parent process never loads CuPy's runtime.
    from autotune.gpu.session import GpuSession, StickyCudaError

    try:
        session = GpuSession(device_index)
        conn.send(("ready", session.info(), session.limits()))
    except NoGpu as err:
        conn.send(("nogpu", str(err)))
        return
    while True:
        try:
            job = conn.recv()
        except (EOFError, KeyboardInterrupt):
            return
        if job is None:
            return
        try:
            conn.send(("done", job.run(session)))
        except StickyCudaError as err:
            conn.send(("sticky", str(err)))
            conn.close()
            # The context is poisoned: leave at once (CuPy's cleanup would only fail noisily);
            # the parent starts a fresh worker.
            os._exit(3)
        except Exception as err:  # anything unforeseen is recorded, never fatal to the run
            conn.send(("done", Measurement(Status.CRASH, error=f"{type(err).__name__}: {err}")))


class GpuEvaluator(Evaluator):
    """Owns one worker process per GPU; replaces it after a timeout, a crash or a sticky error."""

    protocol = TIMING_PROTOCOL

    def __init__(self, device_index: int = 0, start_timeout_s: float = 180.0) -> None:
        self.device_index = device_index
        self.start_timeout_s = start_timeout_s
        self._ctx = mp.get_context("spawn")
        self._proc = None
        self._conn = None
        self.restarts = 0
        self.device, self.limits = self._start()

    def _start(self) -> tuple[DeviceInfo, DeviceLimits]:
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(
            target=_worker_main,
            args=(child, self.device_index),
            daemon=True,
            name=f"autotune-gpu{self.device_index}",
        )
        with children_ignore_interrupts():
            proc.start()
        child.close()
        self._proc, self._conn = proc, parent
        if not parent.poll(self.start_timeout_s):
            self._kill()
            raise NoGpu(f"GPU worker did not start within {self.start_timeout_s:.0f} s")
        try:
            message = parent.recv()
        except EOFError:
            self._kill()
            raise NoGpu(f"GPU worker exited while starting (exit code {proc.exitcode})") from None
        if message[0] == "nogpu":
            self._kill()
            raise NoGpu(no_gpu_reason(message[1]))
        _, info, limits = message
        return info, limits

    def _kill(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            self._proc.kill()
        if self._proc is not None:
            self._proc.join(timeout=10)
        if self._conn is not None:
            self._conn.close()
        self._proc = self._conn = None

    def _restart(self) -> None:
        self._kill()
        self.restarts += 1
        self._start()

    def evaluate(self, job: Job, timeout_s: float) -> Measurement:
        return self.call(job, timeout_s)

    def call(self, task: Task, timeout_s: float) -> Any:
        """Run a task in the worker. A hang, a dead worker or a poisoned context comes back as
        a TIMEOUT or CRASH Measurement (whatever the task returns otherwise)."""
        if self._proc is None:
            self._restart()
        self._conn.send(task)
        if not self._conn.poll(timeout_s):
            self._restart()
            return Measurement(
                Status.TIMEOUT, error=f"no answer within {timeout_s:.0f} s; GPU worker replaced"
            )
        try:
            kind, payload = self._conn.recv()
        except (EOFError, ConnectionError):
            code = self._proc.exitcode if self._proc else None
            self._restart()
            return Measurement(Status.CRASH, error=f"GPU worker died (exit code {code})")
        if kind == "sticky":
            self._restart()
            return Measurement(Status.CRASH, error=payload)
        return payload

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.send(None)
            except (OSError, BrokenPipeError):
                pass
        if self._proc is not None:
            self._proc.join(timeout=10)
        self._kill()

    def __enter__(self) -> GpuEvaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
