"""One campaign scheduler: the driver has a worker plan the campaign (longest study first), hands
the studies out one at a time as workers free up, collects their reports, stops at the time limit
or on Ctrl-C, and shows one progress stream. Workers are reached through a Transport: local
processes, one per GPU of this host (tuning/processes.py), or Ray actors (tuning/ray_transport.py).

Within a campaign the driver decides who tunes what, so its workers need no lease rows between
them. The driver still claims each study in the store while one of its workers tunes it: that is
what keeps independent commands (another host's `autotune run` on the same PostgreSQL) off it."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Protocol

from autotune import __version__
from autotune.store import Store
from autotune.tuning.claims import StudyClaims
from autotune.tuning.worker_session import Plan, PlannedStudy, StudyReport

POLL_S = 2.0  # how often the driver reads the database for its progress line
STOP_GRACE_S = 30.0  # after Ctrl-C a worker gets this long to finish its run, then is killed
# Once every study is done, how long the campaign still waits for workers that are opening:
# one that fails says why (its outcome's error), one that hangs is not waited for longer.
OPEN_GRACE_S = 10.0
ERROR_CHARS = 3000  # of each worker's errors, kept for the summary


@dataclass(frozen=True, slots=True)
class Answer:
    """A worker's answer to the call it was given: opening its campaign (no value), `plan` (a
    Plan) or `tune` (a StudyReport)."""

    worker: str
    value: Any = None
    error: BaseException | None = None
    lost: bool = False  # the worker is gone (its process, its node): the call was not done
    cancelled: bool = False  # stopped after Ctrl-C before it began


class Transport(Protocol):
    """How the driver reaches its workers; at most one call in flight per worker."""

    def start(self) -> list[str]:
        """Start the workers, each opening its campaign (answered once, with no value); return
        their names."""

    def call(self, worker: str, method: str, *args: Any) -> None:
        """Ask a free worker to `plan` () or to `tune` (key, time_left_s); answered once."""

    def answers(self, timeout_s: float) -> list[Answer]:
        """The answers that came, waiting up to timeout_s for the first."""

    def interrupt(self) -> None:
        """Ask every worker to stop as after its own Ctrl-C: a study in flight ends between two
        evaluations (its report says interrupted) and resumes next time."""

    def retire(self, worker: str) -> None:
        """The worker gets nothing more: it finishes its run and frees its GPU."""

    def close(self, grace_s: float) -> dict[str, int]:
        """Finish every worker's run and leave nothing running (killing what outlives grace_s);
        the workers' exit codes, where they have any (processes)."""


@dataclass(frozen=True, slots=True)
class CampaignProgress:
    """What the driver shows: from the database and from its own bookkeeping."""

    evaluations: int  # recorded since the campaign started, by runs started since
    studies_held: int  # being tuned now
    alive: int  # workers opening, planning or tuning
    workers: int
    elapsed_s: float
    studies_done: int | None = None
    studies_total: int | None = None  # None until the campaign is planned


@dataclass
class WorkersOutcome:
    returncodes: dict[str, int] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)  # why each failed worker failed
    interrupted: bool = False
    elapsed_s: float = 0.0
    evaluations: int = 0  # recorded by the workers' runs
    reports: list[StudyReport] = field(default_factory=list)
    plan_error: BaseException | None = None  # why the campaign could not be planned
    unreached: int = 0  # studies with evaluations to go still queued at the time limit

    @property
    def short(self) -> int:
        """Studies the time limit left short of their budget: stopped by it, or never handed
        out (the same command resumes them)."""
        return self.unreached + sum(1 for r in self.reports if r.stopped == "time limit")

    @property
    def failed(self) -> list[str]:
        # A worker stopped by the interrupt (128 + SIGINT or SIGTERM) did what it was asked.
        stopped = (130, 143) if self.interrupted else ()
        return [n for n, rc in self.returncodes.items() if rc != 0 and rc not in stopped]

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        return 1 if self.failed else 0


def campaign_progress(store: Store, since: datetime) -> tuple[int, int]:
    """(evaluations recorded, claims held) by the runs started at or after `since`."""
    runs = store.run_activity(since, started_since=since)
    return int(runs["evaluations"].sum()) if len(runs) else 0, int(runs["claims"].sum())


