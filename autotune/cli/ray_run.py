"""`autotune run --ray`: the campaign on each Ray actor (one GPU each), and the driver's side."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from autotune.cli.campaign import NothingToTune, RunRequest, check_runnable, open_campaign
from autotune.cli.measure import say_on_stderr
from autotune.cli.progress import ProgressPrinter, campaign_line


class CampaignSession:
    """One actor's campaign: its GPU (Ray's CUDA_VISIBLE_DEVICES shows it as device 0), the
    store, the planned studies and a tuner held open across the studies it is handed. Each study
    is the actor's alone (Ray hands it out), so the tuner writes no claims."""

    def __init__(self, request: RunRequest, jobs: int, on_progress: Callable[[Any], None]) -> None:
        from autotune.tuning.ray_workers import PlannedStudy  # noqa: F401 - fail early here

        self.request = request
        self.campaign = open_campaign(request, say_on_stderr, gpu=0)
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

    def plan(self):
        from autotune.tuning.ray_workers import PlannedStudy

        planned = self.tuner.plan(self.campaign.studies, self.request.budget)
        return [
            PlannedStudy((study.family.name, study.problem.key), remaining, cost)
            for study, _, remaining, cost in planned
        ]

    def tune(self, key: tuple[str, str], time_left_s: float | None):
        from autotune.tuning.ray_workers import StudyReport

        study = self.by_key[key]
        # This study's library baseline (and the device's ceilings) once.
        self.campaign.measure_libraries([study.problem])
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


@dataclasses.dataclass(frozen=True)
class SessionFactory:
    """Pickled to every actor: builds its CampaignSession."""

    request: RunRequest

    def __call__(self, jobs: int, on_progress: Callable[[Any], None]) -> CampaignSession:
        return CampaignSession(self.request, jobs, on_progress)


def absolute_paths(request: RunRequest) -> RunRequest:
    """The request with its files named from / (an actor's working directory is Ray's)."""

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
        shape_files=tuple(str(absolute(f)) for f in request.shape_files),
    )


def run_on_ray(address: str | None, request: RunRequest, init: dict | None = None) -> int:
    """`autotune run --ray [ADDRESS]`: join the cluster, put one actor on each GPU (on this node
    only for a SQLite storage), hand out the studies longest first, show one progress line;
    returns the exit code (non-zero if a study failed, 130 after Ctrl-C)."""
    from autotune.cli.workers import report_outcome
    from autotune.gpu.interrupt import terminate_as_interrupt
    from autotune.store import hide_passwords
    from autotune.tuning.ray_workers import RayUnavailable, RayWorkers, connect
    from autotune.tuning.workers import run_workers

    request = absolute_paths(request)
    try:
        check_runnable(request)  # here, before any GPU of the cluster starts
    except NothingToTune as err:
        raise click.UsageError(str(err)) from None
    from autotune.store import Store

    Store(request.storage, share=request.share).close()  # a bad --storage fails before Ray starts
    try:
        joined = connect(address, **(init or {}))
    except RayUnavailable as err:
        raise click.UsageError(str(err)) from None
    import ray  # importable: connect() has joined

    try:
        workers = RayWorkers(
            SessionFactory(request),
            request.storage,
            time_limit_s=request.time_limit_s,
            jobs=request.jobs,
        )
        gpus = int(ray.cluster_resources().get("GPU", 0))
        click.echo(
            f"autotune: Ray cluster with {gpus} GPUs on {len(ray.nodes())} nodes; storage "
            f"{hide_passwords(request.storage)}; the actors' output goes to Ray's logs "
            "(/tmp/ray/session_latest/logs on each node)",
            err=True,
        )
        with terminate_as_interrupt():
            try:
                outcome = run_workers(
                    workers,
                    request.storage,
                    on_progress=ProgressPrinter(campaign_line),
                    share=request.share,
                )
            except RayUnavailable as err:
                raise click.UsageError(str(err)) from None
    finally:
        if joined:
            ray.shutdown()
    if isinstance(workers.plan_error, NothingToTune):  # on this GPU (its limits) nothing fits
        raise click.UsageError(str(workers.plan_error))
    return report_outcome(outcome, len(workers.names))


__all__ = ["CampaignSession", "NothingToTune", "SessionFactory", "absolute_paths", "run_on_ray"]
