"""The results database: round trips, no duplicates, best never failed, resume, errors."""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path

import pytest

from autotune.problem import ConvProblem
from autotune.records import DeviceInfo, Measurement, Status
from autotune.space import Config
from autotune.store import SCHEMA_VERSION, Store, StoredEvaluation, StoreError

H100 = DeviceInfo("NVIDIA H100 80GB HBM3", "9.0", 132, "580.65", "13.0", "13.0", 1980, 80 << 30)
PROBLEM = ConvProblem(N=32, K=3, C=16, F=32)
FAMILY = "direct_naive"


def ok(time_ms: float, **extra: object) -> Measurement:
    return Measurement(Status.OK, time_ms=time_ms, samples_ms=(time_ms,) * 3, **extra)  # type: ignore[arg-type]


def cfg(tile: int) -> Config:
    return Config.of({"TILE": tile, "UNROLL": True})


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "results" / "autotune.db"


@pytest.fixture
def store(db: Path):
    s = Store(db)
    yield s
    s.close()


def setup_run(store: Store) -> tuple[int, int]:
    device_id = store.register_device(H100)
    return store.start_run(device_id, "autotune run", {"autotune": "0.1.0"}), device_id


def test_path_becomes_sqlite_with_directory_and_wal(db: Path, store: Store) -> None:
    assert store.url == f"sqlite:///{db}"
    assert db.is_file()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("SELECT value FROM meta").fetchone()[0] == str(SCHEMA_VERSION)


def test_register_device_twice_gives_same_id(store: Store) -> None:
    first = store.register_device(H100)
    assert store.register_device(H100) == first
    other = DeviceInfo("NVIDIA A100-SXM4-40GB", "8.0", 108, "580.65")
    assert store.register_device(other) != first
    assert len(store.devices()) == 2


def test_record_round_trip(store: Store) -> None:
    run_id, device_id = setup_run(store)
    m = ok(0.25, compile_s=0.5, registers=40, smem_bytes=4096, spills=0, rel_error=1e-7)
    assert store.record(run_id, device_id, FAMILY, PROBLEM, cfg(8), m, PROBLEM.flops)
    store.finish_run(run_id)
    stored = store.evaluations(device_id, FAMILY, PROBLEM)
    gflops = PROBLEM.flops / 0.25e-3 / 1e9
    assert stored == [StoredEvaluation(cfg(8), Status.OK, 0.25, pytest.approx(gflops), "")]
    row = store.history().iloc[0]
    assert row["samples_ms"] == [0.25, 0.25, 0.25]
    assert (row["registers"], row["smem_bytes"], row["problem_key"]) == (40, 4096, PROBLEM.key)


def test_evaluations_are_per_study_in_insertion_order(store: Store) -> None:
    run_id, device_id = setup_run(store)
    for tile in (16, 4, 8):
        store.record(run_id, device_id, FAMILY, PROBLEM, cfg(tile), ok(tile), PROBLEM.flops)
    other = ConvProblem(N=32, K=3, C=16, F=32, B=2)
    store.record(run_id, device_id, FAMILY, other, cfg(1), ok(1.0), other.flops)
    store.record(run_id, device_id, "other", PROBLEM, cfg(1), ok(1.0), PROBLEM.flops)
    assert [e.config for e in store.evaluations(device_id, FAMILY, PROBLEM)] == [
        cfg(16),
        cfg(4),
        cfg(8),
    ]


def test_duplicate_record_returns_false_and_keeps_row(store: Store) -> None:
    run_id, device_id = setup_run(store)
    assert store.record(run_id, device_id, FAMILY, PROBLEM, cfg(8), ok(1.0), PROBLEM.flops)
    failed = Measurement(Status.CRASH, error="worker died")
    assert not store.record(run_id, device_id, FAMILY, PROBLEM, cfg(8), failed, PROBLEM.flops)
    assert not store.record(run_id, device_id, FAMILY, PROBLEM, cfg(8), ok(0.1), PROBLEM.flops)
    [stored] = store.evaluations(device_id, FAMILY, PROBLEM)
    assert (stored.status, stored.time_ms, stored.error) == (Status.OK, 1.0, "")


def test_record_with_unknown_run_is_a_store_error(store: Store) -> None:
    _, device_id = setup_run(store)
    with pytest.raises(StoreError, match="FOREIGN KEY"):
        store.record(999, device_id, FAMILY, PROBLEM, cfg(8), ok(1.0), PROBLEM.flops)