class _Driver:
    """The scheduler's bookkeeping for one campaign: who does what, the queue, the claims."""

    def __init__(
        self, transport: Transport, store: Store, outcome: WorkersOutcome, command: str
    ) -> None:
        self.transport = transport
        self.command = command
        self.store = store
        self.outcome = outcome
        self.names: list[str] = []
        self.doing: dict[str, str] = {}  # worker -> "open" | "plan" | "tune"
        self.tuning: dict[str, PlannedStudy] = {}
        self.free: list[str] = []
        self.gone: set[str] = set()  # failed to open, lost, or retired
        self.queue: deque[PlannedStudy] | None = None  # None until planned
        self.total: int | None = None
        self.done = 0
        self.deadline: float | None = None
        self.claims: StudyClaims | None = None
        self.run_id = 0
        self.stopping = False
        self.opening_until: float | None = None  # set once the work is done (OPEN_GRACE_S)

    # -- answers ---------------------------------------------------------------------------------

    def handle(self, answer: Answer) -> None:
        name = answer.worker
        what = self.doing.pop(name, None)
        if what is None:  # a worker retired meanwhile
            return
        study = self.tuning.pop(name, None)
        if study is not None and self.claims is not None:
            self.claims.release(study.key)
        if answer.lost:
            self._lost(name, answer.error, study)
        elif answer.cancelled:
            self.free.append(name)
        elif answer.error is not None:
            self._fail(name, answer.error, study)
            if what == "plan":  # nothing can be scheduled: the campaign ends
                self.outcome.plan_error = answer.error
                self.stopping = True
            elif what == "open":
                self._retire(name)
            else:
                self.free.append(name)  # the study's own error: the worker goes on
        elif what == "plan":
            self._planned(name, answer.value)
        else:
            if what == "tune":
                self.outcome.reports.append(answer.value)
                self.done += 1
            self.free.append(name)

    def _planned(self, name: str, plan: Plan) -> None:
        self.queue = deque(p for p in plan.studies if p.remaining > 0)
        self.total = len(self.queue)
        self.free.append(name)
        if self.queue:
            # The driver's own run holds the claims (`autotune status` shows it), one per study
            # being tuned; its workers' runs record the evaluations.
            self.run_id = self.store.start_run(
                plan.device_id, self.command, {"autotune": __version__}
            )
            self.claims = StudyClaims(self.store, plan.device_id, self.run_id)
        # More workers than studies: the rest go home, those still opening first.
        extra = len(self.live()) - max(1, self.total)
        opening = [w for w in self.names if self.doing.get(w) == "open"]
        for worker in (opening + self.free[::-1])[: max(0, extra)]:
            self._retire(worker)

    def _lost(self, name: str, err: BaseException | None, study: PlannedStudy | None) -> None:
        self.gone.add(name)
        if self.stopping:  # stopped by the interrupt: its exit code tells
            return
        if study is None:
            self._fail(name, err or RuntimeError("lost"), study)
            return
        # Lost for good (its process, its node): its study goes back to the front of the queue
        # for the next worker that is free, if one is left.
        if self.queue is not None:
            self.queue.appendleft(study)
        if not self.live():
            self._fail(name, err or RuntimeError("lost"), study)
            return
        self.outcome.returncodes.setdefault(name, 0)
        self.outcome.errors[name] = f"lost; its study went to another worker: {err}"[-ERROR_CHARS:]

    def _fail(self, name: str, err: BaseException, study: PlannedStudy | None = None) -> None:
        self.outcome.returncodes[name] = 1
        what = f"study {' '.join(study.key)}: " if study else ""
        text = f"{what}{str(err).strip() or type(err).__name__}\n"
        self.outcome.errors[name] = (self.outcome.errors.get(name, "") + text)[-ERROR_CHARS:]

    def _retire(self, name: str) -> None:
        self.gone.add(name)
        self.doing.pop(name, None)
        if name in self.free:
            self.free.remove(name)
        self.transport.retire(name)

    def live(self) -> list[str]:
        return [w for w in self.names if w not in self.gone]

    # -- handing out -----------------------------------------------------------------------------

    def hand_out(self) -> None:
        if self.stopping:
            return
        if self.queue is None:  # the first worker open plans the campaign
            if "plan" not in self.doing.values() and self.free:
                planner = self.free.pop(0)
                self.doing[planner] = "plan"
                self.transport.call(planner, "plan")
            return
        while self.free and self.queue:
            time_left = None
            if self.deadline is not None:
                time_left = self.deadline - time.monotonic()
                if time_left <= 0:
                    self.outcome.unreached += sum(1 for s in self.queue if s.remaining)
                    self.queue.clear()
                    return
            study = self._take()
            if study is None:  # each study left is held by another command: look again later
                return
            worker = self.free.pop(0)
            self.doing[worker] = "tune"
            self.tuning[worker] = study
            self.transport.call(worker, "tune", study.key, time_left)

    def _take(self) -> PlannedStudy | None:
        """The first queued study no other command holds, claimed for this campaign."""
        assert self.queue is not None
        for study in self.queue:
            if self.claims is None or self.claims.take(study.key):
                self.queue.remove(study)
                return study
        return None

    def renew(self) -> None:
        if self.claims is not None:
            for study in self.tuning.values():
                self.claims.renew(study.key)

    def finished(self) -> bool:
        if self.tuning or "plan" in self.doing.values():
            return False
        if self.stopping or not self.live():
            return True
        if self.queue is None or self.queue:
            return False
        # Every study is done. A worker still opening (the others were quicker: CI run 65) may
        # be about to fail, and its reason belongs in the outcome.
        if "open" not in self.doing.values():
            return True
        if self.opening_until is None:
            self.opening_until = time.monotonic() + OPEN_GRACE_S
        return time.monotonic() >= self.opening_until

    def progress(self, evaluations: int, elapsed_s: float) -> CampaignProgress:
        alive = 0 if self.finished() else len(self.doing)
        return CampaignProgress(
            evaluations,
            len(self.tuning),
            alive,
            len(self.names),
            elapsed_s,
            self.done if self.total is not None else None,
            self.total,
        )

    def release(self) -> None:
        if self.claims is not None:
            self.claims.release_all()
            self.store.finish_run(self.run_id)


