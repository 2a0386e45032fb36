"""The campaign scheduler's own rules over an in-memory transport: longest first, each study
handed out once, a lost worker's study handed to another, the claims that keep other commands
off, the time limit, Ctrl-C, a campaign that cannot be planned."""

from __future__ import annotations

import os
import sqlite3
import time
from collections import deque

import pytest

from autotune.model.records import DeviceInfo
from autotune.store import Store, StudyClaim
from autotune.tuning.scheduler import Answer, run_campaign
from autotune.tuning.worker_session import Plan, PlannedStudy, StudyReport

DEVICE = DeviceInfo(name="Fake GPU", compute_capability="9.0", sm_count=132)


class MemoryTransport:
    """Workers that answer at once (or, with `hold`, only once interrupted)."""

    def __init__(self, workers: int, plan: Plan, *, lose=(), hold=False):
        self.names = [f"w{i}" for i in range(workers)]
        self.plan = plan
        self.lose = set(lose or ())  # the studies whose first worker dies tuning them
        self.hold = hold
        self.pending: deque[Answer] = deque()
        self.held: list[Answer] = []
        self.calls: list[tuple[str, str, tuple]] = []
        self.retired: list[str] = []
        self.interrupted = False
        self.closed = False

    def start(self) -> list[str]:
        self.pending.extend(Answer(name) for name in self.names)
        return list(self.names)

    def call(self, worker: str, method: str, *args) -> None:
        self.calls.append((worker, method, args))
        if method == "plan":
            self.pending.append(Answer(worker, self.plan))
        elif args[0] in self.lose:
            self.lose.discard(args[0])
            self.pending.append(Answer(worker, error=RuntimeError("node gone"), lost=True))
        elif self.hold:
            self.held.append(Answer(worker, StudyReport(args[0], 0, 0, "", True)))
        else:
            self.pending.append(Answer(worker, StudyReport(args[0], 1, 0, "", False)))

    def answers(self, timeout_s: float) -> list[Answer]:
        out = list(self.pending)
        self.pending.clear()
        return out

    def interrupt(self) -> None:
        self.interrupted = True
        self.pending.extend(self.held)
        self.held.clear()

    def retire(self, worker: str) -> None:
        self.retired.append(worker)

    def close(self, grace_s: float) -> dict[str, int]:
        self.closed = True
        return {}

    def tuned(self) -> list[str]:
        return [args[0][1] for _, method, args in self.calls if method == "tune"]


@pytest.fixture
def storage(tmp_path):
    path = str(tmp_path / "s.db")
    with Store(path) as store:
        store.register_device(DEVICE)
    return path


def _plan(storage: str, costs: dict[str, float], remaining: int = 1) -> Plan:
    with Store(storage) as store:
        device_id = store.register_device(DEVICE)
    studies = sorted(costs.items(), key=lambda kc: -kc[1])
    return Plan(device_id, tuple(PlannedStudy(("f", k), remaining, c) for k, c in studies))


def test_studies_are_handed_out_longest_first_each_once(storage) -> None:
    plan = _plan(storage, {"a": 1.0, "b": 5.0, "c": 3.0, "d": 2.0})
    plan = Plan(plan.device_id, (*plan.studies, PlannedStudy(("f", "done"), 0, 9.0)))
    transport = MemoryTransport(2, plan)
    seen = []
    outcome = run_campaign(transport, storage, on_progress=seen.append, poll_s=0.01)
    assert outcome.exit_code == 0 and outcome.returncodes == {"w0": 0, "w1": 0}
    assert transport.tuned() == ["b", "c", "d", "a"]  # nothing left to do: "done" is not sent
    assert outcome.short == 0
    assert sorted(r.key[1] for r in outcome.reports) == ["a", "b", "c", "d"]
    assert [m for _, m, _ in transport.calls].count("plan") == 1 and transport.closed
    assert seen[-1].alive == 0 and (seen[-1].studies_done, seen[-1].studies_total) == (4, 4)
    with Store(storage) as store:
        assert store.claims().empty  # every claim released
    with sqlite3.connect(storage) as con:  # the driver's run, holder of the claims, finished
        runs = con.execute("SELECT command, finished_at IS NOT NULL FROM runs").fetchall()
    assert runs == [("autotune (scheduler)", 1)]


def test_more_workers_than_studies_send_the_rest_home(storage) -> None:
    transport = MemoryTransport(4, _plan(storage, {"a": 1.0, "b": 2.0}))
    outcome = run_campaign(transport, storage, poll_s=0.01)
    assert outcome.exit_code == 0 and sorted(transport.tuned()) == ["a", "b"]
    assert len(transport.retired) == 2


