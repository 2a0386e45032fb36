"""The scheduler's Ray transport (`autotune run --ray`): one actor per GPU of a Ray cluster, each
holding its campaign open across the studies the driver hands it; a dead actor is restarted by
Ray and its study retried."""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from autotune.store import hide_passwords
from autotune.tuning.scheduler import Answer
from autotune.tuning.worker_session import Plan, SessionFactory, StudyReport, StudySession

# Ray restarts a dead actor (its GPU worker, its node) this many times, and retries the study it
# was tuning on the new one; the store's one row per configuration and the tuner's resume make a
# retry repeat at most the evaluation in flight.
MAX_RESTARTS = 3
CLOSE_WAIT_S = 30.0  # how long the driver waits for actors to finish their runs at the end


class RayUnavailable(RuntimeError):
    """Ray is missing, cannot connect, or the cluster cannot run this campaign; one line."""


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
    """The body of one Ray actor (made remote by RayTransport): a session kept open for the whole
    campaign, so the GPU worker and the compile processes start once per actor, not per study.
    Ray's CUDA_VISIBLE_DEVICES shows the actor its GPU as device 0."""

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

    def plan(self) -> Plan:
        return self.session.plan()

    def tune(self, key: tuple[str, str], time_left_s: float | None) -> StudyReport:
        return self.session.tune(key, time_left_s)

    def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            session.close()


class RayTransport:
    """The Transport (tuning/scheduler.py) of one Ray actor per GPU of the cluster (on this node
    only where the storage is a SQLite file here)."""

    def __init__(
        self,
        factory: SessionFactory,
        storage: str,
        *,
        jobs: int | None = None,
        max_restarts: int = MAX_RESTARTS,
    ) -> None:
        self.factory = factory
        self.storage = storage
        self.jobs = jobs
        self.max_restarts = max_restarts
        self.actors: dict[str, Any] = {}
        self.inflight: dict[Any, str] = {}  # ObjectRef -> its actor's name
        self.closing: list[Any] = []  # retired actors finishing their runs
        self.retired: set[str] = set()

    def start(self) -> list[str]:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        here = ray.get_runtime_context().get_node_id()
        count = check_placement(self.storage, gpu_nodes(ray.nodes()), here)
        options: dict[str, Any] = {
            "num_gpus": 1,
            "num_cpus": 0,  # it compiles on processes of its own, sized to its node's cores
            "max_restarts": self.max_restarts,
            "max_task_retries": self.max_restarts,
        }
        if is_sqlite(self.storage):  # the file is on this machine: so are the actors
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(here, soft=False)
        remote = ray.remote(**options)(StudyActor)
        # Every actor opens its GPU at once; those Ray cannot place yet wait for a free GPU.
        for name in (f"ray{i}" for i in range(count)):
            self.actors[name] = remote.remote(self.factory, self.jobs)
            self.inflight[self.actors[name].open.remote()] = name
        return list(self.actors)

    def call(self, worker: str, method: str, *args: Any) -> None:
        self.inflight[getattr(self.actors[worker], method).remote(*args)] = worker

    def answers(self, timeout_s: float) -> list[Answer]:
        import ray
        from ray.exceptions import RayActorError, TaskCancelledError

        if not self.inflight:
            time.sleep(max(0.0, timeout_s))
            return []
        ready, _ = ray.wait(list(self.inflight), num_returns=1, timeout=timeout_s)
        out = []
        for ref in ready:
            name = self.inflight.pop(ref)
            try:
                out.append(Answer(name, ray.get(ref)))
            except TaskCancelledError:  # stopped after Ctrl-C before it began
                out.append(Answer(name, cancelled=True))
            except RayActorError as err:  # lost past its restarts (its node gone for good)
                self.actors.pop(name, None)
                out.append(Answer(name, error=err, lost=True))
            except Exception as err:  # the call's own error, as the actor raised it
                out.append(Answer(name, error=getattr(err, "cause", None) or err))
        return out

    def interrupt(self) -> None:
        import ray

        for ref in list(self.inflight):
            ray.cancel(ref)  # sets the flag the actor's tuner checks after each evaluation

    def retire(self, worker: str) -> None:
        actor = self.actors.get(worker)
        for ref in [r for r, name in self.inflight.items() if name == worker]:
            del self.inflight[ref]
        if actor is not None and worker not in self.retired:
            self.retired.add(worker)
            self.closing.append(actor.close.remote())

    def close(self, grace_s: float) -> dict[str, int]:
        import ray

        # Finish each actor's run in the store and stop its GPU worker and compile processes.
        working = [a for name, a in self.actors.items() if name not in self.retired]
        closing = self.closing + [actor.close.remote() for actor in working]
        if closing:
            wait_s = min(CLOSE_WAIT_S, max(grace_s, 1.0))
            ray.wait(closing, num_returns=len(closing), timeout=wait_s)
        for actor in self.actors.values():
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # gone already
                pass
        self.actors.clear()
        return {}


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
        # Ray's own INFO lines (which cluster, the dashboard) stay out of the command's output.
        init.setdefault("logging_level", logging.WARNING)
        # A cluster this call starts needs no idle Python worker per CPU core ready for tasks:
        # the campaign runs one actor per GPU, and 32 cores' worth of prestarted workers (each
        # importing Ray) compete with the campaign's first compiles. Read by a raylet this
        # process starts only; a user's own setting wins.
        os.environ.setdefault("RAY_prestart_worker_first_driver", "0")
        ray.init(address=address or None, log_to_driver=False, **init)
    except Exception as err:
        raise RayUnavailable(
            f"--ray {address or ''}: cannot join a Ray cluster: {str(err).strip().splitlines()[0]}"
        ) from None
    return True


__all__ = [
    "MAX_RESTARTS",
    "RayTransport",
    "RayUnavailable",
    "StudyActor",
    "check_placement",
    "connect",
    "gpu_nodes",
    "is_sqlite",
    "node_jobs",
]
