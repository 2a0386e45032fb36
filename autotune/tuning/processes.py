"""The scheduler's local transport (`autotune run --gpus`): one worker process per GPU of this
host, `python -m autotune.tuning.worker_process`, each writing its output to its log; the driver
sends it pickled calls on its stdin and reads its answers from its stdout."""

from __future__ import annotations

import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from autotune.tuning.scheduler import Answer
from autotune.tuning.worker_session import SessionFactory

LOG_TAIL_CHARS = 3000  # of a lost worker's log, shown by the driver
EXIT_WAIT_S = 10.0  # for a worker whose answers ended to exit and give its code
# The worker entry point; the tests run a synthetic GPU's instead.
WORKER_COMMAND = [sys.executable, "-m", "autotune.tuning.worker_process"]


class GpuListError(ValueError):
    """A --gpus value that names no GPU or a GPU that is not there."""


def parse_gpus(text: str, count: Callable[[], int]) -> list[int]:
    """'0,1,3' or 'all' (every visible device, counted only then) as a list of indices."""
    text = text.strip()
    if text.lower() == "all":
        n = count()
        if n < 1:
            raise GpuListError("--gpus all: no CUDA device is visible")
        return list(range(n))
    parts = [part.strip() for part in text.split(",") if part.strip()]
    # Plain ASCII digits only: int() would also take '1_0' and other scripts' digits.
    if not all(part.isascii() and part.isdigit() for part in parts):
        raise GpuListError(f"--gpus {text!r}: expected 'all' or indices such as 0,1")
    gpus = [int(part) for part in parts]
    if not gpus:
        raise GpuListError(f"--gpus {text!r}: expected 'all' or indices such as 0,1")
    if len(set(gpus)) != len(gpus):
        raise GpuListError(f"--gpus {text!r}: a GPU is named twice")
    return gpus


def visible_gpu_count() -> int:
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # no driver, no CuPy: nothing is visible
        return 0


