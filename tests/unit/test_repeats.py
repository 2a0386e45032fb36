"""Schema 8's repeats: an evaluation measured again, best() ranking by the median of a
configuration's measurements, and the repeats carried by the upgrade, forget, merge and pack, on
SQLite and PostgreSQL."""

from __future__ import annotations

import gzip
import shutil
import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd
import pytest
import sqlalchemy as sa

from autotune.model.problem import ConvProblem
from autotune.model.records import DeviceInfo, Measurement, Status
from autotune.model.space import Config
from autotune.store import SCHEMA_VERSION, Store, StoreError
from autotune.store.campaigns import pack_campaign
from autotune.store.merge import open_merge_source
from autotune.store.schema import repeats_table, runs_table
from tests.pg_server import pg_server, pg_url  # noqa: F401 - fixtures

DEVICE = DeviceInfo("NVIDIA H200", "9.0", 132, "580.65")
PROBLEM = ConvProblem(N=14, K=3, C=64, F=64)
OTHER = ConvProblem(N=7, K=3, C=64, F=64)
FAMILY = "direct_naive"


# The PostgreSQL cases start a private server: out of the quick loop (-m "not slow").
@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.slow)])
def url(request, tmp_path: Path) -> str:
    if request.param == "postgres":
        return request.getfixturevalue("pg_url")
    return str(tmp_path / "r.db")


def ms(value: float) -> Measurement:
    return Measurement.from_samples([value, value * 1.01, value * 0.99])


def tile(n: int) -> Config:
    return Config.of({"TILE": n})


class Study:
    """A store with one run on DEVICE, recording evaluations of one problem by tile."""

    def __init__(self, store: Store, problem: ConvProblem = PROBLEM) -> None:
        self.store, self.problem = store, problem
        self.device_id = store.register_device(DEVICE)
        self.run_id = store.start_run(self.device_id, "autotune run", {})

    def record(self, n: int, first: float | Measurement) -> int:
        m = first if isinstance(first, Measurement) else ms(first)
        assert self.store.record(
            self.run_id, self.device_id, FAMILY, self.problem, tile(n), m, self.problem.flops
        )
        return int(self.store.history()["id"].iloc[-1])

    def repeat(self, evaluation_id: int, *times: float) -> None:
        self.store.add_repeats(evaluation_id, self.run_id, [ms(t) for t in times])


def repeats(store: Store) -> list[tuple]:
    """(evaluation's config, sequence, time_ms) of every stored repeat."""
    r = repeats_table.c
    with store._engine.connect() as conn:
        rows = conn.execute(sa.select(r.evaluation_id, r.sequence, r.time_ms)).all()
    configs = dict(zip(store.history()["id"], store.history()["config"], strict=True))
    return sorted((configs[e], s, round(t, 6)) for e, s, t in rows)


def test_best_ranks_by_the_median_of_each_configurations_measurements(url) -> None:
    with Store(url) as store:
        study = Study(store)
        lucky = study.record(1, 1.0)  # fast once, slow every time after
        steady = study.record(2, 1.1)
        study.record(3, 1.2)  # measured once
        tied = study.record(4, 0.9)  # its median ties tile 3's, stored later
        study.record(5, Measurement(Status.WRONG_RESULT, error="off"))
        study.repeat(lucky, 1.4, 1.3)
        study.repeat(steady, 1.1, 1.15)
        study.repeat(tied, 1.2, 1.5)
        top = store.best(top=5)
        assert [Config.from_json(c)["TILE"] for c in top["config"]] == [2, 3, 4, 1]
        assert top["time_ms"].tolist() == pytest.approx([1.1, 1.2, 1.2, 1.3])
        assert top["measurements"].tolist() == [3, 1, 3, 3]
        assert top["gflops"].tolist() == pytest.approx(
            [PROBLEM.flops / (t * 1e-3) / 1e9 for t in (1.1, 1.2, 1.2, 1.3)]
        )
        # Repeats are not evaluations: the study's counts are its five configurations.
        assert set(top["evaluations"]) == {5} and set(top["failures"]) == {1}
        (first,) = store.best().itertuples()
        assert Config.from_json(first.config)["TILE"] == 2 and first.measurements == 3
        assert store.study_best(study.device_id, FAMILY, PROBLEM, 2, "").config == tile(2)
        # A lucky first time no longer wins once measured again; history keeps first times.
        assert store.history()["time_ms"].tolist()[:4] == pytest.approx([1.0, 1.1, 1.2, 0.9])