def test_best_picks_fastest_ok_and_never_a_failure(store: Store) -> None:
    run_id, device_id = setup_run(store)
    wrong = Measurement(Status.WRONG_RESULT, time_ms=0.01, error="rel error 3e-2")
    store.record(run_id, device_id, FAMILY, PROBLEM, cfg(1), wrong, PROBLEM.flops)
    store.record(run_id, device_id, FAMILY, PROBLEM, cfg(2), ok(2.0), PROBLEM.flops)
    store.record(run_id, device_id, FAMILY, PROBLEM, cfg(4), ok(0.5), PROBLEM.flops)
    store.record(run_id, device_id, FAMILY, PROBLEM, cfg(8), ok(1.0), PROBLEM.flops)
    compile_error = Measurement(Status.COMPILE_ERROR, error="ptxas: too many resources")
    store.record(run_id, device_id, FAMILY, PROBLEM, cfg(16), compile_error, PROBLEM.flops)
    best = store.best()
    assert len(best) == 1
    row = best.iloc[0]
    assert Config.from_json(row["config"]) == cfg(4)
    assert row["time_ms"] == 0.5
    assert row["gflops"] == pytest.approx(PROBLEM.flops / 0.5e-3 / 1e9)
    assert (row["evaluations"], row["failures"]) == (5, 2)
    assert list(best.columns[:11]) == [
        "device",
        "family",
        "B",
        "N",
        "K",
        "C",
        "F",
        "stride",
        "config",
        "time_ms",
        "gflops",
    ]


def test_best_leaves_out_studies_without_success_and_filters(store: Store) -> None:
    run_id, device_id = setup_run(store)
    a100 = store.register_device(DeviceInfo("NVIDIA A100", "8.0", 108, "580.65"))
    small, large = ConvProblem(N=8, K=3, C=1, F=1), ConvProblem(N=64, K=3, C=1, F=1)
    failed = Measurement(Status.TIMEOUT, error="over 10 s")
    store.record(run_id, device_id, FAMILY, ConvProblem(N=16, K=1, C=1, F=1), cfg(1), failed, 1)
    store.record(run_id, device_id, FAMILY, large, cfg(1), ok(1.0), large.flops)
    store.record(run_id, device_id, FAMILY, small, cfg(1), ok(1.0), small.flops)
    store.record(run_id, device_id, "tiled", small, cfg(1), ok(1.0), small.flops)
    store.record(run_id, a100, FAMILY, small, cfg(1), ok(1.0), small.flops)
    best = store.best()
    assert list(zip(best["device"], best["family"], best["N"], strict=True)) == [
        ("NVIDIA A100", FAMILY, 8),
        (H100.name, FAMILY, 8),
        (H100.name, FAMILY, 64),
        (H100.name, "tiled", 8),
    ]
    assert len(store.best(device=H100.name)) == 3
    assert len(store.best(family="tiled")) == 1
    assert store.best(device="nothing").empty
    summary = store.summary().set_index(["device", "family"])
    h100 = summary.loc[(H100.name, FAMILY)]
    assert (h100["studies"], h100["evaluations"], h100["failures"], h100["timeout"]) == (3, 3, 1, 1)


def test_second_store_on_same_file_resumes(db: Path, store: Store) -> None:
    run_id, device_id = setup_run(store)
    for tile in (1, 2, 4):
        store.record(run_id, device_id, FAMILY, PROBLEM, cfg(tile), ok(tile), PROBLEM.flops)
    store.close()
    with Store(f"sqlite:///{db}") as again:
        assert again.register_device(H100) == device_id
        seen = again.evaluations(device_id, FAMILY, PROBLEM)
        assert [e.config for e in seen] == [cfg(1), cfg(2), cfg(4)]
        run2 = again.start_run(device_id, "autotune run --resume", {})
        assert not again.record(run2, device_id, FAMILY, PROBLEM, cfg(2), ok(9.0), 1)
        assert again.record(run2, device_id, FAMILY, PROBLEM, cfg(8), ok(9.0), 1)
        assert len(again.history()) == 4


def test_schema_version_mismatch(db: Path, store: Store) -> None:
    store.close()
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreError) as err:
        Store(db)
    message = str(err.value)
    assert "99" in message and str(SCHEMA_VERSION) in message and "\n" not in message


