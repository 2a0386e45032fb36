"""`autotune merge`: databases of several machines joined, each row once, the sources unchanged,
bad input refused with the target as it was."""

from __future__ import annotations

import gzip
import shutil
import sqlite3
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from autotune.cli.app import main
from autotune.model.problem import ConvProblem, GemmProblem
from autotune.model.records import DeviceInfo, Measurement, Status
from autotune.model.space import Config
from autotune.store import SCHEMA_VERSION, Store
from tests.pg_server import pg_server, pg_url  # noqa: F401 - fixtures
from tests.unit.test_foreign_database import another_application, fingerprint
from tests.unit.test_store import V2_PROBLEMS, _make_v2

H100 = DeviceInfo("NVIDIA H100 80GB HBM3", "9.0", 132, "580.65", "13.0", "13.0", 1980, 80 << 30)
A100 = DeviceInfo("NVIDIA A100-SXM4-40GB", "8.0", 108, "580.65")
CONV, GEMM = ConvProblem(N=32, K=3, C=16, F=32), GemmProblem(M=128, N=256, K=64)

# (device, family, problem, tile, time_ms, protocol) as each machine measured them; the overlap
# (tiles 2 and 4 of the H100's conv) is what both stored, a GPU time of 0 a wrong result.
ROWS_A = [
    (H100, "direct_naive", CONV, 1, 3.0, 2),
    (H100, "direct_naive", CONV, 2, 1.5, 2),
    (H100, "direct_naive", CONV, 4, 0.0, 2),
    (H100, "direct_naive", CONV, 2, 9.0, 1),
    (H100, "sgemm", GEMM, 1, 0.7, 2),
]
ROWS_B = [
    (H100, "direct_naive", CONV, 2, 1.5, 2),
    (H100, "direct_naive", CONV, 4, 0.0, 2),
    (H100, "direct_naive", CONV, 8, 1.2, 2),
    (A100, "direct_naive", CONV, 1, 4.0, 2),
    (A100, "sgemm", GEMM, 2, 0.9, 2),
]


def write(store: Store, rows, command: str, devices=(H100, A100)) -> None:
    """The rows as `autotune run` stores them: one run per device, a cuDNN baseline and a
    ceiling per device."""
    runs = {}
    for device in devices:  # the order fixes the ids, which differ between machines
        device_id = store.register_device(device)
        runs[device.name] = (store.start_run(device_id, command, {"autotune": "0.1"}), device_id)
    for device, family, problem, tile, ms, protocol in rows:
        m = Measurement(Status.OK, ms, (ms, ms), protocol=protocol)
        if not ms:
            m = Measurement(Status.WRONG_RESULT, error="off", protocol=protocol)
        cfg = Config.of({"TILE": tile})
        assert store.record(*runs[device.name], family, problem, cfg, m, problem.flops)
    for run_id, device_id in runs.values():
        base = Measurement(Status.OK, 0.4, (0.4, 0.4))
        store.record_baseline(device_id, "cudnn", CONV, "ALGO", "9", base, CONV.flops)
        store.finish_run(run_id)


def merge(*args: str):
    return CliRunner().invoke(main, ["merge", *args])


@pytest.fixture
def sources(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    with Store(a) as store:
        write(store, ROWS_A, "run on a", devices=(H100,))
        store.record_ceiling(1, "fma_peak", 60e3, "GFlop/s", "fma loop", [1.0, 1.1])
    with Store(b) as store:
        write(store, ROWS_B, "run on b", devices=(A100, H100))
    return a, b


# The PostgreSQL target starts a private server: out of the quick loop (-m "not slow").
@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.slow)])
def target(request, tmp_path: Path) -> str:
    if request.param == "postgres":
        return request.getfixturevalue("pg_url")
    return str(tmp_path / "target" / "t.db")


def study_rows(store: Store) -> list[tuple]:
    h = store.history(every_protocol=True)
    columns = ["device", "family", "problem_key", "config", "protocol", "status", "time_ms"]
    return sorted(tuple(r) for r in h[columns].fillna(-1).itertuples(index=False))


