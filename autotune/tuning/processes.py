"""Workers tuning one campaign on one storage, watched from one place: one local process per GPU
(`autotune run --gpus`) or Ray actors (`autotune run --ray`); start, progress, Ctrl-C, outcome."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Protocol

from autotune.store import Store

POLL_S = 2.0  # how often the parent reads the database for its progress line
STOP_GRACE_S = 30.0  # after Ctrl-C a worker gets this long to release its claims, then SIGKILL
LOG_TAIL_CHARS = 3000  # of a failed worker's log, shown by the parent
WORKER_COMMAND = [sys.executable, "-m", "autotune"]  # a worker; the tests run a synthetic GPU's


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
    try:
        gpus = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise GpuListError(f"--gpus {text!r}: expected 'all' or indices such as 0,1") from None
    if not gpus or min(gpus) < 0:
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


def worker_argv(argv: Sequence[str], gpu: int, jobs: int | None) -> list[str]:
    """The `autotune run` arguments of one worker: the parent's without --gpus (and its value),
    plus --gpu, plus --jobs where the user gave none (the cores are shared by the workers)."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == "--gpus":
            skip = True
            continue
        if arg.startswith("--gpus="):
            continue
        out.append(arg)
    has_jobs = any(a == "--jobs" or a.startswith("--jobs=") for a in out)
    if jobs is not None and not has_jobs:
        out += ["--jobs", str(jobs)]
    return [*out, "--gpu", str(gpu)]


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """One worker: a name for messages, its command line, its log file."""

    name: str
    argv: list[str]
    log: Path


@dataclass
class WorkersOutcome:
    returncodes: dict[str, int] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)  # why each failed worker failed
    interrupted: bool = False
    elapsed_s: float = 0.0
    evaluations: int = 0  # recorded by the workers' runs

    @property
    def failed(self) -> list[str]:
        return [name for name, rc in self.returncodes.items() if rc != 0]

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        return 1 if self.failed else 0


@dataclass(frozen=True, slots=True)
class CampaignProgress:
    """What the parent shows: from the database and from its own children."""

    evaluations: int  # recorded since the workers started, by runs started since
    studies_held: int  # claims held now by those runs
    alive: int
    workers: int
    elapsed_s: float
    studies_done: int | None = None  # where the workers are handed their studies (Ray)
    studies_total: int | None = None


def campaign_progress(store: Store, since: datetime) -> tuple[int, int]:
    """(evaluations recorded, claims held) by the runs started at or after `since`."""
    runs = store.run_activity(since, started_since=since)
    return int(runs["evaluations"].sum()) if len(runs) else 0, int(runs["claims"].sum())


class Workers(Protocol):
    """The workers of one campaign as run_workers() drives them: local processes that claim
    their studies in the store (LocalProcesses), or Ray actors handed theirs
    (autotune.tuning.ray_workers.RayWorkers)."""

    names: list[str]

    def start(self) -> None: ...

    def wait(self, timeout_s: float) -> None:
        """Return once a worker (or a study) ended, or after timeout_s."""

    def alive(self) -> int: ...

    def studies(self) -> tuple[int | None, int | None, int | None]:
        """(being tuned, done, in all), each None where the store's claims tell instead."""

    def stop(self, grace_s: float) -> None:
        """After Ctrl-C: ask every worker to stop as after its own, kill it after grace_s."""

    def close(self) -> None:
        """Leave nothing running."""

    def results(self) -> tuple[dict[str, int], dict[str, str]]:
        """Each worker's exit code, and what went wrong in those that failed."""


class LocalProcesses:
    """One `autotune run --gpu i` process per GPU of this machine, each writing to its log."""

    def __init__(self, specs: Sequence[WorkerSpec], env: dict[str, str] | None = None) -> None:
        self.specs = list(specs)
        self.names = [spec.name for spec in self.specs]
        self.env = env
        self.procs: dict[str, subprocess.Popen] = {}
        self._logs = []

    def start(self) -> None:
        for spec in self.specs:
            spec.log.parent.mkdir(parents=True, exist_ok=True)
            log = open(spec.log, "w")  # noqa: SIM115 - closed by close()
            self._logs.append(log)
            # Its own session: a terminal's Ctrl-C reaches the parent alone, which passes it on
            # once (a worker hit twice would abandon its clean stop).
            with _children_take_sigint():
                self.procs[spec.name] = subprocess.Popen(
                    spec.argv,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    env={**os.environ, **(self.env or {})},
                )

    def _running(self) -> list[subprocess.Popen]:
        return [p for p in self.procs.values() if p.poll() is None]

    def alive(self) -> int:
        return len(self._running())

    def wait(self, timeout_s: float) -> None:
        _wait_any(self._running(), timeout_s)

    def studies(self) -> tuple[int | None, int | None, int | None]:
        return None, None, None  # each process claims its own in the store

    def stop(self, grace_s: float) -> None:
        _stop(self.procs.values(), grace_s)

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:  # an error in the parent: no worker is left behind
                proc.kill()
                proc.wait()
        for log in self._logs:
            log.close()

    def results(self) -> tuple[dict[str, int], dict[str, str]]:
        codes = {name: proc.returncode for name, proc in self.procs.items()}
        logs = {spec.name: spec.log for spec in self.specs}
        return codes, {name: log_tail(logs[name]) for name, code in codes.items() if code != 0}


