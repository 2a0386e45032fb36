"""Schema 7: the evaluations' unique index over an identity digest; its upgrade from schema 6
(the committed campaign file is one), its collision check, and the bytes a stored evaluation
costs (issue 34: at most 700)."""

from __future__ import annotations

import gzip
import shutil
import sqlite3
from pathlib import Path

import pytest

import autotune.store.schema as schema
from autotune.model.problem import ConvProblem
from autotune.model.records import DeviceInfo, Measurement, Status
from autotune.model.space import Config
from autotune.store import SCHEMA_VERSION, Store, StoreError
from autotune.store.merge import open_merge_source
from autotune.store.schema import DIGESTED_IDENTITY, identity_digest
from autotune.store.sqlite_file import bytes_per_evaluation
from tests.committed import CAMPAIGNS

H100 = DeviceInfo("NVIDIA H100 80GB HBM3", "9.0", 132, "580.65", "13.0", "13.0", 1980, 80 << 30)
PROBLEM = ConvProblem(N=32, K=3, C=16, F=32)
FAMILY = "direct_naive"
# The campaign the figures were measured on: 29,643 evaluations of schema 6.
CAMPAIGN = CAMPAIGNS / "20261129-h100.db.gz"
TARGET_BYTES = 700  # issue 34: at most this per stored evaluation with its samples


def _measurement(ms: float) -> Measurement:
    return Measurement(Status.OK, time_ms=ms, samples_ms=(ms, ms * 1.01, ms * 0.99))


def _schema_6_file(directory: Path) -> Path:
    if not CAMPAIGN.is_file():
        pytest.skip(f"{CAMPAIGN.name} is not in this checkout")
    path = directory / "v6.db"
    with gzip.open(CAMPAIGN) as packed, path.open("wb") as out:
        shutil.copyfileobj(packed, out)
    return path


def _rows(path: Path, table: str, leave_out: tuple[str, ...] = ()) -> list[tuple]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        names = [r[1] for r in conn.execute(f"PRAGMA table_info({table})") if r[1] not in leave_out]
        columns = ", ".join(f'"{n}"' for n in names)
        return conn.execute(f"SELECT {columns} FROM {table} ORDER BY id").fetchall()


def _digests_match_their_fields(path: Path) -> bool:
    fields = ", ".join(DIGESTED_IDENTITY)
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        rows = conn.execute(f"SELECT identity_digest, {fields} FROM evaluations").fetchall()
    return bool(rows) and all(r[0] == identity_digest(*r[1:]) for r in rows)


def test_the_digest_is_of_every_identity_field_but_the_device() -> None:
    base = (FAMILY, PROBLEM.key, '{"TILE":8}', 2, "1fcc6399c246754b")
    assert identity_digest(*base) == identity_digest(*base)
    assert -(2**63) <= identity_digest(*base) < 2**63  # a BIGINT in SQLite and PostgreSQL
    for i, other in enumerate(("tiled", "N=33", '{"TILE":16}', 1, "")):
        changed = (*base[:i], other, *base[i + 1 :])
        assert identity_digest(*changed) != identity_digest(*base)
    assert identity_digest(*base[:3], "2", base[4]) == identity_digest(*base)


def test_a_schema_6_file_migrates_in_place_keeping_every_row(tmp_path: Path) -> None:
    path = _schema_6_file(tmp_path)
    before = {t: _rows(path, t) for t in ("evaluations", "runs", "baselines", "ceilings")}
    with Store(path) as store:  # a writing open upgrades the file itself
        assert len(store.history(every_protocol=True)) == len(before["evaluations"]) == 29643
        device_id = int(store.devices()["id"].iloc[0])
        first = store.history(every_protocol=True).iloc[0]
        problem = ConvProblem(**first["shape"])
        protocol, run_id = int(first["protocol"]), int(first["run_id"])  # not NumPy's
        again = Measurement(Status.OK, time_ms=1.0, samples_ms=(1.0,), protocol=protocol)
        config = Config.from_json(first["config"])
        # Already stored: the new unique index knows it (nothing added).
        digest = first["kernel_digest"]
        args = (run_id, device_id, first["family"], problem, config, again, 1)
        assert not store.record(*args, kernel_digest=digest)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM meta").fetchone() == (str(SCHEMA_VERSION),)
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert _rows(path, "evaluations", leave_out=("identity_digest",)) == before["evaluations"]
    for table in ("runs", "baselines", "ceilings"):
        assert _rows(path, table) == before[table]
    assert _digests_match_their_fields(path)


