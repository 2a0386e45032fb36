"""A campaign's studies on a Ray cluster (`autotune run --ray`): one actor per GPU, studies handed
out longest first, a dead actor restarted by Ray and its study retried."""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from autotune.store import hide_passwords

# Ray restarts a dead actor (its GPU worker, its node) this many times, and retries the study it
# was tuning on the new one; the store's one row per configuration and the tuner's resume make a
# retry repeat at most the evaluation in flight.
MAX_RESTARTS = 3
CLOSE_WAIT_S = 30.0  # how long the driver waits for actors to finish their runs at the end


class RayUnavailable(RuntimeError):
    """Ray is missing, cannot connect, or the cluster cannot run this campaign; one line."""


@dataclass(frozen=True, slots=True)
class PlannedStudy:
    """A study as the driver schedules it: its key, the evaluations it has to go, their cost."""

    key: tuple[str, str]  # (family, problem key)
    remaining: int
    cost_s: float


@dataclass(frozen=True, slots=True)
class StudyReport:
    key: tuple[str, str]
    evaluated: int
    failures: int
    stopped: str
    interrupted: bool


class StudySession(Protocol):
    """What an actor holds for the campaign: the store, its GPU, a compiler and a tuner."""

    def plan(self) -> list[PlannedStudy]:
        """The campaign's studies on this device, longest first (the order of `--gpus`)."""

    def tune(self, key: tuple[str, str], time_left_s: float | None) -> StudyReport: ...

    def close(self) -> None: ...


# Builds an actor's session from its compile processes and a progress hook called after each
# evaluation (which stops the study by raising KeyboardInterrupt); pickled to every node.
SessionFactory = Callable[[int, Callable[[Any], None]], StudySession]


def is_sqlite(storage: str) -> bool:
    return "://" not in storage or storage.startswith("sqlite")