@contextmanager
def _children_take_sigint() -> Iterator[None]:
    """Processes started in this block can be stopped with SIGINT, as _stop does, whatever this
    process inherited: a child inherits a blocked SIGINT (a thread or harness that blocks it)
    and an ignored one (a script's `cmd &`, a CI runner), and then never sees the stop; it was
    killed after STOP_GRACE_S instead (exit -9, the interrupted run left unfinished). A handled
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


def run_workers(
    workers: Workers | Sequence[WorkerSpec],
    storage: str,
    *,
    on_progress: Callable[[CampaignProgress], None] | None = None,
    poll_s: float = POLL_S,
    stop_grace_s: float = STOP_GRACE_S,
    env: dict[str, str] | None = None,
    share: bool = False,
) -> WorkersOutcome:
    """Start every worker, report the campaign's progress from the database until all have
    ended, and return their exit codes. Ctrl-C (KeyboardInterrupt here) is passed on to every
    worker, so each stops as after its own Ctrl-C (claims released, run finished). A list of
    WorkerSpec is run as local processes."""
    if not hasattr(workers, "start"):
        workers = LocalProcesses(workers, env)
    outcome = WorkersOutcome()
    since = datetime.now(timezone.utc).replace(microsecond=0)
    start = time.monotonic()
    # Created once here, so the workers do not all create it at once.
    store = Store(storage, share=share)
    try:
        workers.start()
        try:
            while True:
                alive = workers.alive()
                if on_progress is not None:
                    done, held = _progress(store, since)
                    busy, studies_done, studies_total = workers.studies()
                    on_progress(
                        CampaignProgress(
                            done,
                            held if busy is None else busy,
                            alive,
                            len(workers.names),
                            time.monotonic() - start,
                            studies_done,
                            studies_total,
                        )
                    )
                if not alive:
                    break
                workers.wait(poll_s)
        except KeyboardInterrupt:
            outcome.interrupted = True
            workers.stop(stop_grace_s)
    finally:
        try:
            workers.close()
        finally:
            outcome.elapsed_s = time.monotonic() - start
            try:
                outcome.evaluations = _progress(store, since)[0]
            finally:
                store.close()
    outcome.returncodes, outcome.errors = workers.results()
    return outcome


def _progress(store: Store, since: datetime) -> tuple[int, int]:
    try:
        return campaign_progress(store, since)
    except Exception:  # a busy database costs a progress line, never the campaign
        return 0, 0


def _wait_any(procs: Sequence[subprocess.Popen], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            return
        time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))


def _stop(procs, grace_s: float) -> None:
    running = [p for p in procs if p.poll() is None]
    for proc in running:
        try:
            proc.send_signal(signal.SIGINT)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace_s
    for proc in running:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def log_tail(path: Path, chars: int = LOG_TAIL_CHARS) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def gpu_worker_specs(
    argv: Sequence[str], gpus: Sequence[int], log_dir: Path, cores: int | None = None
) -> list[WorkerSpec]:
    """An `autotune run` per GPU, each with its share of the compile cores."""
    cores = cores or os.cpu_count() or 1
    jobs = max(1, cores // len(gpus))
    return [
        WorkerSpec(
            f"gpu{gpu}",
            [*WORKER_COMMAND, *worker_argv(argv, gpu, jobs)],
            log_dir / f"gpu{gpu}.log",
        )
        for gpu in gpus
    ]


__all__ = [
    "CampaignProgress",
    "GpuListError",
    "LocalProcesses",
    "WorkerSpec",
    "Workers",
    "WorkersOutcome",
    "gpu_worker_specs",
    "log_tail",
    "parse_gpus",
    "run_workers",
    "visible_gpu_count",
    "worker_argv",
]
