"""The evaluators: a supervised GPU worker process (GpuEvaluator), or the GPU opened in the
caller's process (InProcessEvaluator), behind one narrow evaluate(job) interface."""

from __future__ import annotations

import ctypes
import os
import shutil
import threading
import warnings
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from autotune.gpu.child import Child, resolve
from autotune.gpu.given import with_files
from autotune.gpu.jobs import Job, NoGpu, StickyCudaError
from autotune.model.evaluator import Evaluator, Task
from autotune.model.records import TIMING_PROTOCOL, DeviceInfo, Measurement, Status
from autotune.model.space import DeviceLimits

__all__ = ["Evaluator", "GpuEvaluator", "InProcessEvaluator", "Job", "NoGpu", "Task"]

DEFAULT_SESSION = "autotune.gpu.session:GpuSession"

# Workers told to stop whose exit nobody waited for (close() of a worker that exits in the
# background): the next worker's spawn waits for them, so that two never hold the GPU at once.
_EXITING: list[Child] = []
_EXITING_LOCK = threading.Lock()


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


def worker_main(conn, device_index: int, session: str = DEFAULT_SESSION) -> None:
    """The GPU worker's loop (in a child of gpu/child.py): open the session, then run each
    task it is sent and answer with the result."""
    try:
        opened = resolve(session)(device_index)
        conn.send(("ready", opened.info(), opened.limits()))
    except NoGpu as err:
        conn.send(("nogpu", str(err)))
        return
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            return
        if task is None:
            return
        try:
            answered = _answer(conn, ("done", task.run(opened)))
        except StickyCudaError as err:
            _answer(conn, ("sticky", str(err)))
            conn.close()
            # The context is poisoned: leave at once (CuPy's cleanup would only fail noisily);
            # the parent starts a fresh worker.
            os._exit(3)
        except Exception as err:  # anything unforeseen is recorded, never fatal to the run
            crash = Measurement(Status.CRASH, error=f"{type(err).__name__}: {err}")
            answered = _answer(conn, ("done", crash))
        if not answered:
            return


def _answer(conn, message) -> bool:
    """Send `message`; False when the parent is gone (stopped, killed or timed out): then there
    is no one to answer and nothing to report, so the worker just ends."""
    try:
        conn.send(message)
    except (BrokenPipeError, ConnectionResetError):
        return False
    return True


