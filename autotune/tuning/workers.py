"""One worker process per GPU on one storage (`autotune run --gpus`): start, watch, stop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from autotune.store import Store

POLL_S = 2.0  # how often the parent reads the database for its progress line
STOP_GRACE_S = 30.0  # after Ctrl-C a worker gets this long to release its claims, then SIGKILL
LOG_TAIL_CHARS = 3000  # of a failed worker's log, shown by the parent


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


def campaign_progress(store: Store, since: datetime) -> tuple[int, int]:
    """(evaluations recorded, claims held) by the runs started at or after `since`."""
    runs = store.run_activity(since, started_since=since)
    return int(runs["evaluations"].sum()) if len(runs) else 0, int(runs["claims"].sum())


def run_workers(
    specs: Sequence[WorkerSpec],
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
    worker as SIGINT, so each stops as after its own Ctrl-C (claims released, run finished)."""
    outcome = WorkersOutcome()
    since = datetime.now(timezone.utc).replace(microsecond=0)
    start = time.monotonic()
    procs: dict[str, subprocess.Popen] = {}
    logs = []
    store = Store(
        storage, share=share
    )  # created once here, so the workers do not all create it at once
    try:
        for spec in specs:
            spec.log.parent.mkdir(parents=True, exist_ok=True)
            log = open(spec.log, "w")  # noqa: SIM115 - closed in the finally below
            logs.append(log)
            # Its own session: a terminal's Ctrl-C reaches the parent alone, which passes it on
            # once (a worker hit twice would abandon its clean stop).
            procs[spec.name] = subprocess.Popen(
                spec.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, **(env or {})},
            )
        try:
            while True:
                alive = [p for p in procs.values() if p.poll() is None]
                if on_progress is not None:
                    done, held = _progress(store, since)
                    on_progress(
                        CampaignProgress(
                            done, held, len(alive), len(procs), time.monotonic() - start
                        )
                    )
                if not alive:
                    break
                _wait_any(alive, poll_s)
        except KeyboardInterrupt:
            outcome.interrupted = True
            _stop(procs.values(), stop_grace_s)
    finally:
        for proc in procs.values():
            if proc.poll() is None:  # an error in the parent: no worker is left behind
                proc.kill()
                proc.wait()
        for log in logs:
            log.close()
        outcome.elapsed_s = time.monotonic() - start
        try:
            outcome.evaluations = _progress(store, since)[0]
        finally:
            store.close()
    outcome.returncodes = {name: proc.returncode for name, proc in procs.items()}
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
            [sys.executable, "-m", "autotune", *worker_argv(argv, gpu, jobs)],
            log_dir / f"gpu{gpu}.log",
        )
        for gpu in gpus
    ]


__all__ = [
    "CampaignProgress",
    "GpuListError",
    "WorkerSpec",
    "WorkersOutcome",
    "gpu_worker_specs",
    "log_tail",
    "parse_gpus",
    "run_workers",
    "visible_gpu_count",
    "worker_argv",
]