def run_campaign(
    transport: Transport,
    storage: str,
    *,
    on_progress: Callable[[CampaignProgress], None] | None = None,
    time_limit_s: float | None = None,
    poll_s: float = POLL_S,
    stop_grace_s: float = STOP_GRACE_S,
    share: bool = False,
    command: str = "",
) -> WorkersOutcome:
    """Start the workers, have the first one open plan the campaign, hand the studies out longest
    first until each is done (or the time limit passes), showing the campaign's progress from
    the database; Ctrl-C (KeyboardInterrupt here) stops every worker as after its own. `command`
    is stored with the driver's run, the holder of its claims (passwords hidden by the caller)."""
    outcome = WorkersOutcome()
    since = datetime.now(timezone.utc).replace(microsecond=0)
    start = time.monotonic()
    # Created once here, so the workers do not all create it at once.
    store = Store(storage, share=share)
    driver = _Driver(transport, store, outcome, f"{command or 'autotune'} (scheduler)")
    codes: dict[str, int] = {}
    try:
        try:
            driver.names = transport.start()
            driver.doing = dict.fromkeys(driver.names, "open")
            if time_limit_s:
                driver.deadline = start + time_limit_s
            while True:
                if on_progress is not None:
                    on_progress(driver.progress(_progress(store, since), time.monotonic() - start))
                if driver.finished():
                    break
                for answer in transport.answers(poll_s):
                    driver.handle(answer)
                driver.hand_out()
                driver.renew()
        except KeyboardInterrupt:
            outcome.interrupted = driver.stopping = True
            _stop(transport, driver, stop_grace_s)
    finally:
        try:
            driver.release()
        finally:
            try:
                codes = transport.close(stop_grace_s)
            finally:
                outcome.elapsed_s = time.monotonic() - start
                try:
                    outcome.evaluations = _progress(store, since)[0]
                finally:
                    store.close()
    for name in driver.names:
        outcome.returncodes[name] = outcome.returncodes.get(name, codes.get(name, 0))
    return outcome


def _stop(transport: Transport, driver: _Driver, grace_s: float) -> None:
    """After Ctrl-C: every worker stops its study; wait up to grace_s for their reports."""
    if driver.queue is not None:
        driver.queue.clear()
    transport.interrupt()
    deadline = time.monotonic() + grace_s
    try:
        while driver.tuning and time.monotonic() < deadline:
            for answer in transport.answers(min(1.0, max(0.0, deadline - time.monotonic()))):
                driver.handle(answer)
    except KeyboardInterrupt:  # a second Ctrl-C: close at once
        pass


def _progress(store: Store, since: datetime) -> tuple[int, int]:
    try:
        return campaign_progress(store, since)
    except Exception:  # a busy database costs a progress line, never the campaign
        return 0, 0


__all__ = [
    "POLL_S",
    "STOP_GRACE_S",
    "Answer",
    "CampaignProgress",
    "Transport",
    "WorkersOutcome",
    "campaign_progress",
    "run_campaign",
]