def test_two_machines_merge_into_what_one_would_have_stored(sources, target, tmp_path) -> None:
    a, b = sources
    before = [fingerprint(a), fingerprint(b)]
    result = merge(str(a), str(b), "--storage", target)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        f"merged {a}: devices 1/0, runs 1/0, evaluations 5/0, baselines 1/0, ceilings 1/0, "
        "observations 0/0, baseline_observations 0/0, repeats 0/0 (added/skipped)",
        f"merged {b}: devices 1/1, runs 2/0, evaluations 3/2, baselines 1/1, ceilings 0/0, "
        "observations 0/0, baseline_observations 0/0, repeats 0/0 (added/skipped)",
    ]
    assert [fingerprint(a), fingerprint(b)] == before  # the sources never change

    union = ROWS_A + [row for row in ROWS_B if row not in ROWS_A]
    with Store(tmp_path / "direct.db") as direct:  # one machine measuring everything
        write(direct, union, "run", devices=(H100, A100))
    with Store(target, create=False) as merged, Store(tmp_path / "direct.db") as direct:
        assert study_rows(merged) == study_rows(direct) and len(study_rows(merged)) == len(union)
        for protocol in (1, 2):
            pd.testing.assert_frame_equal(
                merged.best(protocol=protocol), direct.best(protocol=protocol)
            )
        keep = ["device", "library", "problem_key", "time_ms", "protocol"]
        pd.testing.assert_frame_equal(merged.baselines()[keep], direct.baselines()[keep])
        assert list(merged.ceilings()["value"]) == [60e3]
        assert list(merged.devices()["name"]) == [H100.name, A100.name]  # b's ids were renumbered
        # Every evaluation points at its own machine's run, of its own device; commands stay.
        history = merged.history(every_protocol=True)
        runs = merged.run_activity(datetime.now(timezone.utc))
    per_run = sorted(runs[["command", "device", "evaluations"]].itertuples(index=False, name=None))
    assert per_run == [
        ("run on a", H100.name, 5),
        ("run on b", A100.name, 2),
        ("run on b", H100.name, 1),
    ]
    joined = history.merge(runs, left_on="run_id", right_on="id", suffixes=("", "_run"))
    assert len(joined) == len(history) and (joined["device"] == joined["device_run"]).all()
    # A merged database (PostgreSQL too) is a source like any other.
    back = tmp_path / "back.db"
    result = merge(target, "--storage", str(back))
    assert result.exit_code == 0 and "runs 3/0, evaluations 8/0" in result.output, result.output
    with Store(back) as store, Store(target, create=False) as merged:
        assert study_rows(store) == study_rows(merged)


def test_merging_again_adds_nothing(sources, tmp_path) -> None:
    a, b = sources
    target = tmp_path / "t.db"
    assert merge(str(a), str(b), "--storage", str(target)).exit_code == 0
    with Store(target) as store:
        rows = study_rows(store)
    result = merge(str(b), str(a), str(b), "--storage", str(target))
    assert result.exit_code == 0, result.output
    for line in result.output.splitlines():
        assert "devices 0/" in line and "runs 0/" in line and "evaluations 0/" in line
        assert "baselines 0/" in line and "ceilings 0/" in line
    with Store(target) as store:
        assert study_rows(store) == rows
    with sqlite3.connect(target) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone() == (3,)
        assert conn.execute("SELECT count(*) FROM ceilings").fetchone() == (1,)


def test_an_older_schema_is_upgraded_in_a_copy(tmp_path) -> None:
    old = tmp_path / "v2.db"
    _make_v2(old)
    before = fingerprint(old)
    target = tmp_path / "t.db"
    result = merge(str(old), "--storage", str(target))
    assert result.exit_code == 0, result.output
    assert "evaluations 3/0, baselines 1/0" in result.output
    assert fingerprint(old) == before
    with sqlite3.connect(old) as conn:
        assert conn.execute("SELECT value FROM meta").fetchone() == ("2",)
    with Store(target) as store:
        history = store.history(protocol=1)  # rows stored before protocols were numbered
        assert list(history["time_ms"]) == [0.5, 0.25, 2.0] and store.history().empty
        assert list(history["shape"]) == [p.as_dict() for p in (*V2_PROBLEMS[:1], *V2_PROBLEMS)]
        assert list(store.best(protocol=1)["time_ms"]) == [2.0, 0.25]
        assert len(store.baselines(protocol=1)) == 1


def test_a_gzipped_copy_merges_like_its_file(sources, tmp_path) -> None:
    a, _ = sources
    packed = tmp_path / "a.db.gz"
    with a.open("rb") as raw, gzip.open(packed, "wb") as out:
        shutil.copyfileobj(raw, out)
    direct, unpacked = tmp_path / "direct.db", tmp_path / "unpacked.db"
    assert merge(str(a), "--storage", str(direct)).exit_code == 0
    result = merge(str(packed), "--storage", str(unpacked))
    assert result.exit_code == 0, result.output
    assert "evaluations 5/0" in result.output
    with Store(direct) as one, Store(unpacked) as other:
        assert study_rows(one) == study_rows(other)