def test_not_a_database(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(bytes(range(256)) * 64)
    with pytest.raises(StoreError, match="not a database") as err:
        Store(garbage)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "url",
    ["sqlite:///{tmp}/plain-file/x.db", "nosuchdialect://host/db", "postgresql://u:secret@/db"],
)
def test_unopenable_url(tmp_path: Path, url: str) -> None:
    (tmp_path / "plain-file").write_text("a file, so no directory can be made under it")
    with pytest.raises(StoreError, match="cannot open results database") as err:
        Store(url.format(tmp=tmp_path))
    assert "\n" not in str(err.value) and "secret" not in str(err.value)


def test_in_memory_url() -> None:
    with Store("sqlite://") as s:
        run_id, device_id = setup_run(s)
        assert s.record(run_id, device_id, FAMILY, PROBLEM, cfg(1), ok(1.0), PROBLEM.flops)
        assert len(s.best()) == 1


def _record_range(path: str, tiles: list[int], barrier, results) -> None:  # type: ignore[no-untyped-def]
    store = Store(path)
    run_id, device_id = setup_run(store)
    barrier.wait()
    inserted = [
        tile
        for tile in tiles
        if store.record(run_id, device_id, FAMILY, PROBLEM, cfg(tile), ok(tile), PROBLEM.flops)
    ]
    store.finish_run(run_id)
    store.close()
    results.put(inserted)


def test_two_processes_share_one_file(db: Path, store: Store) -> None:
    store.close()
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    ranges = [list(range(1, 61)), list(range(31, 91))]
    workers = [
        ctx.Process(target=_record_range, args=(str(db), tiles, barrier, results))
        for tiles in ranges
    ]
    for w in workers:
        w.start()
    inserted = [results.get(timeout=120) for _ in workers]
    for w in workers:
        w.join(timeout=60)
        assert w.exitcode == 0
    assert sorted(inserted[0] + inserted[1]) == list(range(1, 91))  # each stored exactly once
    with Store(db) as s:
        assert len(s.devices()) == 1
        history = s.history()
        assert len(history) == 90 and history["config"].is_unique
        assert sorted(e.config["TILE"] for e in s.evaluations(1, FAMILY, PROBLEM)) == list(
            range(1, 91)
        )
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_version_1_database_is_upgraded_in_place_keeping_its_rows(db: Path, store: Store) -> None:
    run_id, device_id = setup_run(store)
    store.record(run_id, device_id, FAMILY, PROBLEM, cfg(8), ok(1.0), PROBLEM.flops)
    store.close()
    with sqlite3.connect(db) as conn:  # what a version-1 database looked like
        conn.execute("DROP TABLE ceilings")
        conn.execute("DROP TABLE baselines")
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    upgraded = Store(db)
    assert len(upgraded.evaluations(device_id, FAMILY, PROBLEM)) == 1
    assert upgraded.ceilings().empty and upgraded.baselines().empty
    with sqlite3.connect(db) as conn:
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    assert version == (str(SCHEMA_VERSION),)
    upgraded.close()


def test_ceilings_keep_the_newest_measurement(store: Store) -> None:
    _, device_id = setup_run(store)
    store.record_ceiling(device_id, "fma_peak", 60000.0, "GFlop/s", "first", [1.0])
    store.record_ceiling(device_id, "fma_peak", 64700.0, "GFlop/s", "second", [0.9])
    store.record_ceiling(device_id, "copy_bandwidth", 2990.0, "GB/s", "copy")
    frame = store.ceilings()
    assert dict(zip(frame["name"], frame["value"], strict=True)) == {
        "copy_bandwidth": 2990.0,
        "fma_peak": 64700.0,
    }
    assert store.ceilings(device="other GPU").empty


def test_baselines_replace_per_shape_and_report_gflops(store: Store) -> None:
    _, device_id = setup_run(store)
    assert not store.has_baseline(device_id, "cudnn", PROBLEM)
    failed = Measurement(Status.LAUNCH_ERROR, error="not supported")
    store.record_baseline(device_id, "cudnn", PROBLEM, "", "9.19", failed, PROBLEM.flops)
    assert not store.has_baseline(device_id, "cudnn", PROBLEM)
    store.record_baseline(
        device_id, "cudnn", PROBLEM, "IMPLICIT_GEMM", "9.19", ok(0.5), PROBLEM.flops
    )
    assert store.has_baseline(device_id, "cudnn", PROBLEM)
    frame = store.baselines()
    assert len(frame) == 1
    row = frame.iloc[0]
    assert row["algorithm"] == "IMPLICIT_GEMM" and row["status"] == "OK"
    assert row["gflops"] == pytest.approx(PROBLEM.flops / 0.5e-3 / 1e9)
    assert row["problem_key"] == PROBLEM.key
