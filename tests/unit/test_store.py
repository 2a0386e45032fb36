"""The results database: round trips, no duplicates, best never failed, resume, errors."""

from __future__ import annotations

import dataclasses
import multiprocessing
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from autotune.model.problem import Conv3dProblem, ConvProblem, GemmProblem
from autotune.model.records import DeviceInfo, Measurement, Status
from autotune.model.space import Config
from autotune.store import SCHEMA_VERSION, Store, StoredEvaluation, StoreError
from tests.committed import committed_database

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
    assert list(best.columns[:13]) == [
        "device",
        "family",
        "kind",
        "B",
        "N",
        "K",
        "C",
        "F",
        "stride",
        "config",
        "time_ms",
        "spread",
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


@pytest.mark.slow  # spawns writer processes
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


# ---------------------------------------------------------------------------------------------
# Problem kinds (schema 3) and the upgrade from schema 2

GEMM = GemmProblem(M=128, N=4096, K=9216)
CUBE = Conv3dProblem(D=64, R=64, Cc=64, Kd=3, Kr=3, Kc=3)

# The version-2 schema as SQLAlchemy created it on SQLite (results/autotune.db has it).
V2_SCHEMA = [
    'CREATE TABLE meta ("key" VARCHAR(64) NOT NULL, value TEXT NOT NULL, PRIMARY KEY ("key"))',
    "CREATE TABLE devices (id INTEGER NOT NULL, name VARCHAR(200) NOT NULL, compute_capability "
    "VARCHAR(16) NOT NULL, sm_count INTEGER NOT NULL, driver_version VARCHAR(64) NOT NULL, "
    "runtime_version VARCHAR(64) NOT NULL, nvrtc_version VARCHAR(64) NOT NULL, clock_mhz INTEGER "
    "NOT NULL, memory_bytes BIGINT NOT NULL, extra JSON NOT NULL, PRIMARY KEY (id), CONSTRAINT "
    "uq_devices_identity UNIQUE (name, compute_capability, sm_count, driver_version))",
    "CREATE TABLE runs (id INTEGER NOT NULL, device_id INTEGER NOT NULL, started_at DATETIME NOT "
    "NULL, finished_at DATETIME, command TEXT NOT NULL, versions JSON NOT NULL, host VARCHAR(255) "
    "NOT NULL, PRIMARY KEY (id), FOREIGN KEY(device_id) REFERENCES devices (id))",
    "CREATE TABLE evaluations (id INTEGER NOT NULL, run_id INTEGER NOT NULL, device_id INTEGER NOT "
    'NULL, family VARCHAR(100) NOT NULL, problem_key VARCHAR(200) NOT NULL, "B" INTEGER NOT NULL, '
    '"N" INTEGER NOT NULL, "K" INTEGER NOT NULL, "C" INTEGER NOT NULL, "F" INTEGER NOT NULL, '
    "stride INTEGER NOT NULL, config TEXT NOT NULL, status VARCHAR(32) NOT NULL, error TEXT NOT "
    "NULL, rel_error FLOAT, compile_s FLOAT, time_ms FLOAT, samples_ms JSON NOT NULL, gflops "
    "FLOAT, registers INTEGER, smem_bytes INTEGER, spills INTEGER, created_at DATETIME NOT NULL, "
    "PRIMARY KEY (id), CONSTRAINT uq_evaluations UNIQUE (device_id, family, problem_key, config), "
    "FOREIGN KEY(run_id) REFERENCES runs (id), FOREIGN KEY(device_id) REFERENCES devices (id))",
    "CREATE TABLE ceilings (id INTEGER NOT NULL, device_id INTEGER NOT NULL, name VARCHAR(64) NOT "
    "NULL, value FLOAT NOT NULL, unit VARCHAR(32) NOT NULL, detail TEXT NOT NULL, samples_ms JSON "
    "NOT NULL, created_at DATETIME NOT NULL, PRIMARY KEY (id), FOREIGN KEY(device_id) REFERENCES "
    "devices (id))",
    "CREATE TABLE baselines (id INTEGER NOT NULL, device_id INTEGER NOT NULL, library VARCHAR(64) "
    'NOT NULL, problem_key VARCHAR(200) NOT NULL, "B" INTEGER NOT NULL, "N" INTEGER NOT NULL, "K" '
    'INTEGER NOT NULL, "C" INTEGER NOT NULL, "F" INTEGER NOT NULL, stride INTEGER NOT NULL, '
    "algorithm TEXT NOT NULL, version VARCHAR(64) NOT NULL, status VARCHAR(32) NOT NULL, error "
    "TEXT NOT NULL, time_ms FLOAT, samples_ms JSON NOT NULL, gflops FLOAT, created_at DATETIME NOT "
    "NULL, PRIMARY KEY (id), CONSTRAINT uq_baselines UNIQUE (device_id, library, problem_key), "
    "FOREIGN KEY(device_id) REFERENCES devices (id))",
]
V2_PROBLEMS = [ConvProblem(N=32, K=3, C=16, F=32), ConvProblem(N=13, K=3, C=4, F=8, B=2, stride=2)]


def _make_v2(path: Path) -> None:
    """A version-2 database with two conv2d studies (three evaluations) and a cuDNN baseline."""
    with sqlite3.connect(path) as conn:
        for statement in V2_SCHEMA:
            conn.execute(statement)
        conn.execute("INSERT INTO meta VALUES ('schema_version', '2')")
        conn.execute(
            "INSERT INTO devices VALUES (1, 'NVIDIA H100', '9.0', 132, '580', '13.0', '13.0', "
            "1980, 85899345920, '{}')"
        )
        conn.execute(
            "INSERT INTO runs VALUES (1, 1, '2025-01-01 00:00:00', NULL, 'run', '{}', 'h')"
        )
        rows = [(V2_PROBLEMS[0], 8, 0.5), (V2_PROBLEMS[0], 16, 0.25), (V2_PROBLEMS[1], 8, 2.0)]
        for i, (p, tile, ms) in enumerate(rows, start=1):
            conn.execute(
                "INSERT INTO evaluations VALUES (?, 1, 1, 'direct_naive', ?, ?, ?, ?, ?, ?, ?, ?, "
                "'OK', '', 1e-7, 0.5, ?, ?, ?, 40, 4096, 0, '2025-01-01 00:00:00')",
                (
                    i,
                    p.key,
                    p.B,
                    p.N,
                    p.K,
                    p.C,
                    p.F,
                    p.stride,
                    cfg(tile).to_json(),
                    ms,
                    f"[{ms}]",
                    p.flops / ms / 1e6,
                ),
            )
        p = V2_PROBLEMS[0]
        conn.execute(
            "INSERT INTO baselines VALUES (1, 1, 'cudnn', ?, ?, ?, ?, ?, ?, ?, 'ALGO', '9', 'OK', "
            "'', 0.4, '[0.4]', ?, '2025-01-01 00:00:00')",
            (p.key, p.B, p.N, p.K, p.C, p.F, p.stride, p.flops / 0.4 / 1e6),
        )


def test_version_2_database_is_upgraded_keeping_every_row(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    _make_v2(path)
    with Store(path) as upgraded:
        # Rows stored before protocols were numbered are protocol 1: kept, never mixed with 2.
        assert upgraded.history().empty and upgraded.best().empty
        history = upgraded.history(protocol=1)
        assert list(history["protocol"]) == [1, 1, 1] and history["spread"].isna().all()
        assert list(history["id"]) == [1, 2, 3]
        assert list(history["kind"]) == ["conv2d"] * 3
        assert list(history["problem_key"]) == [V2_PROBLEMS[0].key] * 2 + [V2_PROBLEMS[1].key]
        expected = [V2_PROBLEMS[0], V2_PROBLEMS[0], V2_PROBLEMS[1]]
        assert list(history["shape"]) == [p.as_dict() for p in expected]
        assert history["scratch_bytes"].isna().all()
        assert list(history["time_ms"]) == [0.5, 0.25, 2.0]
        assert list(history["registers"]) == [40, 40, 40]
        best = upgraded.best(protocol=1)
        assert list(best["problem_key"]) == [V2_PROBLEMS[1].key, V2_PROBLEMS[0].key]
        assert list(best["time_ms"]) == [2.0, 0.25] and list(best["evaluations"]) == [1, 2]
        stored = upgraded.evaluations(1, "direct_naive", V2_PROBLEMS[0], protocol=1)
        assert [e.config for e in stored] == [cfg(8), cfg(16)]
        assert upgraded.evaluations(1, "direct_naive", V2_PROBLEMS[0]) == []
        base = upgraded.baselines(protocol=1)
        assert len(base) == 1 and base.iloc[0]["kind"] == "conv2d"
        assert base.iloc[0]["shape"] == V2_PROBLEMS[0].as_dict()
        assert upgraded.has_baseline(1, "cudnn", V2_PROBLEMS[0], protocol=1)
        assert not upgraded.has_baseline(1, "cudnn", V2_PROBLEMS[0])
        # The upgraded tables take the new kinds, and the same config measured again under the
        # current protocol is a new row beside the old one; under the old protocol it is not.
        run_id = upgraded.start_run(1, "run", {})
        old = dataclasses.replace(ok(9.0), protocol=1)
        assert not upgraded.record(run_id, 1, "direct_naive", V2_PROBLEMS[0], cfg(8), old, 1)
        assert upgraded.record(run_id, 1, "direct_naive", V2_PROBLEMS[0], cfg(8), ok(9.0), 1)
        assert upgraded.record(run_id, 1, "sgemm", GEMM, cfg(1), ok(1.0), GEMM.flops)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM meta").fetchone() == (str(SCHEMA_VERSION),)
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert not any(name.endswith("_upgrade") for name in tables)
    with Store(path) as again:  # opening the upgraded file changes nothing
        assert len(again.history(every_protocol=True)) == 5


def test_the_committed_results_read_whole_from_their_campaign_files(tmp_path: Path) -> None:
    # The H100 results as committed (results/campaigns/*.db.gz, written by `autotune data pack`
    # from the database of schema 5 they were measured into): merged into a fresh database,
    # every evaluation, baseline and run is there and every evaluation has its kernel digest.
    committed = committed_database(tmp_path)
    with sqlite3.connect(f"file:{committed}?mode=ro", uri=True) as conn:
        assert conn.execute("SELECT count(*) FROM evaluations").fetchone()[0] == 29643
        assert conn.execute("SELECT count(*) FROM baselines").fetchone()[0] == 175
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 60
        undigested = "SELECT count(*) FROM evaluations WHERE kernel_digest = ''"
        assert conn.execute(undigested).fetchone()[0] == 0
    with Store(committed, create=False) as store:
        everything = store.history(every_protocol=True)
        assert len(everything) == 29643
        assert "conv2d" in set(everything["kind"]) and set(everything["protocol"]) >= {1, 2}


def test_every_kind_round_trips_with_its_shape(store: Store) -> None:
    run_id, device_id = setup_run(store)
    m = ok(2.0, scratch_bytes=1 << 20)
    assert store.record(run_id, device_id, "sgemm", GEMM, cfg(1), m, GEMM.flops)
    store.record(run_id, device_id, "sgemm", GEMM, cfg(2), ok(1.0), GEMM.flops)
    store.record(run_id, device_id, "conv3d", CUBE, cfg(1), ok(0.5), CUBE.flops)
    store.record(run_id, device_id, FAMILY, PROBLEM, cfg(1), ok(0.5), PROBLEM.flops)
    history = store.history().set_index("id")
    assert history.loc[1, "scratch_bytes"] == 1 << 20 and pd.isna(history.loc[2, "scratch_bytes"])
    gemm = store.history(kind="gemm")
    assert len(gemm) == 2 and gemm["N"].isna().all() and gemm["B"].isna().all()
    assert gemm.iloc[0]["shape"] == {"M": 128, "N": 4096, "K": 9216}
    best = store.best()
    assert list(zip(best["family"], best["kind"], strict=True)) == [
        ("conv3d", "conv3d"),
        (FAMILY, "conv2d"),
        ("sgemm", "gemm"),
    ]
    row = store.best(kind="gemm").iloc[0]
    assert (row["problem_key"], row["time_ms"], row["evaluations"]) == (GEMM.key, 1.0, 2)
    assert row["gflops"] == pytest.approx(GEMM.flops / 1.0e-3 / 1e9)
    assert store.best(kind="conv3d").iloc[0]["shape"] == CUBE.as_dict()
    assert len(store.best(family="sgemm", kind="conv2d")) == 0
    assert [e.config for e in store.evaluations(device_id, "sgemm", GEMM)] == [cfg(1), cfg(2)]


def test_best_orders_shapes_by_number_not_by_key(store: Store) -> None:
    run_id, device_id = setup_run(store)
    shapes = [GemmProblem(M=m, N=n, K=64) for m, n in ((128, 1000), (1, 4096), (16, 1000))]
    for p in shapes:
        store.record(run_id, device_id, "sgemm", p, cfg(1), ok(1.0), p.flops)
    order = [(r["M"], r["N"]) for r in store.best()["shape"]]
    assert order == [(1, 4096), (16, 1000), (128, 1000)]


def test_baselines_per_kind(store: Store) -> None:
    _, device_id = setup_run(store)
    store.record_baseline(device_id, "cublas", GEMM, "gemm", "13", ok(1.0), GEMM.flops)
    store.record_baseline(device_id, "cudnn", PROBLEM, "ALGO", "9", ok(1.0), PROBLEM.flops)
    assert store.has_baseline(device_id, "cublas", GEMM)
    assert not store.has_baseline(device_id, "cudnn", GEMM)
    frame = store.baselines(kind="gemm")
    assert list(frame["library"]) == ["cublas"] and frame.iloc[0]["shape"] == GEMM.as_dict()
    assert pd.isna(frame.iloc[0]["N"])  # the conv2d columns stay empty for a GEMM
    assert list(store.baselines(library="cudnn")["kind"]) == ["conv2d"]


def _open_and_count(path: str, barrier, results) -> None:  # type: ignore[no-untyped-def]
    barrier.wait()
    with Store(path) as s:
        results.put(len(s.history(every_protocol=True)))


@pytest.mark.slow  # spawns processes
def test_two_processes_upgrading_one_file_at_once(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    _make_v2(path)
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    workers = [
        ctx.Process(target=_open_and_count, args=(str(path), barrier, results)) for _ in range(2)
    ]
    for w in workers:
        w.start()
    counts = [results.get(timeout=120) for _ in workers]
    for w in workers:
        w.join(timeout=60)
        assert w.exitcode == 0
    assert counts == [3, 3]
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM meta").fetchone() == (str(SCHEMA_VERSION),)
        assert conn.execute("SELECT count(*) FROM evaluations").fetchone() == (3,)


def test_samples_are_stored_to_the_nanosecond(store: Store) -> None:
    """CUDA-event samples arrive as float32 values widened to doubles; they are kept to 1 ns."""
    run_id, device_id = setup_run(store)
    raw = (0.029407999291419983, 12.345678329467773, 0.0010000000474974513)
    m = Measurement(Status.OK, time_ms=raw[0], samples_ms=raw)
    store.record(run_id, device_id, FAMILY, PROBLEM, cfg(8), m, PROBLEM.flops)
    (stored,) = store.history()["samples_ms"]
    assert stored == [0.029408, 12.345678, 0.001]
    assert all(abs(a - b) <= 5e-7 for a, b in zip(stored, raw, strict=True))
