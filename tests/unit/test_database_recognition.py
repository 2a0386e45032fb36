"""A results file is known as ours by its marker (or our older schema) before anything is written;
reading commands open it read-only; a damaged file is named and left as it was (issue 38)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

import autotune.gpu.evaluator
import autotune.store.engine
import autotune.store.sqlite_file as sqlite_file
from autotune.cli.app import main
from autotune.families import get_family
from autotune.model.problem import ConvProblem
from autotune.model.records import DeviceInfo, Measurement, Status
from autotune.model.space import Config
from autotune.store import Store, StoreError
from autotune.store.sqlite_file import APPLICATION_ID
from tests.conftest import SyntheticEvaluator
from tests.unit.test_foreign_database import RUN, fingerprint

# What the commands read as current: rows of this code (DESIGN section 2).
CURRENT = get_family("direct_naive").kernel_digest()

H100 = DeviceInfo(name="H100", compute_capability="9.0", sm_count=132)


@pytest.fixture
def synthetic_gpu(monkeypatch):
    monkeypatch.setattr(
        autotune.gpu.evaluator, "GpuEvaluator", lambda index=0: SyntheticEvaluator(lambda d: 1.0)
    )


def _app_id(path: Path) -> int:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        return con.execute("PRAGMA application_id").fetchone()[0]


def _ours(path: Path, rows: int = 1) -> Path:
    problem = ConvProblem(B=1, C=1, N=9, K=3, F=2)
    with Store(path) as store:
        device = store.register_device(H100)
        run = store.start_run(device, "autotune run", {})
        for i in range(rows):
            m = Measurement(Status.OK, time_ms=1.0 + i, samples_ms=(1.0 + i,))
            store.record(run, device, "direct_naive", problem, Config.of({"X": i}), m, 1, CURRENT)
    return path


@pytest.mark.parametrize(
    "schema",
    [
        "CREATE TABLE evaluations (id INTEGER PRIMARY KEY, foo TEXT)",
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)",
        "CREATE TABLE meta (key TEXT, value TEXT); INSERT INTO meta VALUES ('schema_version', '5')",
    ],
    ids=["evaluations", "meta", "meta-with-our-version"],
)
@pytest.mark.parametrize("share", [False, True])
def test_another_programs_tables_with_our_names_are_never_written(
    tmp_path, synthetic_gpu, schema, share
):
    db = tmp_path / "other.db"
    with sqlite3.connect(db) as con:
        con.executescript(schema)
    before = fingerprint(db)
    run = [*RUN, "--budget", "2", "--storage", str(db), *(["--share-database"] if share else [])]
    for args in (
        run,
        ["best", "--storage", str(db)],
        ["merge", str(_ours(tmp_path / "o.db")), "--storage", str(db)],
    ):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 1, (args, result.output)
        assert len(result.output.strip().splitlines()) == 1, result.output
        assert "nothing was changed" in result.output
        assert fingerprint(db) == before


def test_a_new_database_carries_the_marker_and_an_unmarked_one_of_ours_gets_it_on_a_write(tmp_path):
    db = _ours(tmp_path / "r.db")
    assert _app_id(db) == APPLICATION_ID
    with sqlite3.connect(db) as con:  # as every autotune before the marker left it
        con.execute("PRAGMA application_id = 0")
    before = fingerprint(db)
    assert CliRunner().invoke(main, ["best", "--storage", str(db)]).exit_code == 0
    assert fingerprint(db) == before  # a reader never stamps
    Store(db).close()
    assert _app_id(db) == APPLICATION_ID


def test_an_older_database_is_read_through_a_copy_and_left_as_it_was(tmp_path):
    db = _ours(tmp_path / "r.db")
    with sqlite3.connect(db) as con:  # version 4: no protocol, no spread
        con.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
        con.execute("ALTER TABLE evaluations DROP COLUMN spread")
    before = fingerprint(db)
    result = CliRunner().invoke(main, ["best", "--storage", str(db)])
    assert result.exit_code == 0, result.output
    assert "direct_naive" in result.output
    assert fingerprint(db) == before


def test_a_reader_does_not_insert_a_missing_version_row(tmp_path):
    db = _ours(tmp_path / "r.db")
    with sqlite3.connect(db) as con:
        con.execute("DELETE FROM meta")
        con.execute("PRAGMA application_id = 0")
    before = fingerprint(db)
    result = CliRunner().invoke(main, ["best", "--storage", str(db)])
    assert result.exit_code == 1 and "nothing was changed" in result.output
    assert fingerprint(db) == before


def test_a_database_in_a_directory_that_cannot_be_written_is_read(tmp_path, monkeypatch):
    db = _ours(tmp_path / "r.db")  # in WAL mode: a reader would need to create its -shm
    for side in tmp_path.glob("r.db-*"):
        side.unlink()
    monkeypatch.setattr(sqlite_file.os, "access", lambda path, mode: False)
    result = CliRunner().invoke(main, ["best", "--storage", str(db)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.db"]  # immutable: nothing beside


def _damage(path: Path) -> None:
    data = bytearray(path.read_bytes())
    for i in range(200):  # 200 bytes flipped past the header, as the issue did
        data[4096 + i * 37 % (len(data) - 4096)] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("command", [["best"], RUN[:], ["status"]])
def test_a_damaged_database_is_named_damaged_and_left_as_it_was(tmp_path, synthetic_gpu, command):
    db = _ours(tmp_path / "r.db", rows=300)
    with sqlite3.connect(db) as con:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.execute("PRAGMA journal_mode = DELETE")
    _damage(db)
    before = fingerprint(db)
    result = CliRunner().invoke(main, [*command, "--storage", str(db)])
    assert result.exit_code != 0, result.output
    assert "damaged" in result.output and "Traceback" not in result.output, result.output
    assert fingerprint(db) == before


def test_merge_names_the_users_file_not_a_temporary_copy(tmp_path):
    source = tmp_path / "mine.db"
    with sqlite3.connect(source) as con:
        con.execute("CREATE TABLE users (id INTEGER)")
    result = CliRunner().invoke(main, ["merge", str(source), "--storage", str(tmp_path / "t.db")])
    assert result.exit_code == 1 and "mine.db" in result.output, result.output
    assert "autotune-merge-" not in result.output and "source.db" not in result.output


def test_a_store_opened_read_only_refuses_writes(tmp_path):
    db = _ours(tmp_path / "r.db")
    with Store(db, create=False) as store, pytest.raises(StoreError):
        store.register_device(DeviceInfo(name="A100", compute_capability="8.0", sm_count=108))


def test_a_new_file_is_marked_before_its_first_table(tmp_path, monkeypatch):
    # Several workers open one new database at once: a file another worker is creating right
    # now (some of our tables, no meta row yet) must be known as ours by the marker, since a
    # meta table alone could be any program's (the CI run of stop 40 met exactly that).
    db = tmp_path / "new.db"
    seen: list[sqlite_file.FileFacts] = []
    create_all = autotune.store.engine.METADATA.create_all

    def observe_then_create(bind, *args, **kwargs):
        seen.append(sqlite_file.inspect_file(db))
        return create_all(bind, *args, **kwargs)

    monkeypatch.setattr(autotune.store.engine.METADATA, "create_all", observe_then_create)
    Store(db).close()
    assert seen and seen[0].tables == {} and seen[0].ours
    with sqlite3.connect(db) as con:  # a worker stopped half-way through creating it
        con.execute("DROP TABLE evaluations")
        con.execute("DELETE FROM meta")
    Store(db).close()
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        assert con.execute("SELECT count(*) FROM evaluations").fetchone() == (0,)
    other = tmp_path / "other.db"  # unmarked, with a meta table of its own: another program's
    with sqlite3.connect(other) as con:
        con.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    with pytest.raises(StoreError, match=r"another application \(meta\)"):
        Store(other)


def test_workers_opening_one_new_file_at_once_all_open_it(tmp_path):
    # Threads stand in for worker processes: SQLite locks a file the same way for both.
    for round_ in range(10):
        db = tmp_path / f"shared{round_}.db"
        start = threading.Barrier(6)
        failed: list[str] = []

        def open_it(db=db, start=start, failed=failed):
            start.wait()
            try:
                Store(db).close()
            except StoreError as err:
                failed.append(str(err))

        workers = [threading.Thread(target=open_it) for _ in range(6)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert not failed, failed
        assert _app_id(db) == APPLICATION_ID
