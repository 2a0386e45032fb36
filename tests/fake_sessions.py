"""Worker sessions without a GPU or a compiler, for the scheduler's transport tests: a picklable
factory whose sessions plan a fixed list of studies and "tune" one by sleeping and logging it.

Each tune appends "<pid>\\t<gpu>\\t<problem key>" to the factory's log (flushed) before it
answers, so a test sees which worker process tuned what, and how often."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from autotune.model.records import DeviceInfo
from autotune.store import Store
from autotune.tuning.worker_session import Plan, PlannedStudy, StudyReport

DEVICE = DeviceInfo(name="Fake GPU", compute_capability="9.0", sm_count=132)


@dataclass(frozen=True)
class FakeFactory:
    storage: str
    log: str
    costs: tuple[tuple[str, float], ...]  # (problem key, estimated seconds)
    tune_s: float = 0.05
    fail_open_gpu: int | None = None  # this GPU's worker cannot open its campaign
    fail_open_after_s: float = 0.0  # ... and says so this late
    die_on: str | None = None  # the first worker handed this study dies (kill -9) in it
    wait_for_stop: bool = False  # each study runs until the worker is interrupted
    ignore_sigint: bool = False
    # These GPUs' workers each wait (up to 30 s) for all of them to start before tuning their
    # first study, so that a slow start on a loaded machine leaves none of them without one.
    together: tuple[int, ...] = ()

    def __call__(self, jobs: int, on_progress, gpu: int = 0) -> FakeSession:
        if self.ignore_sigint:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        if gpu == self.fail_open_gpu:
            time.sleep(self.fail_open_after_s)
            raise RuntimeError(f"GPU {gpu} is not there")
        return FakeSession(self, gpu)


def tuned(log: Path) -> list[tuple[int, int, str]]:
    """(pid, gpu, problem key) of every study a log holds, in order."""
    lines = log.read_text().splitlines() if log.exists() else []
    return [(int(pid), int(gpu), key) for pid, gpu, key in (line.split("\t") for line in lines)]


class FakeSession:
    def __init__(self, factory: FakeFactory, gpu: int) -> None:
        self.factory = factory
        self.gpu = gpu
        with Store(factory.storage) as store:
            self.device_id = store.register_device(DEVICE)

    def plan(self) -> Plan:
        ordered = sorted(self.factory.costs, key=lambda kc: -kc[1])
        return Plan(
            self.device_id, tuple(PlannedStudy(("fake", k), 1, cost) for k, cost in ordered)
        )

    def tune(self, key: tuple[str, str], time_left_s: float | None) -> StudyReport:
        f = self.factory
        Path(f"{f.log}.started.{self.gpu}").touch()
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline and not all(
            Path(f"{f.log}.started.{g}").exists() for g in f.together
        ):
            time.sleep(0.01)
        if key[1] == f.die_on:
            mark = Path(f"{f.log}.died")
            if not mark.exists():
                mark.touch()
                os._exit(9)
        if f.wait_for_stop:
            try:
                time.sleep(120)
            except KeyboardInterrupt:
                Path(f"{f.log}.stopped.{self.gpu}").touch()
                return StudyReport(key, 0, 0, "", True)
        time.sleep(f.tune_s)
        with open(f.log, "a") as fh:
            fh.write(f"{os.getpid()}\t{self.gpu}\t{key[1]}\n")
        return StudyReport(key, 1, 0, "", False)

    def close(self) -> None:
        Path(f"{self.factory.log}.closed.{self.gpu}").touch()