def test_a_reading_command_leaves_a_schema_6_file_as_it_was(tmp_path: Path) -> None:
    path = _schema_6_file(tmp_path)
    data = path.read_bytes()
    with Store(path, create=False) as store:  # upgraded in a temporary copy
        assert len(store.best()) > 0
    assert path.read_bytes() == data


def test_a_merge_stores_each_row_with_its_digest_and_matches_by_the_fields(tmp_path) -> None:
    path = _schema_6_file(tmp_path)
    target = tmp_path / "merged.db"
    with Store(target) as store:
        with open_merge_source(path) as source:
            assert store.merge_from(source).added["evaluations"] == 29643
        with open_merge_source(path) as source:
            assert store.merge_from(source).skipped["evaluations"] == 29643
    assert _digests_match_their_fields(target)


def test_a_stored_evaluation_costs_at_most_700_bytes(tmp_path: Path) -> None:
    # The measurement: the campaign merged into a fresh database, compacted, over its
    # evaluations (759 bytes at schema 6, 655 at schema 7 with SQLite 3.40).
    path = _schema_6_file(tmp_path)
    assert bytes_per_evaluation(path) > TARGET_BYTES  # schema 6, as committed
    target = tmp_path / "fresh.db"
    with Store(target) as store:
        with open_merge_source(path) as source:
            store.merge_from(source)
    assert bytes_per_evaluation(target) <= TARGET_BYTES


def test_a_digest_collision_is_refused_and_named(tmp_path: Path, monkeypatch) -> None:
    with Store(tmp_path / "s.db") as store:
        device_id = store.register_device(H100)
        run_id = store.start_run(device_id, "autotune run", {})
        monkeypatch.setattr(schema, "identity_digest", lambda *fields: 42)
        config_a, config_b = Config.of({"TILE": 8}), Config.of({"TILE": 16})
        args = (run_id, device_id, FAMILY, PROBLEM)
        assert store.record(*args, config_a, _measurement(1.0), 1)
        assert not store.record(*args, config_a, _measurement(2.0), 1)  # a duplicate
        with pytest.raises(StoreError, match="hash collision") as err:
            store.record(*args, config_b, _measurement(3.0), 1)
        assert "\n" not in str(err.value)
        assert len(store.history()) == 1


def test_backfilled_rows_get_the_digest_of_their_new_identity(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with Store(path) as store:
        device_id = store.register_device(H100)
        run_id = store.start_run(device_id, "autotune run", {})
        for tile in (8, 16):
            config = Config.of({"TILE": tile})
            store.record(run_id, device_id, FAMILY, PROBLEM, config, _measurement(1.0), 1)
        # The same configuration already measured under the new digest keeps none.
        config = Config.of({"TILE": 16})
        m = _measurement(1.0)
        store.record(run_id, device_id, FAMILY, PROBLEM, config, m, 1, kernel_digest="abc")
        assert store.backfill_digests({FAMILY: "abc"}) == 1
        assert sorted(store.history()["kernel_digest"]) == ["", "abc", "abc"]
        assert not store.record(
            run_id, device_id, FAMILY, PROBLEM, Config.of({"TILE": 8}), m, 1, kernel_digest="abc"
        )
    assert _digests_match_their_fields(path)