def test_a_lost_workers_study_goes_to_another(storage) -> None:
    transport = MemoryTransport(
        2, _plan(storage, {"a": 3.0, "b": 2.0, "c": 1.0}), lose={("f", "a")}
    )
    outcome = run_campaign(transport, storage, poll_s=0.01)
    assert outcome.exit_code == 0, outcome.errors
    assert sorted(r.key[1] for r in outcome.reports) == ["a", "b", "c"]
    first, second = [w for w, m, a in transport.calls if m == "tune" and a[0][1] == "a"]
    assert first != second and outcome.returncodes == {"w0": 0, "w1": 0}
    assert "lost; its study went to another worker" in outcome.errors[first]


def test_the_last_worker_lost_fails_the_campaign(storage) -> None:
    transport = MemoryTransport(1, _plan(storage, {"a": 3.0, "b": 1.0}), lose={("f", "a")})
    outcome = run_campaign(transport, storage, poll_s=0.01)
    assert outcome.exit_code == 1 and "study f a: node gone" in outcome.errors["w0"]
    assert transport.tuned() == ["a"]  # nobody is left for "b"


def test_a_study_another_command_holds_is_left_to_it(storage) -> None:
    """Independent commands on one database (another host's `autotune run`): the driver claims
    each study it hands out, and leaves one that another run holds until the time limit."""
    plan = _plan(storage, {"a": 3.0, "b": 1.0})
    with Store(storage) as store:
        other = store.start_run(plan.device_id, "autotune run (another host)", {})
        holder = StudyClaim(other, "another-host", 4242, time.time() + 3600)
        assert store.claim(plan.device_id, "f", "a", holder, time.time()) is None
    transport = MemoryTransport(2, plan)
    outcome = run_campaign(transport, storage, poll_s=0.05, time_limit_s=1)
    assert transport.tuned() == ["b"] and outcome.exit_code == 0
    assert outcome.short == 1  # "a", still queued at the time limit: the same command resumes
    with Store(storage) as store:
        assert list(store.claims()["host"]) == ["another-host"]  # ours released, theirs kept


def test_the_drivers_claims_keep_another_command_off_a_study_it_tunes(storage) -> None:
    plan = _plan(storage, {"a": 3.0})
    seen_claims = []

    class Watching(MemoryTransport):
        def call(self, worker, method, *args):
            if method == "tune":
                with Store(storage) as store:
                    seen_claims.append(store.claims()[["problem_key", "pid"]].values.tolist())
            super().call(worker, method, *args)

    outcome = run_campaign(Watching(1, plan), storage, poll_s=0.01, command="autotune run x")
    assert outcome.exit_code == 0 and seen_claims == [[["a", os.getpid()]]]


def test_ctrl_c_stops_every_worker_and_ends_with_130(storage) -> None:
    transport = MemoryTransport(2, _plan(storage, {"a": 3.0, "b": 2.0, "c": 1.0}), hold=True)

    def interrupt_once_both_tune(progress) -> None:
        if progress.studies_held == 2:
            raise KeyboardInterrupt

    outcome = run_campaign(transport, storage, on_progress=interrupt_once_both_tune, poll_s=0.01)
    assert outcome.interrupted and outcome.exit_code == 130 and transport.interrupted
    assert sorted(transport.tuned()) == ["a", "b"]  # "c" was never handed out
    assert all(r.interrupted for r in outcome.reports) and not outcome.failed
    with Store(storage) as store:
        assert store.claims().empty


def test_a_campaign_that_cannot_be_planned_says_why(storage) -> None:
    class NoPlan(MemoryTransport):
        def call(self, worker, method, *args):
            self.pending.append(Answer(worker, error=ValueError("nothing to tune: no shapes")))

    outcome = run_campaign(NoPlan(2, _plan(storage, {})), storage, poll_s=0.01)
    assert isinstance(outcome.plan_error, ValueError) and outcome.exit_code == 1


def test_a_worker_that_cannot_open_leaves_the_campaign_to_the_others(storage) -> None:
    class OneBroken(MemoryTransport):
        def start(self):
            names = super().start()
            self.pending[0] = Answer("w0", error=RuntimeError("GPU 0 is not there"))
            return names

    transport = OneBroken(2, _plan(storage, {"a": 2.0, "b": 1.0}))
    outcome = run_campaign(transport, storage, poll_s=0.01)
    assert sorted(transport.tuned()) == ["a", "b"] and outcome.returncodes["w0"] == 1
    assert "GPU 0 is not there" in outcome.errors["w0"] and "w0" in transport.retired
