"""A worker's side of a scheduled campaign: the campaign opened on one GPU with a tuner held open
across the studies the scheduler hands it, and the values the two exchange (plain data, so that
a worker process or a Ray actor receives data only, never the caller's code)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from autotune.tuning.campaign import RunRequest, open_campaign, say_on_stderr


@dataclass(frozen=True, slots=True)
class PlannedStudy:
    """A study as the driver schedules it: its key, the evaluations it has to go, their cost."""

    key: tuple[str, str]  # (family, problem key)
    remaining: int
    cost_s: float


@dataclass(frozen=True, slots=True)
class Plan:
    """The campaign's studies on the planning worker's device, longest first; the device's id in
    the store is what the driver's claims are keyed on."""

    device_id: int
    studies: tuple[PlannedStudy, ...]


@dataclass(frozen=True, slots=True)
class StudyReport:
    key: tuple[str, str]
    evaluated: int
    failures: int
    stopped: str
    interrupted: bool


class StudySession(Protocol):
    """What a worker holds for the campaign: the store, its GPU, a compiler and a tuner."""

    def plan(self) -> Plan: ...

    def tune(self, key: tuple[str, str], time_left_s: float | None) -> StudyReport: ...

    def close(self) -> None: ...


# Builds a worker's session from its compile processes, a progress hook called after each
# evaluation (which stops the study by raising KeyboardInterrupt) and its GPU index; pickled to
# every worker.
SessionFactory = Callable[..., StudySession]


class CampaignSession:
    """One worker's campaign: its GPU, the store, the planned studies and a tuner held open across
    the studies it is handed. Each study is the worker's alone (the driver hands it out and holds
    its claim), so the tuner writes no claims."""

    def __init__(
        self, request: RunRequest, jobs: int, on_progress: Callable[[Any], None], gpu: int = 0
    ) -> None:
        self.request = request
        self.campaign = open_campaign(request, say_on_stderr, gpu=gpu)
        try:
            if request.jobs is None:
                request = dataclasses.replace(request, jobs=jobs)
            self.tuner = self.campaign.tuner(request, on_progress, claim_studies=False)
            self._held = self.tuner.hold()
            self._held.__enter__()
        except BaseException:
            self.campaign.session.close()
            raise
        self.by_key = {(s.family.name, s.problem.key): s for s in self.campaign.studies}

    def plan(self) -> Plan:
        planned = self.tuner.plan(self.campaign.studies, self.request.budget)
        return Plan(
            self.tuner.device_id,
            tuple(
                PlannedStudy((study.family.name, study.problem.key), remaining, cost)
                for study, _, remaining, cost in planned
            ),
        )

    def tune(self, key: tuple[str, str], time_left_s: float | None) -> StudyReport:
        study = self.by_key[key]
        try:
            # This study's library baseline (and the device's ceilings) once.
            self.campaign.measure_libraries([study.problem])
        except KeyboardInterrupt:  # stopped before its tuning began: it resumes next time
            return StudyReport(key, 0, 0, "", True)
        outcome = self.tuner.run([study], self.request.budget, time_left_s)
        done = outcome.studies[0] if outcome.studies else None
        return StudyReport(
            key,
            done.evaluated if done else 0,
            done.failures if done else 0,
            done.stopped if done else "",
            outcome.interrupted,
        )

    def close(self) -> None:
        try:
            self._held.__exit__(None, None, None)
        finally:
            self.campaign.session.close()


@dataclass(frozen=True)
class CampaignFactory:
    """Pickled to every worker (a local process or a Ray actor): builds its CampaignSession."""

    request: RunRequest

    def __call__(
        self, jobs: int, on_progress: Callable[[Any], None], gpu: int = 0
    ) -> CampaignSession:
        return CampaignSession(self.request, jobs, on_progress, gpu)


def absolute_paths(request: RunRequest) -> RunRequest:
    """The request with its files named from / (a Ray actor's working directory is Ray's)."""

    def absolute(path):
        return None if path is None else Path(path).expanduser().resolve()

    storage = request.storage
    if storage and "://" not in storage:
        storage = str(absolute(storage))
    return dataclasses.replace(
        request,
        storage=storage,
        cache_dir=absolute(request.cache_dir),
        kernel_dirs=tuple(absolute(d) for d in request.kernel_dirs),
        subspace=absolute(request.subspace),
        selection=dataclasses.replace(
            request.selection, files=tuple(str(absolute(f)) for f in request.selection.files)
        ),
    )


__all__ = [
    "CampaignFactory",
    "CampaignSession",
    "Plan",
    "PlannedStudy",
    "SessionFactory",
    "StudyReport",
    "StudySession",
    "absolute_paths",
]