def _bad_source(kind: str, tmp_path: Path, good: Path) -> str:
    path = tmp_path / f"bad-{kind}.db"
    if kind == "missing":
        return str(tmp_path / "nowhere.db")
    if kind == "directory":
        return str(tmp_path)
    if kind == "not-sqlite":
        path.write_text("campaign notes, not a database\n" * 40)
    elif kind == "other-application":
        another_application(path)
    elif kind == "newer-schema":
        shutil.copy(good, path)
        with sqlite3.connect(path) as conn:
            conn.execute(
                "UPDATE meta SET value = ? WHERE key = 'schema_version'", [SCHEMA_VERSION + 1]
            )
    elif kind == "not-gzip":
        path = tmp_path / "bad.db.gz"
        shutil.copy(good, path)
    elif kind == "memory-url":
        return "sqlite://"
    elif kind == "unknown-url":
        return "nosuchdialect://host/db"
    return str(path)


BAD = ["missing", "directory", "not-sqlite", "other-application", "newer-schema", "not-gzip"]
BAD += ["memory-url", "unknown-url"]


@pytest.mark.parametrize("kind", BAD)
def test_bad_sources_are_refused_with_the_target_as_it_was(kind, sources, tmp_path) -> None:
    a, b = sources
    bad = _bad_source(kind, tmp_path, a)
    target = tmp_path / "t.db"
    assert merge(str(b), "--storage", str(target)).exit_code == 0
    before = fingerprint(target)
    source_before = fingerprint(Path(bad)) if Path(bad).is_file() else None
    result = merge(str(a), bad, "--storage", str(target))  # a good source first: not merged
    assert result.exit_code == 1, result.output
    assert len(result.output.splitlines()) == 1 and result.output.startswith("autotune: ")
    assert isinstance(result.exception, SystemExit)  # a message, never a traceback
    assert fingerprint(target) == before
    if source_before is not None:
        assert fingerprint(Path(bad)) == source_before
    fresh = tmp_path / "fresh" / "t.db"
    assert merge(bad, "--storage", str(fresh)).exit_code == 1 and not fresh.parent.exists()


def test_a_target_that_cannot_be_written_is_refused(sources, tmp_path) -> None:
    a, _ = sources
    plain = tmp_path / "plain-file"
    plain.write_text("x")
    foreign = another_application(tmp_path / "foreign.db")
    before = fingerprint(foreign)
    for target in (str(plain / "t.db"), str(foreign), str(tmp_path)):
        result = merge(str(a), "--storage", target)
        assert result.exit_code == 1 and len(result.output.splitlines()) == 1, result.output
        assert isinstance(result.exception, SystemExit)
    assert fingerprint(foreign) == before and plain.read_text() == "x"


def test_a_failure_half_way_leaves_the_target_as_it_was(sources, tmp_path, monkeypatch) -> None:
    a, b = sources
    target = tmp_path / "t.db"
    assert merge(str(a), "--storage", str(target)).exit_code == 0
    before = fingerprint(target)
    import autotune.store.merge as merging

    real = merging._merge_table

    def failing(src, dst, table, ids):
        if table.name == "baselines":  # devices, runs and evaluations are in by now
            raise sqlite3.OperationalError("disk I/O error")
        return real(src, dst, table, ids)

    monkeypatch.setattr(merging, "_merge_table", failing)
    result = merge(str(b), "--storage", str(target))
    assert result.exit_code == 1 and "disk I/O error" in result.output, result.output
    assert fingerprint(target) == before


def test_a_source_being_written_is_read_with_its_log(sources, tmp_path) -> None:
    a, _ = sources
    target = tmp_path / "t.db"
    with Store(a) as live:  # a campaign still running: its newest rows are in a's -wal
        run_id = live.start_run(1, "still running", {})
        m = Measurement(Status.OK, 0.5, (0.5, 0.5))
        assert live.record(run_id, 1, "direct_naive", CONV, Config.of({"TILE": 16}), m, CONV.flops)
        assert Path(f"{a}-wal").stat().st_size > 0
        result = merge(str(a), "--storage", str(target))
    assert result.exit_code == 0, result.output
    assert "runs 2/0, evaluations 6/0" in result.output


def test_an_older_ceiling_merged_in_does_not_replace_the_newer_one(tmp_path: Path) -> None:
    # A machine's fresh database measures every ceiling again; merged later, its older figures
    # arrive with higher ids and must not take the place of the target's newer measurement.
    source, target = tmp_path / "old.db", tmp_path / "t.db"
    with Store(source) as store:
        device = store.register_device(H100)
        store.record_ceiling(device, "tc_peak_fp16", 661e3, "GFlop/s", "one median")
    with Store(target) as store:
        device = store.register_device(H100)
        store.record_ceiling(device, "tc_peak_fp16", 739e3, "GFlop/s", "best of three")
    result = merge(str(source), "--storage", str(target))
    assert result.exit_code == 0, result.output
    assert "ceilings 1/0" in result.output  # kept in the history, not put in use
    with Store(target, create=False) as merged:
        assert list(merged.ceilings()["value"]) == [739e3]