def test_top_takes_enough_unrepeated_rows_of_every_study(url) -> None:
    with Store(url) as store:
        one, two = Study(store), Study(store, OTHER)
        ids = {n: one.record(n, 1.0 + n / 10) for n in range(1, 7)}  # 1.1 .. 1.6
        for n in range(1, 5):
            two.record(n, 2.0 - n / 10)  # 1.9 .. 1.6
        one.repeat(ids[1], 2.0, 2.1)  # the fastest first time ranks last of these
        one.repeat(ids[6], 1.0, 1.0)  # the slowest first time ranks first
        best = store.best(top=3)
        by_study = {k: list(g["config"]) for k, g in best.groupby("problem_key", sort=False)}
        assert [Config.from_json(c)["TILE"] for c in by_study[PROBLEM.key]] == [6, 2, 3]
        assert [Config.from_json(c)["TILE"] for c in by_study[OTHER.key]] == [4, 3, 2]
        assert len(store.best(top=100)) == 6 + 4


def test_add_repeats_numbers_them_and_refuses_what_is_not_a_time(url) -> None:
    with Store(url) as store:
        study = Study(store)
        ok = study.record(1, 1.0)
        failed = study.record(2, Measurement(Status.WRONG_RESULT, error="off"))
        study.repeat(ok, 1.1)
        study.repeat(ok, 1.2, 1.3)
        assert repeats(store) == [
            ('{"TILE":1}', 1, 1.1),
            ('{"TILE":1}', 2, 1.2),
            ('{"TILE":1}', 3, 1.3),
        ]
        for evaluation_id, why in ((failed, "it is WRONG_RESULT"), (999, "no such evaluation")):
            with pytest.raises(StoreError, match=why) as err:
                study.repeat(evaluation_id, 1.0)
            assert "\n" not in str(err.value)
        with pytest.raises(StoreError, match="not TIMEOUT"):
            store.add_repeats(ok, study.run_id, [Measurement(Status.TIMEOUT)])
        assert len(repeats(store)) == 3  # nothing of a refused call is stored


def test_forget_deletes_an_evaluations_repeats_with_it(url) -> None:
    with Store(url) as store:
        one, two = Study(store), Study(store, OTHER)
        one.repeat(one.record(1, 1.0), 1.1, 1.2)
        two.repeat(two.record(1, 2.0), 2.1)
        assert store.forget(FAMILY, problem_key=PROBLEM.key) == 1
        assert [m for _, _, m in repeats(store)] == [2.1]
        assert store.forget(FAMILY) == 1 and repeats(store) == []


def _as_version_7(url: str) -> None:
    """The database as schema 7 wrote it: no repeats table."""
    engine = sa.create_engine(url if "://" in url else f"sqlite:///{url}")
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE repeats")
        conn.exec_driver_sql("UPDATE meta SET value = '7' WHERE key = 'schema_version'")
    engine.dispose()


def test_a_version_7_database_gains_the_table_keeping_its_rows(url) -> None:
    with Store(url) as store:
        study = Study(store)
        for n in (1, 2, 3):
            study.record(n, float(n))
        before = store.history()
    _as_version_7(url)
    with Store(url) as store:  # a writing open upgrades it
        pd.testing.assert_frame_equal(store.history(), before)
        assert store.best()["measurements"].tolist() == [1]
        first = int(before["id"].iloc[0])
        store.add_repeats(first, int(before["run_id"].iloc[0]), [ms(1.5)])
        assert store._schema_version() == str(SCHEMA_VERSION) == "8"
        assert store.best()["time_ms"].tolist() == pytest.approx([1.25])