def node_jobs(nodes: list[dict], node_id: str, fallback: int | None = None) -> int:
    """Compile processes for one actor: its node's cores shared by the node's GPUs (one actor
    per GPU)."""
    for node in nodes:
        if node.get("NodeID") == node_id:
            resources = node.get("Resources", {})
            cpus = int(resources.get("CPU", 0)) or (fallback or os.cpu_count() or 1)
            return max(1, cpus // max(1, int(resources.get("GPU", 1))))
    return max(1, fallback or os.cpu_count() or 1)


def gpu_nodes(nodes: list[dict]) -> dict[str, int]:
    """{node id: GPUs} of the cluster's live nodes that have any."""
    return {
        n["NodeID"]: int(n.get("Resources", {}).get("GPU", 0))
        for n in nodes
        if n.get("Alive") and n.get("Resources", {}).get("GPU", 0) >= 1
    }


def check_placement(storage: str, nodes: dict[str, int], here: str) -> int:
    """How many actors the campaign gets (one per GPU); a RayUnavailable where the cluster has
    no GPU, or where a SQLite file (on this machine) would be written from other nodes."""
    if not nodes:
        raise RayUnavailable("--ray: the Ray cluster has no GPU (start its nodes with GPUs)")
    if not is_sqlite(storage):
        return sum(nodes.values())
    others = len([n for n in nodes if n != here])
    if others:
        raise RayUnavailable(
            f"--ray: storage {hide_passwords(storage)} is a SQLite file on this machine, but "
            f"{others} other node(s) of the Ray cluster have GPUs; give a PostgreSQL --storage "
            "(postgresql+psycopg://...) that every node reaches"
        )
    return nodes[here]


class StudyActor:
    """The body of one Ray actor (made remote by RayWorkers): a session kept open for the whole
    campaign, so the GPU worker and the compile processes start once per actor, not per study."""

    def __init__(self, factory: SessionFactory, jobs: int | None) -> None:
        import ray

        self.node_id = ray.get_runtime_context().get_node_id()
        self.factory = factory
        self.jobs = node_jobs(ray.nodes(), self.node_id) if jobs is None else jobs
        self._session: StudySession | None = None

    @property
    def session(self) -> StudySession:
        # Opened by the first call, not in __init__: an error there (a bad storage, nothing to
        # tune) is the call's, returned once, while Ray would restart an actor whose __init__
        # raised and retry it as if its node had died.
        if self._session is None:
            self._session = self.factory(self.jobs, self._check_cancelled)
        return self._session

    def _check_cancelled(self, progress: Any) -> None:
        import ray

        # The driver's ray.cancel (after Ctrl-C) sets this flag: the tuner stops as after its
        # own Ctrl-C, between two evaluations, and the study resumes next time.
        is_canceled = getattr(ray.get_runtime_context(), "is_canceled", None)
        if is_canceled is not None and is_canceled():  # Ray 2.4x and later
            raise KeyboardInterrupt

    def open(self) -> None:
        self.session  # noqa: B018 - opening it is the point

    def plan(self) -> list[PlannedStudy]:
        return self.session.plan()

    def tune(self, key: tuple[str, str], time_left_s: float | None) -> StudyReport:
        return self.session.tune(key, time_left_s)

    def close(self) -> None:
        if self._session is not None:
            self._session.close()


class RayWorkers:
    """The Workers (autotune.tuning.workers) of a campaign on Ray: one actor per GPU, each handed
    the next study (longest first) when it finishes one."""

    def __init__(
        self,
        factory: SessionFactory,
        storage: str,
        *,
        time_limit_s: float | None = None,
        jobs: int | None = None,
        max_restarts: int = MAX_RESTARTS,
    ) -> None:
        self.factory = factory
        self.storage = storage
        self.time_limit_s = time_limit_s
        self.jobs = jobs
        self.max_restarts = max_restarts
        self.names: list[str] = []
        self.actors: dict[str, Any] = {}
        self.queue: deque[PlannedStudy] = deque()
        # ObjectRef -> (actor, its study; None while the actor opens its GPU and store)
        self.inflight: dict[Any, tuple[str, PlannedStudy | None]] = {}
        self.total = 0
        self.done = 0
        self.codes: dict[str, int] = {}
        self.errors: dict[str, str] = {}
        self.reports: list[StudyReport] = []
        self.plan_error: BaseException | None = None  # why the campaign could not be planned
        self._deadline: float | None = None

    # -- Workers -------------------------------------------------------------------------------

    def start(self) -> None:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        here = ray.get_runtime_context().get_node_id()
        count = check_placement(self.storage, gpu_nodes(ray.nodes()), here)
        if self.time_limit_s:
            self._deadline = time.monotonic() + self.time_limit_s
        options: dict[str, Any] = {
            "num_gpus": 1,
            "num_cpus": 0,  # it compiles on processes of its own, sized to its node's cores
            "max_restarts": self.max_restarts,
            "max_task_retries": self.max_restarts,
        }
        if is_sqlite(self.storage):  # the file is on this machine: so are the actors
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(here, soft=False)
        remote = ray.remote(**options)(StudyActor)
        self.names = [f"ray{i}" for i in range(count)]
        self.actors = {name: remote.remote(self.factory, self.jobs) for name in self.names}
        # Every actor opens its GPU at once (those Ray cannot place yet wait for a free GPU, and
        # get a study only once open); the first plans the campaign meanwhile.
        first = self.names[0]
        for name in self.names[1:]:
            self.inflight[self.actors[name].open.remote()] = (name, None)
        try:
            planned = ray.get(self.actors[first].plan.remote())
        except Exception as err:
            self.plan_error = getattr(err, "cause", None) or err
            self._fail(first, err)
            self.names = [first]
            self._kill_all()
            return
        self.queue = deque(p for p in planned if p.remaining > 0)
        self.total = len(self.queue)
        for name in self.names[max(1, self.total) :]:  # more GPUs than studies: the rest go home
            ray.kill(self.actors.pop(name))
            self.codes[name] = 0
        self.inflight = {ref: job for ref, job in self.inflight.items() if job[0] in self.actors}
        self._hand_out(first)

    def alive(self) -> int:
        return len({name for name, _ in self.inflight.values()})

    def wait(self, timeout_s: float) -> None:
        import ray

        if not self.inflight:
            return
        ready, _ = ray.wait(list(self.inflight), num_returns=1, timeout=timeout_s)
        for ref in ready:
            name, study = self.inflight.pop(ref)
            try:
                report = ray.get(ref)
            except Exception as err:
                from ray.exceptions import TaskCancelledError

                if isinstance(err, TaskCancelledError):  # stopped after Ctrl-C: resumes later
                    continue
                if study is None:  # it could not open its GPU or the store: it gets no study
                    self._fail(name, err)
                    ray.kill(self.actors.pop(name), no_restart=True)
                    continue
                if self._actor_lost(err):
                    # Lost past its restarts (its node gone for good): its study goes back to
                    # the front of the queue for the next actor that is free, if one is left.
                    self.actors.pop(name, None)
                    self.queue.appendleft(study)
                    if not self.actors:
                        self._fail(name, err, study)
                        self.queue.clear()
                        continue
                    self.codes.setdefault(name, 0)
                    self.errors[name] = f"lost; its study went to another actor: {err}"[:3000]
                    busy = {n for n, _ in self.inflight.values()}
                    for other in [n for n in self.actors if n not in busy]:
                        self._hand_out(other)
                    continue
                self._fail(name, err, study)  # the study's own error: the actor goes on
            else:
                if study is not None:
                    self.reports.append(report)
                    self.done += 1
                    if report.interrupted:
                        continue
            self._hand_out(name)

    def studies(self) -> tuple[int | None, int | None, int | None]:
        busy = sum(study is not None for _, study in self.inflight.values())
        return busy, self.done, self.total

    def stop(self, grace_s: float) -> None:
        import ray

        self.queue.clear()
        for ref in list(self.inflight):
            ray.cancel(ref)  # sets the flag the actor's tuner checks after each evaluation
        deadline = time.monotonic() + grace_s
        while self.inflight and time.monotonic() < deadline:
            self.wait(max(0.0, min(1.0, deadline - time.monotonic())))

    def close(self) -> None:
        import ray

        self.queue.clear()
        # Finish each actor's run in the store and stop its GPU worker and compile processes.
        closing = [actor.close.remote() for actor in self.actors.values()]
        if closing:
            ray.wait(closing, num_returns=len(closing), timeout=CLOSE_WAIT_S)
        self._kill_all()

    def results(self) -> tuple[dict[str, int], dict[str, str]]:
        codes = {name: self.codes.get(name, 0) for name in self.names}
        return codes, dict(self.errors)

    # -- internals -----------------------------------------------------------------------------

    def _hand_out(self, name: str) -> None:
        if name not in self.actors or not self.queue:
            return
        time_left = None
        if self._deadline is not None:
            time_left = self._deadline - time.monotonic()
            if time_left <= 0:
                self.queue.clear()
                return
        study = self.queue.popleft()
        ref = self.actors[name].tune.remote(study.key, time_left)
        self.inflight[ref] = (name, study)

    def _fail(self, name: str, err: BaseException, study: PlannedStudy | None = None) -> None:
        self.codes[name] = 1
        what = f"study {' '.join(study.key)}: " if study else ""
        text = str(err).strip()
        self.errors[name] = (self.errors.get(name, "") + f"{what}{text}\n")[-3000:]

    @staticmethod
    def _actor_lost(err: BaseException) -> bool:
        from ray.exceptions import RayActorError

        return isinstance(err, RayActorError)

    def _kill_all(self) -> None:
        import ray

        for actor in self.actors.values():
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # gone already
                pass
        self.actors.clear()


def connect(address: str | None, **init: Any) -> bool:
    """Join the Ray cluster at address (None: the one RAY_ADDRESS names or a running local one,
    else a new one on this machine). False if this process was connected already."""
    try:
        import ray
    except ImportError:
        raise RayUnavailable(
            "--ray needs Ray: pip install 'autotune-dse[ray]' (on every node of the cluster)"
        ) from None
    if ray.is_initialized():
        return False
    try:
        # The actors' output stays in Ray's logs (/tmp/ray/session_latest/logs on each node):
        # the driver shows one progress line, not every worker's.
        ray.init(address=address or None, log_to_driver=False, **init)
    except Exception as err:
        raise RayUnavailable(
            f"--ray {address or ''}: cannot join a Ray cluster: {str(err).strip().splitlines()[0]}"
        ) from None
    return True


__all__ = [
    "MAX_RESTARTS",
    "PlannedStudy",
    "RayUnavailable",
    "RayWorkers",
    "SessionFactory",
    "StudyActor",
    "StudyReport",
    "StudySession",
    "check_placement",
    "connect",
    "gpu_nodes",
    "is_sqlite",
    "node_jobs",
]