def worker_jobs(gpus: int, jobs: int | None, cores: int | None = None) -> int:
    """Compile processes per worker: those asked, else this host's cores shared by its GPUs."""
    if jobs is not None:
        return jobs
    return max(1, (cores or os.cpu_count() or 1) // max(1, gpus))


class _Ended:
    """A worker's stdout closed: it has exited, or is about to."""

    def __init__(self, worker: str) -> None:
        self.worker = worker


class LocalProcesses:
    """The Transport (tuning/scheduler.py) of one process per GPU of this host."""

    def __init__(
        self,
        factory: SessionFactory,
        gpus: Sequence[int],
        log_dir: Path,
        *,
        jobs: int | None = None,
        env: dict[str, str] | None = None,
        command: Sequence[str] | None = None,
    ) -> None:
        self.factory = factory
        self.gpus = {f"gpu{gpu}": gpu for gpu in gpus}
        self.logs = {name: log_dir / f"{name}.log" for name in self.gpus}
        self.jobs = worker_jobs(len(self.gpus), jobs)
        self.env = env
        self.command = list(command or WORKER_COMMAND)
        self.procs: dict[str, subprocess.Popen] = {}
        self.pending: set[str] = set()  # workers with a call in flight
        self._answers: queue.Queue = queue.Queue()
        self._log_files: list = []
        self._interrupted = False

    def start(self) -> list[str]:
        for name, gpu in self.gpus.items():
            log_path = self.logs[name]
            log_path.parent.mkdir(parents=True, exist_ok=True)
            log = open(log_path, "w")  # noqa: SIM115 - closed by close()
            self._log_files.append(log)
            # Its own session: a terminal's Ctrl-C reaches the driver alone, which passes it on
            # once (a worker hit twice would abandon its clean stop).
            with _children_take_sigint():
                proc = subprocess.Popen(
                    self.command,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    start_new_session=True,
                    env={**os.environ, **(self.env or {})},
                )
            self.procs[name] = proc
            self.pending.add(name)  # opening its campaign
            self._send(name, (self.factory, self.jobs, gpu))
            threading.Thread(
                target=self._read, args=(name, proc), name=f"autotune-{name}", daemon=True
            ).start()
        return list(self.gpus)

    def call(self, worker: str, method: str, *args: Any) -> None:
        self.pending.add(worker)
        self._send(worker, (method, args))

    def answers(self, timeout_s: float) -> list[Answer]:
        got = []
        try:
            got.append(self._answers.get(timeout=max(0.0, timeout_s)))
            while True:
                got.append(self._answers.get_nowait())
        except queue.Empty:
            pass
        out = []
        for item in got:
            if isinstance(item, _Ended):
                if item.worker in self.pending:  # it died with a call in flight
                    self.pending.discard(item.worker)
                    out.append(Answer(item.worker, error=self._death(item.worker), lost=True))
                continue
            self.pending.discard(item.worker)
            out.append(item)
        return out

    def interrupt(self) -> None:
        if self._interrupted:  # once: a second SIGINT would abandon a worker's clean stop
            return
        self._interrupted = True
        for proc in self.procs.values():
            if proc.poll() is None:
                try:
                    proc.send_signal(signal.SIGINT)
                except ProcessLookupError:
                    pass

    def retire(self, worker: str) -> None:
        self.pending.discard(worker)
        self._close_stdin(worker)  # its end of input: it finishes its run and exits

    def close(self, grace_s: float) -> dict[str, int]:
        for name in self.procs:
            self._close_stdin(name)
        deadline = time.monotonic() + grace_s
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for log in self._log_files:
            log.close()
        return {name: proc.returncode for name, proc in self.procs.items()}

    # -- internals -------------------------------------------------------------------------------

    def _send(self, worker: str, message: Any) -> None:
        stdin = self.procs[worker].stdin
        try:
            pickle.dump(message, stdin)
            stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass  # it has died: its reader reports the call lost

    def _close_stdin(self, worker: str) -> None:
        try:
            self.procs[worker].stdin.close()
        except (BrokenPipeError, OSError):
            pass

    def _read(self, name: str, proc: subprocess.Popen) -> None:
        while True:
            try:
                kind, value = pickle.load(proc.stdout)
            except Exception:  # end of its output (or a torn last answer, as it was killed)
                break
            if kind == "ok":
                self._answers.put(Answer(name, value))
            else:
                self._answers.put(Answer(name, error=value))
        self._answers.put(_Ended(name))

    def _death(self, worker: str) -> RuntimeError:
        proc = self.procs[worker]
        try:
            code = proc.wait(timeout=EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            code = None
        tail = log_tail(self.logs[worker]).strip()
        return RuntimeError(f"worker process ended (exit code {code}); its log ends:\n{tail}")


@contextmanager
def _children_take_sigint() -> Iterator[None]:
    """Processes started in this block can be stopped with SIGINT, as interrupt() does, whatever
    this process inherited: a child inherits a blocked SIGINT (a thread or harness that blocks
    it) and an ignored one (a script's `cmd &`, a CI runner), and then never sees the stop; it
    was killed after the grace instead (exit -9, the interrupted run left unfinished). A handled
    SIGINT is reset to the default by exec, so a handler stands in for an ignore meanwhile."""
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    ignored = (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    )
    if ignored:  # while SIGINT is blocked here, so none reaches this process meanwhile
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        # A SIGINT that comes meanwhile raises KeyboardInterrupt here: the caller stops the
        # workers already started.
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked - {signal.SIGINT})
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        if ignored:  # putting the ignore back drops a SIGINT that came meanwhile, as it would
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def log_tail(path: Path, chars: int = LOG_TAIL_CHARS) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


__all__ = [
    "WORKER_COMMAND",
    "GpuListError",
    "LocalProcesses",
    "log_tail",
    "parse_gpus",
    "visible_gpu_count",
    "worker_jobs",
]