def test_a_reading_command_reads_a_version_7_file_and_leaves_it_as_it_was(tmp_path) -> None:
    path = tmp_path / "v7.db"
    with Store(path) as store:
        Study(store).record(1, 1.0)
    _as_version_7(str(path))
    data = path.read_bytes()
    with Store(path, create=False) as store:  # upgraded in a temporary copy
        assert store.best()["measurements"].tolist() == [1]
    assert path.read_bytes() == data


def test_a_merge_carries_repeats_under_the_targets_ids(url, tmp_path: Path) -> None:
    source = tmp_path / "source.db"
    with Store(source) as store:
        study = Study(store)
        shared = study.record(1, 1.0)
        study.repeat(shared, 1.3, 1.4)
        study.repeat(study.record(2, 1.1), 1.1)
    with Store(url) as target:
        own = Study(target)
        for n in (7, 8, 9):  # the target's ids of the source's rows differ
            own.record(n, 5.0)
        mine = own.record(1, 1.0)  # the same evaluation, measured again here too
        own.repeat(mine, 1.35)
        with open_merge_source(source) as opened:
            counts = target.merge_from(opened)
        assert (counts.added["repeats"], counts.skipped["repeats"]) == (3, 0)
        assert repeats(target) == [
            ('{"TILE":1}', 1, 1.35),
            ('{"TILE":1}', 2, 1.3),
            ('{"TILE":1}', 3, 1.4),
            ('{"TILE":2}', 1, 1.1),
        ]
        with open_merge_source(source) as opened:  # merged before: nothing twice
            assert target.merge_from(opened).skipped["repeats"] == 3
        assert len(repeats(target)) == 4
        best = target.best(top=2)
        assert best["time_ms"].tolist() == pytest.approx([1.1, 1.35 / 2 + 1.3 / 2])
        assert best["measurements"].tolist() == [2, 4]


def test_a_packed_campaign_holds_the_repeats_of_its_evaluations(tmp_path: Path) -> None:
    cut = datetime(2026, 12, 1, tzinfo=timezone.utc)
    with Store(tmp_path / "all.db") as store:
        old, new = Study(store), Study(store)
        for study, started in ((old, cut - timedelta(days=1)), (new, cut + timedelta(hours=1))):
            with store._engine.begin() as conn:
                r = runs_table.c
                conn.execute(
                    runs_table.update().where(r.id == study.run_id).values(started_at=started)
                )
        old.repeat(old.record(1, 1.0), 1.2, 1.3)
        new.repeat(new.record(2, 1.1), 1.0, 1.05)
        # The later run measured the earlier run's evaluation again: no evaluation to hold it.
        store.add_repeats(int(store.history()["id"].iloc[0]), new.run_id, [ms(1.1)])
        every = pack_campaign(store, tmp_path / "every.db.gz")
        since = pack_campaign(store, tmp_path / "since.db.gz", cut)
    assert (every["evaluations"], every["repeats"]) == (2, 5)
    assert (since["evaluations"], since["repeats"]) == (1, 2)
    with open_merge_source(tmp_path / "since.db.gz") as packed, Store(tmp_path / "t.db") as fresh:
        fresh.merge_from(packed)
        assert repeats(fresh) == [('{"TILE":2}', 1, 1.0), ('{"TILE":2}', 2, 1.05)]
        assert fresh.best()["measurements"].tolist() == [3]
    plain = tmp_path / "every.db"
    with gzip.open(tmp_path / "every.db.gz") as packed, plain.open("wb") as out:
        shutil.copyfileobj(packed, out)
    with sqlite3.connect(plain) as conn:
        assert conn.execute("SELECT count(*) FROM repeats").fetchone() == (5,)
