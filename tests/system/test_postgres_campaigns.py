"""Several independent campaigns on one database (PostgreSQL and SQLite), as separate `autotune
run` commands on several hosts are: their claims split the studies, the union of their work is a
single run's, nothing is evaluated twice, a killed one's study is finished by the others. (One
command's own workers are handed their studies by its scheduler: test_transports.py.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from autotune.gpu.nvrtc_library import CompilerUnavailable, nvrtc_version
from autotune.store import Store
from autotune.store.schema import repeats_table
from tests.campaign_worker import SIX_PROBLEMS as CONCURRENT_PROBLEMS
from tests.campaign_worker import evaluated as logged
from tests.pg_server import pg_server, pg_url  # noqa: F401 - fixtures

# Campaigns of worker subprocesses, on SQLite and on a private PostgreSQL server: out of the
# quick loop (-m 'not slow').
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
STORAGES = ["sqlite", "postgres"]
STUDY_SIZE = 14  # valid direct_naive configurations of each of CONCURRENT_PROBLEMS


@pytest.fixture(params=STORAGES)
def storage(request, tmp_path) -> str:
    if request.param == "postgres":
        return request.getfixturevalue("pg_url")
    return str(tmp_path / "shared.db")


def _worker_argv(storage: str, cache: Path, log: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "tests.campaign_worker", storage, str(cache), str(log), *extra]


def _start(storage: str, cache: Path, log: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        _worker_argv(storage, cache, log, *extra),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _finish(proc: subprocess.Popen) -> None:
    assert proc.wait(timeout=300) == 0, proc.stderr.read().decode()[-3000:]


def _stored(storage: str) -> list[tuple[str, str, str]]:
    with Store(storage) as store:
        rows = store.history()[["family", "problem_key", "config"]]
    return sorted(map(tuple, rows.itertuples(index=False)))


def confirmed(storage: str, rows) -> int:
    """The repeats stored, checked: each study's best measured twice more by `autotune run`'s
    workers (the synthetic times are exact, so its best stays the best and is confirmed once),
    in whichever run finished it. (campaign_worker's runs confirm nothing: their log is of
    evaluations.)"""
    with Store(storage) as store:
        best = store.best()
        with store._engine.connect() as conn:
            repeats = conn.execute(sa.select(sa.func.count()).select_from(repeats_table)).scalar()
    studies = len({row[1] for row in rows})
    assert len(best) == studies and set(best["measurements"]) == {3}
    assert repeats == 2 * studies
    return repeats


def _check_database(storage: str, killed: int = 0) -> None:
    """Integrity as each engine sees it, no orphan rows, the unique constraint holding, every
    claim released and every run finished but the killed ones."""
    with Store(storage) as store:
        engine = store._engine
        with engine.connect() as conn:
            q = conn.exec_driver_sql
            if engine.dialect.name == "sqlite":
                assert q("PRAGMA integrity_check").fetchone() == ("ok",)
                assert q("PRAGMA foreign_key_check").fetchall() == []
            else:
                _check_postgres_indexes(conn)
            orphans = """SELECT count(*) FROM evaluations e
                LEFT JOIN runs r ON r.id = e.run_id LEFT JOIN devices d ON d.id = e.device_id
                WHERE r.id IS NULL OR d.id IS NULL"""
            assert q(orphans).scalar() == 0
            twice = """SELECT count(*) FROM (SELECT 1 FROM evaluations
                GROUP BY device_id, family, problem_key, config HAVING count(*) > 1) AS t"""
            assert q(twice).scalar() == 0
            assert q("SELECT count(*) FROM claims").scalar() == 0
            assert q("SELECT count(*) FROM runs WHERE finished_at IS NULL").scalar() == killed


def _check_postgres_indexes(conn: sa.Connection) -> None:
    """amcheck's B-tree check on every index of ours (where the contrib module is installed)."""
    available = conn.exec_driver_sql(
        "SELECT count(*) FROM pg_available_extensions WHERE name = 'amcheck'"
    ).scalar()
    if not available:
        return
    conn.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS amcheck")
    indexes = conn.exec_driver_sql(
        "SELECT c.oid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public'"
    ).scalars()
    for oid in indexes:
        conn.exec_driver_sql(f"SELECT bt_index_check({int(oid)}, true)")
    conn.commit()


@pytest.fixture(scope="module")
def expected(tmp_path_factory) -> tuple[Path, list]:
    """One uninterrupted single worker: the expected evaluations, and a warm cubin cache so the
    concurrent workers spend their time evaluating rather than compiling."""
    try:
        nvrtc_version()
    except CompilerUnavailable as err:
        pytest.skip(str(err))
    where = tmp_path_factory.mktemp("single")
    cache, log = where / "cubins", where / "single.log"
    _finish(_start(str(where / "single.db"), cache, log))
    rows = _stored(str(where / "single.db"))
    assert len(rows) == len(logged(log)) == STUDY_SIZE * len(CONCURRENT_PROBLEMS)
    return cache, rows


