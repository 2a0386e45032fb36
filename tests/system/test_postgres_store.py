"""The store end to end on PostgreSQL as on SQLite: tables, record, best, claims, forget, status,
and the upgrades of a version-3 and a version-6 database."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pandas as pd
import pytest
import sqlalchemy as sa

from autotune.model.problem import ConvProblem
from autotune.model.records import DeviceInfo, Measurement, Status
from autotune.model.space import Config
from autotune.reports import claims_status, format_status, run_status, runs_since
from autotune.store import SCHEMA_VERSION, Store, StudyClaim
from autotune.store.schema import (
    DIGESTED_IDENTITY,
    EVALUATION_IDENTITY,
    evaluations_table,
    identity_digest,
)
from autotune.tuning.claims import StudyClaims
from tests.pg_server import pg_server, pg_url  # noqa: F401 - fixtures

DEVICE = DeviceInfo(name="Synthetic GPU", compute_capability="9.0", sm_count=132)
PROBLEM = ConvProblem(N=9, K=3, C=1, F=2)
OTHER = ConvProblem(N=12, K=3, C=1, F=1, B=2)


# The PostgreSQL cases start a private server: out of the quick loop (-m "not slow").
@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.slow)])
def url(request, tmp_path) -> str:
    if request.param == "postgres":
        return request.getfixturevalue("pg_url")
    return str(tmp_path / "s.db")


def _config(bx: int) -> Config:
    return Config.of({"BLOCK_X": bx, "BLOCK_Y": 4, "FILTER_IN_CONST": 0})


def test_record_best_forget_and_the_unique_constraint(url) -> None:
    with Store(url) as store:
        device_id = store.register_device(DEVICE)
        assert store.register_device(DEVICE) == device_id
        run_id = store.start_run(device_id, "autotune run", {"autotune": "0"})
        for bx, ms in ((8, 2.0), (16, 1.0), (32, 3.0)):
            m = Measurement.from_samples([ms, ms])
            assert store.record(run_id, device_id, "direct_naive", PROBLEM, _config(bx), m, 10**9)
        failed = Measurement(Status.WRONG_RESULT, error="off")
        assert store.record(run_id, device_id, "direct_naive", OTHER, _config(8), failed, 10**9)
        ok = Measurement.from_samples([5.0])
        assert store.record(run_id, device_id, "direct_naive", OTHER, _config(16), ok, 10**9)
        # The same configuration again: refused by the unique constraint, reported, not raised.
        again = Measurement.from_samples([0.1])
        assert not store.record(run_id, device_id, "direct_naive", PROBLEM, _config(8), again, 1)
        store.finish_run(run_id)

        best = store.best()
        assert list(best["evaluations"]) == [3, 2] and list(best["failures"]) == [0, 1]
        assert best["time_ms"].iloc[0] == pytest.approx(1.0)
        assert Config.from_json(best["config"].iloc[0]) == _config(16)
        assert best["shape"].iloc[0]["N"] == 9
        assert len(store.history()) == 5
        assert store.summary()["evaluations"].sum() == 5
        assert [e.config for e in store.evaluations(device_id, "direct_naive", PROBLEM)] == [
            _config(8),
            _config(16),
            _config(32),
        ]
        assert store.forget("direct_naive", problem_key=OTHER.key) == 2
        assert store.forget("direct_naive", device="Synthetic GPU") == 3
        assert store.history().empty


def test_claims_and_status_on_either_database(url) -> None:
    with Store(url) as store:
        device_id = store.register_device(DEVICE)
        before = datetime.now(timezone.utc) - timedelta(seconds=5)
        runs = [store.start_run(device_id, f"autotune run --gpu {i}", {}) for i in range(2)]
        now = time.time()
        a = StudyClaim(runs[0], "host-a", 11, now + 100)
        b = StudyClaim(runs[1], "host-b", 12, now + 100)
        study = (device_id, "direct_naive", PROBLEM.key)
        assert store.claim(*study, a, now) is None
        assert store.claim(*study, b, now) == a
        assert store.claim(*study, b, now + 101) is None  # a's lease ran out
        assert not store.renew_claim(*study, runs[0], now + 500)
        assert store.renew_claim(*study, runs[1], now + 500)
        m = Measurement.from_samples([1.0])
        store.record(runs[1], device_id, "direct_naive", PROBLEM, _config(8), m, 1)

        active = run_status(store, minutes=5)
        assert list(active["id"]) == runs  # both unfinished
        assert list(active["evaluations"]) == [0, 1] and list(active["recent"]) == [0, 1]
        assert list(active["claims"]) == [0, 1]
        assert active["lease_left_s"].iloc[1] > 400
        held = claims_status(store)
        assert list(held["run_id"]) == [runs[1]] and list(held["host"]) == ["host-b"]
        text = format_status(active, held)
        assert "host-b" in text and "autotune run --gpu 1" in text and PROBLEM.key in text

        started = runs_since(store, before)  # what `run --gpus` polls for its progress line
        assert list(started["id"]) == runs and started["evaluations"].sum() == 1
        assert runs_since(store, datetime.now(timezone.utc) + timedelta(hours=1)).empty
        assert store.release_claims(runs[1]) == 1
        for run_id in runs:
            store.finish_run(run_id)
        assert run_status(store, minutes=5)["id"].tolist() == [runs[1]]  # recorded lately
        assert run_status(store, minutes=5, all_runs=True)["id"].tolist() == runs
        assert "no study is claimed now" in format_status(run_status(store), claims_status(store))


def test_a_version_3_database_is_upgraded_keeping_its_rows(url) -> None:
    with Store(url) as store:
        device_id = store.register_device(DEVICE)
        run_id = store.start_run(device_id, "run", {})
        m = Measurement.from_samples([1.0])
        store.record(run_id, device_id, "direct_naive", PROBLEM, _config(8), m, 1)
        with store._engine.begin() as conn:
            conn.exec_driver_sql("DROP TABLE claims")
            conn.exec_driver_sql("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    # Two processes' worth of openers at once must agree (the loser finds the new version).
    first, second = Store(url), Store(url)
    try:
        for store in (first, second):
            assert len(store.history()) == 1 and store.claims().empty
        assert StudyClaims(first, device_id, run_id).take(("direct_naive", PROBLEM.key))
        assert len(second.claims()) == 1
        with first._engine.connect() as conn:
            version = conn.exec_driver_sql(
                "SELECT value FROM meta WHERE key = 'schema_version'"
            ).scalar()
        assert version == str(SCHEMA_VERSION)
    finally:
        first.close()
        second.close()


def _downgrade_to_version_6(store: Store) -> None:
    """The evaluations table as schema 6 had it: no identity digest, the unique constraint over
    the identity's fields themselves."""
    old_unique = ", ".join(EVALUATION_IDENTITY)
    with store._engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql("ALTER TABLE evaluations DROP CONSTRAINT uq_evaluations")
            conn.exec_driver_sql("ALTER TABLE evaluations DROP COLUMN identity_digest")
            conn.exec_driver_sql(
                f"ALTER TABLE evaluations ADD CONSTRAINT uq_evaluations UNIQUE ({old_unique})"
            )
        else:  # SQLite drops no column of a constraint: the table is made again
            ddl = conn.exec_driver_sql(
                "SELECT sql FROM sqlite_master WHERE name = 'evaluations'"
            ).scalar()
            ddl = ddl.replace("CREATE TABLE evaluations", "CREATE TABLE v6")
            ddl = ddl.replace("identity_digest BIGINT NOT NULL, ", "")
            new_unique = "device_id, family, problem_key, identity_digest"
            assert new_unique in ddl
            ddl = ddl.replace(new_unique, old_unique)
            conn.exec_driver_sql(ddl)
            kept = ", ".join(
                f'"{c.name}"' for c in evaluations_table.c if c.name != "identity_digest"
            )
            conn.exec_driver_sql(f"INSERT INTO v6 ({kept}) SELECT {kept} FROM evaluations")
            conn.exec_driver_sql("DROP TABLE evaluations")
            conn.exec_driver_sql("ALTER TABLE v6 RENAME TO evaluations")
        conn.exec_driver_sql("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
        columns = {c["name"] for c in sa.inspect(conn).get_columns("evaluations")}
        assert "identity_digest" not in columns


def test_a_version_6_database_gets_identity_digests_keeping_its_rows(url, tmp_path) -> None:
    with Store(url) as store:
        device_id = store.register_device(DEVICE)
        run_id = store.start_run(device_id, "run", {})
        for problem, bx, digest in ((PROBLEM, 8, "d1"), (PROBLEM, 16, ""), (OTHER, 8, "d1")):
            m = Measurement.from_samples([float(bx), bx + 0.5])
            store.record(run_id, device_id, "direct_naive", problem, _config(bx), m, 1, digest)
        before = store.history().drop(columns="identity_digest")
        _downgrade_to_version_6(store)
    first, second = Store(url), Store(url)  # two openers at once agree, as for version 3
    try:
        for store in (first, second):
            pd.testing.assert_frame_equal(store.history().drop(columns="identity_digest"), before)
        again = Measurement.from_samples([1.0])
        args = (run_id, device_id, "direct_naive", PROBLEM, _config(8), again, 1)
        assert not first.record(*args, "d1")  # stored already: the new constraint knows it
        assert second.record(*args, "d2")  # another kernel's: a new evaluation
        with first._engine.connect() as conn:
            version = conn.exec_driver_sql(
                "SELECT value FROM meta WHERE key = 'schema_version'"
            ).scalar()
            fields = ", ".join(DIGESTED_IDENTITY)
            rows = conn.exec_driver_sql(f"SELECT identity_digest, {fields} FROM evaluations").all()
        assert version == str(SCHEMA_VERSION) and len(rows) == 4
        assert all(row[0] == identity_digest(*row[1:]) for row in rows)
    finally:
        first.close()
        second.close()
    # The upgrade left the schema as it was for the databases made after it in this process:
    # a fresh one still refuses an evaluation stored twice (PostgreSQL's upgrade once took the
    # unique constraint out of every later CREATE TABLE).
    with Store(str(tmp_path / "after.db")) as fresh:
        device_id = fresh.register_device(DEVICE)
        run_id = fresh.start_run(device_id, "run", {})
        args = (run_id, device_id, "direct_naive", PROBLEM, _config(8), again, 1, "d1")
        assert fresh.record(*args) and not fresh.record(*args)


def test_a_plain_postgresql_url_means_psycopg_3(request) -> None:
    plain = request.getfixturevalue("pg_url").replace("postgresql+psycopg://", "postgresql://")
    with Store(plain) as store:
        assert store.url.startswith("postgresql://")  # as given, in messages
        assert store._engine.dialect.driver == "psycopg"
        assert store.summary().empty
