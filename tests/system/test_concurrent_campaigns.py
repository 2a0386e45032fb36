"""Two campaigns on one database share its studies: no corruption, no configuration run twice."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from autotune.families.direct_naive import DirectNaive
from autotune.gpu.compiler import Compiler
from autotune.gpu.nvrtc_library import CompilerUnavailable, nvrtc_version
from autotune.model.problem import ConvProblem
from autotune.model.records import DeviceInfo, Measurement
from autotune.model.space import Config, DeviceLimits
from autotune.store import SCHEMA_VERSION, Store, StudyClaim
from autotune.tuning.claims import StudyClaims, host_identity, process_gone
from autotune.tuning.runners import GpuRunner
from autotune.tuning.studies import plan_studies
from autotune.tuning.tuner import CONFIRM_ROUNDS, Tuner
from tests.campaign_worker import SIX_PROBLEMS as CONCURRENT_PROBLEMS
from tests.campaign_worker import evaluated as logged
from tests.conftest import SyntheticEvaluator

ROOT = Path(__file__).resolve().parents[2]
DEVICE = DeviceInfo(name="Synthetic GPU", compute_capability="9.0", sm_count=132)


def _campaign(db: Path, cache: Path, log: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "tests.campaign_worker"]
    return subprocess.Popen(
        [*command, str(db), str(cache), str(log), "--wait-go"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _finish(proc: subprocess.Popen) -> None:
    assert proc.wait(timeout=300) == 0, proc.stderr.read().decode()


def _finished(db: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(db) as con:
        return con.execute("SELECT family, problem_key, config FROM evaluations").fetchall()


def _check_database(db: Path) -> None:
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert con.execute("PRAGMA foreign_key_check").fetchall() == []
        assert con.execute("SELECT count(*) FROM claims").fetchone() == (0,)  # all released
        assert con.execute("SELECT count(*) FROM runs WHERE finished_at IS NULL").fetchone()[0] <= 1


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[Path, list]:
    """One uninterrupted single run: the expected evaluations, and a warm cubin cache so the
    concurrent runs spend their time evaluating rather than compiling."""
    try:
        nvrtc_version()
    except CompilerUnavailable as err:
        pytest.skip(str(err))
    where = tmp_path_factory.mktemp("single")
    cache, log = where / "cubins", where / "single.log"
    (where / "single.log.go").touch()
    _finish(_campaign(where / "single.db", cache, log))
    expected = sorted(_finished(where / "single.db"))
    assert len(expected) == len(logged(log)) == 14 * len(CONCURRENT_PROBLEMS)
    return cache, expected


@pytest.mark.slow  # two campaigns in subprocesses
def test_two_campaigns_at_once_share_the_studies_and_repeat_nothing(tmp_path, reference) -> None:
    cache, expected = reference
    db, log = tmp_path / "shared.db", tmp_path / "shared.log"
    procs = [_campaign(db, cache, log) for _ in range(2)]
    # Both have opened the store and built their tuner before either tunes anything.
    waited = time.monotonic()
    while len(list(tmp_path.glob("shared.log.ready.*"))) < 2:
        dead = [p for p in procs if p.poll() is not None]
        if dead or time.monotonic() - waited > 120:
            for p in procs:
                p.kill()
            why = dead[0].stderr.read().decode() if dead else "still not ready after 120 s"
            pytest.fail(f"a campaign did not start: {why}")
        time.sleep(0.05)
    (tmp_path / "shared.log.go").touch()
    for proc in procs:
        _finish(proc)

    assert sorted(_finished(db)) == expected  # the union is exactly the single run's
    evaluated = logged(log)
    configs = [defines for _, defines in evaluated]
    assert len(configs) == len(set(configs)) == len(expected)  # nothing evaluated twice
    assert {pid for pid, _ in evaluated} == {p.pid for p in procs}  # both did part of the work
    _check_database(db)


@pytest.mark.slow  # campaigns in subprocesses, one killed
def test_a_killed_runs_claim_is_taken_over_and_its_study_finished(tmp_path, reference) -> None:
    cache, expected = reference
    db, log = tmp_path / "taken.db", tmp_path / "taken.log"
    (tmp_path / "taken.log.go").touch()
    first = _campaign(db, cache, log)
    waited = time.monotonic()
    while len(logged(log)) < 5:  # well inside its first study
        assert time.monotonic() - waited < 120 and first.poll() is None
        time.sleep(0.02)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    with Store(db) as store:
        held = store.claims()
    assert list(held["pid"]) == [first.pid]  # it died holding its study, lease far from over
    assert held["expires_at"].iloc[0] > time.time() + 60

    began = time.monotonic()
    second = _campaign(db, cache, log)
    _finish(second)
    assert time.monotonic() - began < 120  # it did not wait out the 600 s lease
    assert sorted(_finished(db)) == expected
    evaluated = [defines for _, defines in logged(log)]
    assert len(evaluated) - len(set(evaluated)) <= 1  # only the evaluation in flight at the kill
    assert {pid for pid, _ in logged(log)} == {first.pid, second.pid}
    _check_database(db)


# ---------------------------------------------------------------------------------------------
# In one process: a store, claims held by runs elsewhere, a tuner on a synthetic GPU


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "c.db") as s:
        yield s


def _elsewhere(store: Store, device_id: int, problem: ConvProblem, expires_at: float) -> int:
    """A claim on problem's study by a run on another machine; returns that run's id."""
    run_id = store.start_run(device_id, "autotune run (elsewhere)", {})
    holder = StudyClaim(run_id, "another-host", 4242, expires_at)
    assert store.claim(device_id, "direct_naive", problem.key, holder, time.time()) is None
    return run_id


def _tuner(store: Store, tmp_path: Path, evaluator: SyntheticEvaluator) -> Tuner:
    try:
        nvrtc_version()
    except CompilerUnavailable as err:
        pytest.skip(str(err))
    tuner = Tuner(
        GpuRunner(Compiler(cache_dir=tmp_path / "cubins"), evaluator), store, strategy="random"
    )
    tuner.claims.poll_s = 0.05
    return tuner


def _studies(problems):
    studies, _ = plan_studies([(DirectNaive(), p) for p in problems], DeviceLimits())
    return studies


def _evaluator() -> SyntheticEvaluator:
    return SyntheticEvaluator(lambda d: 1.0 + d["BLOCK_X"] / 64 + d["BLOCK_Y"] / 8)


def test_claims_one_holder_at_a_time_renew_release_and_expiry(store) -> None:
    device_id = store.register_device(DEVICE)
    runs = [store.start_run(device_id, "run", {}) for _ in range(3)]
    study = (device_id, "direct_naive", "N=9,K=3,C=1,F=2")
    a, b = StudyClaim(runs[0], "h", 1, 100.0), StudyClaim(runs[1], "h", 2, 1000.0)
    assert store.claim(*study, a, now=10.0) is None
    assert store.claim(*study, b, now=10.0) == a  # held: the holder is named
    assert store.claim(*study, StudyClaim(runs[0], "h", 1, 200.0), now=50.0) is None  # renewed
    assert store.claim(*study, b, now=150.0) is not None
    assert store.renew_claim(*study, runs[0], 300.0)
    assert not store.renew_claim(*study, runs[1], 300.0)  # not b's to renew
    assert store.claim(*study, b, now=301.0) is None  # a's lease ran out: b takes it over
    assert not store.renew_claim(*study, runs[0], 900.0)  # a learns it lost the study
    c = StudyClaim(runs[2], "h", 3, 900.0)
    assert store.claim(*study, c, now=302.0, take_from=runs[0]) == b  # a's, not b's, is stale
    assert store.claim(*study, c, now=302.0, take_from=runs[1]) is None  # b known dead
    assert store.release_claims(runs[2]) == 1 and store.claims().empty


@pytest.mark.slow
def test_a_study_held_elsewhere_is_left_alone_until_the_deadline(store, tmp_path) -> None:
    evaluator = _evaluator()
    tuner = _tuner(store, tmp_path, evaluator)
    held, free = CONCURRENT_PROBLEMS[:2]
    _elsewhere(store, tuner.device_id, held, time.time() + 3600)
    outcome = tuner.run(_studies([held, free]), budget=2, time_limit_s=3)
    assert [s.study.problem for s in outcome.studies] == [free]  # the free study first, alone
    assert outcome.short == 1  # the held one, waited for until the deadline: said at the end
    assert {dict(j.plan.defines)["N"] for j in evaluator.jobs} == {free.N} != {held.N}
    # Its two evaluations and its best measured twice more (the time limit ends the search,
    # not the confirmation).
    assert len(evaluator.jobs) == 2 + 2 and tuner.claims.waits > 0
    assert list(store.claims()["host"]) == ["another-host"]  # ours released, theirs kept


def test_an_expired_claim_from_another_host_is_taken_over_and_finished(store, tmp_path) -> None:
    evaluator = _evaluator()
    tuner = _tuner(store, tmp_path, evaluator)
    problem = CONCURRENT_PROBLEMS[0]
    _elsewhere(store, tuner.device_id, problem, time.time() - 1)  # that machine went away
    outcome = tuner.run(_studies([problem]), budget=None, time_limit_s=60)
    assert outcome.studies[0].evaluated == outcome.studies[0].stored == 14
    assert not outcome.studies[0].stopped and store.claims().empty


def test_a_waiting_run_takes_a_released_study_and_resumes_its_history(store, tmp_path) -> None:
    evaluator = _evaluator()
    tuner = _tuner(store, tmp_path, evaluator)
    problem = CONCURRENT_PROBLEMS[1]
    other = _elsewhere(store, tuner.device_id, problem, time.time() + 3600)
    study = _studies([problem])[0]
    done = study.space.configs[:5]
    digest = tuner.runner.kernel_digest(study.family)  # the same code as this run's

    def other_run_finishes_five() -> None:
        time.sleep(0.3)
        for config in done:  # recorded by the holder while this run waits
            store.record(
                other,
                tuner.device_id,
                "direct_naive",
                problem,
                config,
                _ok(),
                problem.flops,
                digest,
            )
        store.release_claims(other)

    helper = threading.Thread(target=other_run_finishes_five)
    helper.start()
    outcome = tuner.run([study], budget=None, time_limit_s=60)
    helper.join()
    result = outcome.studies[0]
    assert result.stored == 14 and result.evaluated == 9  # read at claim time, not at start
    names = set(study.space.space.names)
    jobs = [Config.of({k: v for k, v in j.plan.defines if k in names}) for j in evaluator.jobs]
    ours = set(jobs[: result.evaluated])  # the search's; then the study's best measured again
    assert len(ours) == 9 and not ours & set(done)
    # The other run's 1.0 ms were the fastest: three of them (CONFIRM_ROUNDS) were measured
    # twice more (slower here, each hands the top on), whoever stored them.
    assert len(jobs) == 9 + 2 * CONFIRM_ROUNDS and set(jobs[9:]) <= set(done)


def _ok() -> Measurement:
    return Measurement.from_samples([1.0])


def test_a_run_that_lost_its_claim_stops_the_study(store, tmp_path) -> None:
    evaluator = _evaluator()
    tuner = _tuner(store, tmp_path, evaluator)
    problem = CONCURRENT_PROBLEMS[2]
    thief = store.start_run(tuner.device_id, "autotune run (elsewhere)", {})
    calls = []

    def steal_after_three(d):
        calls.append(d)
        if len(calls) == 3:  # as if our lease had run out and another run took the study
            store.release_claims(tuner.run_id)
            holder = StudyClaim(thief, "another-host", 1, time.time() + 3600)
            store.claim(tuner.device_id, "direct_naive", problem.key, holder, time.time())
        return 1.0

    evaluator.cost = steal_after_three
    tuner.claims.lease_s = 0.0  # renew after every evaluation
    outcome = tuner.run(_studies([problem]), budget=None, time_limit_s=60)
    assert outcome.studies[0].evaluated == 3
    assert outcome.studies[0].stopped == "taken over by another run"
    assert list(store.claims()["run_id"]) == [thief]


def test_process_gone_and_host_identity() -> None:
    assert not process_gone(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert process_gone(child.pid)
    assert host_identity() == host_identity() and host_identity()


def test_a_version_3_database_gains_the_claims_table_keeping_its_rows(tmp_path) -> None:
    db = tmp_path / "v3.db"
    with Store(db) as s:
        device_id = s.register_device(DEVICE)
        run_id = s.start_run(device_id, "run", {})
        s.record(run_id, device_id, "direct_naive", CONCURRENT_PROBLEMS[0], _config(), _ok(), 1)
    with sqlite3.connect(db) as con:
        con.execute("DROP TABLE claims")
        con.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    with Store(db) as s:
        assert len(s.history()) == 1 and s.claims().empty
        claims = StudyClaims(s, device_id, run_id)
        assert claims.take(("direct_naive", "N=9,K=3,C=1,F=2"))
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT value FROM meta").fetchone() == (str(SCHEMA_VERSION),)
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def _config() -> Config:
    return Config.of({"BLOCK_X": 8, "BLOCK_Y": 4, "FILTER_IN_CONST": 0})