def _wait_ready(tmp_path: Path, log: Path, procs: list[subprocess.Popen]) -> None:
    """Until every worker has opened the store and built its tuner; then let them all go."""
    waited = time.monotonic()
    while len(list(tmp_path.glob(f"{log.name}.ready.*"))) < len(procs):
        dead = [p for p in procs if p.poll() is not None]
        if dead or time.monotonic() - waited > 120:
            for p in procs:
                p.kill()
            why = dead[0].stderr.read().decode()[-3000:] if dead else "not ready after 120 s"
            pytest.fail(f"a worker did not start: {why}")
        time.sleep(0.05)
    Path(f"{log}.go").touch()


def test_four_workers_share_the_studies_and_their_union_is_a_single_run(
    storage, tmp_path, expected
) -> None:
    cache, rows = expected
    log = tmp_path / "four.log"
    procs = [_start(storage, cache, log, "--wait-go") for _ in range(4)]
    _wait_ready(tmp_path, log, procs)
    for proc in procs:
        _finish(proc)
    assert _stored(storage) == rows  # the union is exactly the single run's
    evaluated = logged(log)
    configs = [defines for _, defines in evaluated]
    assert len(configs) == len(set(configs)) == len(rows)  # nothing evaluated twice or lost
    assert len({pid for pid, _ in evaluated}) >= 3  # six studies were spread over the workers
    _check_database(storage)


def _kill_one_mid_study(
    storage: str, tmp_path: Path, cache: Path, victim_extra: tuple[str, ...]
) -> tuple[subprocess.Popen, list[subprocess.Popen], Path]:
    """Three workers; the first is killed with SIGKILL after a few evaluations of its study."""
    log = tmp_path / "kill.log"
    victim = _start(storage, cache, log, "--wait-go", *victim_extra)
    others = [_start(storage, cache, log, "--wait-go") for _ in range(2)]
    _wait_ready(tmp_path, log, [victim, *others])
    waited = time.monotonic()
    while sum(pid == victim.pid for pid, _ in logged(log)) < 3:
        assert time.monotonic() - waited < 120 and victim.poll() is None
        time.sleep(0.01)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    return victim, others, log


def _after_kill(storage, log, victim, others, rows) -> None:
    assert _stored(storage) == rows  # nothing lost: the others finished the victim's study
    evaluated = [defines for _, defines in logged(log)]
    # At most the evaluation in flight at the kill (done, not yet recorded) is done again.
    assert len(evaluated) - len(set(evaluated)) <= 1
    assert set(evaluated) == {d for _, d in logged(log)}
    assert victim.pid in {pid for pid, _ in logged(log)}
    _check_database(storage, killed=1)


def test_a_killed_workers_study_is_taken_over_at_once_on_the_same_host(
    storage, tmp_path, expected
) -> None:
    cache, rows = expected
    victim, others, log = _kill_one_mid_study(storage, tmp_path, cache, ())
    began = time.monotonic()
    for proc in others:
        _finish(proc)
    assert time.monotonic() - began < 120  # the 600 s lease was not waited out
    _after_kill(storage, log, victim, others, rows)


LEASE_S = 4.0  # the victim's lease in the expiry test: long enough for CI's gaps, short to wait


def test_a_killed_workers_study_on_another_host_is_taken_over_at_lease_expiry(
    storage, tmp_path, expected
) -> None:
    cache, rows = expected
    extra = ("--lease", str(LEASE_S), "--host", "another-host")
    victim, others, log = _kill_one_mid_study(storage, tmp_path, cache, extra)
    killed_at = time.time()
    with Store(storage) as store:
        held = store.claims()
    mine = held[held["pid"] == victim.pid]
    assert list(mine["host"]) == ["another-host"]  # its pid means nothing here: wait for expiry
    expires_at = float(mine["expires_at"].iloc[0])
    assert expires_at > killed_at
    for proc in others:
        _finish(proc)
    _after_kill(storage, log, victim, others, rows)
    # The victim's study was finished only after its lease ran out.
    with Store(storage) as store:
        history = store.history()
    study = history[history["problem_key"] == mine["problem_key"].iloc[0]]
    runs = dict(zip(study["config"], study["run_id"], strict=True))
    taken = study[study["run_id"] != study["run_id"].iloc[0]]
    assert len(taken) > 0 and len(set(runs.values())) >= 2
    later = [t.timestamp() for t in taken["created_at"].map(_utc)]
    assert min(later) >= expires_at - 0.5


def _utc(value):
    import pandas as pd

    when = pd.Timestamp(value)
    return when.tz_localize("UTC") if when.tzinfo is None else when