class GpuEvaluator(Evaluator):
    """Owns one worker process per GPU; replaces it after a timeout, a crash or a sticky error.

    `session` names the class the worker opens ("package.module:Class"; the GPU's by default):
    a test suite names a stand-in of its own, which then runs behind the same process boundary.
    """

    protocol = TIMING_PROTOCOL

    def __init__(
        self,
        device_index: int = 0,
        start_timeout_s: float = 180.0,
        session: str = DEFAULT_SESSION,
        wait: bool = True,
        exit_in_background: bool = False,
    ) -> None:
        """Start the worker. With `wait` False, return once it is spawned: it opens the GPU
        while the caller does other work, and the first use of `device`, `limits` or `call`
        waits for it (and raises NoGpu then, where it has none). With `exit_in_background`,
        close() tells the worker to stop and returns: its CUDA context's teardown (0.3-0.4 s on
        the H200) is then waited for by the next worker's spawn, or by nobody."""
        self.device_index = device_index
        self.start_timeout_s = start_timeout_s
        self.session = session
        self.exit_in_background = exit_in_background
        self._child: Child | None = None
        self._opened: tuple[DeviceInfo, DeviceLimits] | None = None
        self.restarts = 0
        self._spawn()
        if wait:
            self._ready()

    @property
    def device(self) -> DeviceInfo:
        return self._ready()[0]

    @property
    def limits(self) -> DeviceLimits:
        return self._ready()[1]

    def _ready(self) -> tuple[DeviceInfo, DeviceLimits]:
        if self._opened is None:
            self._opened = self._handshake()
        return self._opened

    def _spawn(self) -> None:
        with _EXITING_LOCK:
            exiting = list(_EXITING)
            _EXITING.clear()
        for child in exiting:
            child.close()
        self._child = Child("autotune.gpu.evaluator:worker_main", self.device_index, self.session)

    def _handshake(self) -> tuple[DeviceInfo, DeviceLimits]:
        """Wait for the spawned worker's first message: its device, or why it has none."""
        if self._child is None:  # one that failed to start, asked again
            self._spawn()
        child = self._child
        if not child.conn.poll(self.start_timeout_s):
            self._kill()
            raise NoGpu(f"GPU worker did not start within {self.start_timeout_s:.0f} s")
        try:
            message = child.conn.recv()
        except (EOFError, OSError):
            code = child.proc.wait()
            self._kill()
            raise NoGpu(f"GPU worker exited while starting (exit code {code})") from None
        if message[0] == "nogpu":
            self._kill()
            raise NoGpu(no_gpu_reason(message[1]))
        _, info, limits = message
        return info, limits

    @property
    def worker_pid(self) -> int | None:
        """The worker process's id (None between a crash and its restart)."""
        return self._child.proc.pid if self._child is not None else None

    def _kill(self) -> None:
        if self._child is not None:
            self._child.kill()
        self._child = None

    def _restart(self) -> None:
        self._kill()
        self.restarts += 1
        self._spawn()
        self._handshake()

    def evaluate(self, job: Job, timeout_s: float) -> Measurement:
        return self.call(job, timeout_s)

    def call(self, task: Task, timeout_s: float) -> Any:
        """Run a task in the worker. A hang, a dead worker or a poisoned context comes back as
        a TIMEOUT or CRASH Measurement (whatever the task returns otherwise)."""
        self._ready()
        if self._child is None:
            self._restart()
        conn = self._child.conn
        try:
            conn.send(task)
            answered = conn.poll(timeout_s)
        except OSError:  # the worker died before it could take the task
            answered = True
        if not answered:
            self._restart()
            return Measurement(
                Status.TIMEOUT, error=f"no answer within {timeout_s:.0f} s; GPU worker replaced"
            )
        try:
            kind, payload = conn.recv()
        except (EOFError, OSError):
            try:
                code = self._child.proc.wait(timeout=10)
            except Exception:
                code = None
            self._restart()
            return Measurement(Status.CRASH, error=f"GPU worker died (exit code {code})")
        if kind == "sticky":
            self._restart()
            return Measurement(Status.CRASH, error=payload)
        return payload

    def close(self) -> None:
        child, self._child = self._child, None
        if child is None:
            return
        if not self.exit_in_background:
            child.close()
            return
        try:
            child.conn.send(None)
        except (OSError, ValueError):
            child.kill()
            return
        with _EXITING_LOCK:
            _EXITING.append(child)

    def __enter__(self) -> GpuEvaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class InProcessEvaluator(Evaluator):
    """The GPU opened in the caller's process, as Kernel Tuner opens it: no worker to boot
    (a fresh interpreter, its imports and a handshake: about 0.4 s more than the CUDA context
    alone on the H200) and nothing pickled. The session opens on a thread, so the caller loads
    its store meanwhile; the first use of `device`, `limits` or `call` waits for it.

    What the worker process is for is given up: a task's timeout is not enforced (a kernel that
    hangs, hangs the caller), and an error that poisons the CUDA context (an illegal address)
    poisons the caller's. After one, this evaluator says so once and sends every later task to
    a worker process of its own (GpuEvaluator), so the tuning goes on."""

    protocol = TIMING_PROTOCOL
    in_process = True

    def __init__(
        self, device_index: int = 0, session: str = DEFAULT_SESSION, wait: bool = True
    ) -> None:
        self.device_index = device_index
        self.session = session
        self.poisoned: str | None = None  # the error that poisoned this process's context
        self._opened: tuple[Any, DeviceInfo, DeviceLimits] | None = None
        self._failed: NoGpu | None = None
        self._worker: GpuEvaluator | None = None  # after a poisoning
        self._written: dict[str, Path] = {}  # arguments written for that worker, by digest
        self._opening = threading.Thread(target=self._open, name="autotune-open-gpu", daemon=True)
        self._opening.start()
        if wait:
            self._ready()

    def _open(self) -> None:
        try:
            session = resolve(self.session)(self.device_index)
            self._opened = (session, session.info(), session.limits())
        except NoGpu as err:
            self._failed = NoGpu(no_gpu_reason(str(err)))
        except Exception as err:  # a worker would have died of it: the same as no GPU
            self._failed = NoGpu(no_gpu_reason(f"{type(err).__name__}: {err}"))

    def _ready(self) -> tuple[Any, DeviceInfo, DeviceLimits]:
        self._opening.join()
        if self._failed is not None:
            raise NoGpu(str(self._failed)) from None
        assert self._opened is not None
        return self._opened

    @property
    def device(self) -> DeviceInfo:
        return self._ready()[1]

    @property
    def limits(self) -> DeviceLimits:
        return self._ready()[2]

    def evaluate(self, job: Job, timeout_s: float) -> Measurement:
        return self.call(job, timeout_s)

    def call(self, task: Task, timeout_s: float) -> Any:
        """Run a task here (`timeout_s` is not enforced in this process); a poisoned context
        or any unforeseen error comes back as a CRASH Measurement, as from a worker."""
        if self._worker is not None:
            return self._worker.call(with_files(task, self._written), timeout_s)
        session = self._ready()[0]
        try:
            # The session's device current on the caller's thread for the task, and the
            # caller's own current device back after it.
            with getattr(session, "current", nullcontext)():
                return task.run(session)
        except StickyCudaError as err:
            self._poisoned(str(err))
            return Measurement(Status.CRASH, error=str(err))
        except Exception as err:
            return Measurement(Status.CRASH, error=f"{type(err).__name__}: {err}")

    def _poisoned(self, error: str) -> None:
        self.poisoned = error
        warnings.warn(
            f"autotune: a kernel left this process's CUDA context unusable ({error}); the "
            "remaining configurations run in a worker process. CUDA in this process fails "
            "from now on: restart Python before using the GPU here again (tune_kernel's "
            "isolate=True runs every configuration in a worker process).",
            RuntimeWarning,
            stacklevel=2,
        )
        self._worker = GpuEvaluator(self.device_index, session=self.session)

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()
        for path in self._written.values():
            shutil.rmtree(path, ignore_errors=True)
        self._opening.join()
        if self._opened is not None and self.poisoned is None:
            close = getattr(self._opened[0], "close", None)
            if close is not None:
                close()
        self._opened = None

    def __enter__(self) -> InProcessEvaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
