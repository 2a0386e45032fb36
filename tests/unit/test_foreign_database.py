"""Databases that are not ours: read-only commands change nothing in them, `run` adds its tables
beside another application's only when told to, and a run that finds no GPU leaves no file."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

import autotune.gpu.evaluator
from autotune.cli.app import main
from autotune.gpu.session import NoGpu
from autotune.store import Store, StoreError
from tests.conftest import SyntheticEvaluator

RUN = ["run", "--family", "direct_naive", "--shape", "N=9,K=3,C=1,F=2", "--no-baseline"]
READERS = [
    ["best"],
    ["status"],
    ["status", "--all"],
    ["plot"],
    ["report"],
    ["export-recording", "--output", "{tmp}/r.jsonl.gz"],
    ["forget", "--family", "direct_naive", "--yes"],
]


def another_application(path: Path) -> Path:
    """An SQLite file of some other program, in the default rollback-journal mode."""
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        con.execute("INSERT INTO users (name) VALUES ('ada')")
    return path


def fingerprint(path: Path) -> tuple[str, list[str]]:
    """The file's bytes and whatever else SQLite keeps beside it (-wal, -shm, -journal)."""
    beside = sorted(p.name for p in path.parent.iterdir() if p.name.startswith(path.name + "-"))
    return hashlib.sha256(path.read_bytes()).hexdigest(), beside


@pytest.fixture
def synthetic_gpu(monkeypatch):
    monkeypatch.setattr(
        autotune.gpu.evaluator, "GpuEvaluator", lambda index=0: SyntheticEvaluator(lambda d: 1.0)
    )


@pytest.mark.parametrize("command", READERS, ids=[" ".join(c) for c in READERS])
@pytest.mark.parametrize("content", ["other-tables", "empty-file"])
def test_a_reading_command_leaves_a_foreign_database_as_it_was(command, content, tmp_path):
    db = tmp_path / "f.db"
    another_application(db) if content == "other-tables" else db.write_bytes(b"")
    before = fingerprint(db)
    args = [a.replace("{tmp}", str(tmp_path)) for a in command]
    result = CliRunner().invoke(main, [*args, "--storage", str(db)])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    last = result.output.strip().splitlines()[-1]
    assert "is not an autotune results database" in last, result.output
    assert ("it holds users" if content == "other-tables" else "it is empty") in last
    assert fingerprint(db) == before
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_run_refuses_to_add_tables_beside_another_applications(tmp_path, synthetic_gpu):
    db = another_application(tmp_path / "f.db")
    before = fingerprint(db)
    result = CliRunner().invoke(main, [*RUN, "--storage", str(db)])
    assert result.exit_code == 1, result.output
    assert "holds tables of another application (users)" in result.output
    assert "--share-database" in result.output.strip().splitlines()[-1]
    assert fingerprint(db) == before


def test_run_with_share_database_keeps_the_other_tables(tmp_path, synthetic_gpu):
    db = another_application(tmp_path / "f.db")
    result = CliRunner().invoke(main, [*RUN, "--storage", str(db), "--share-database"])
    assert result.exit_code == 0, result.output
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT name FROM users").fetchall() == [("ada",)]
        assert con.execute("SELECT count(*) FROM evaluations").fetchone()[0] > 0
    assert CliRunner().invoke(main, ["best", "--storage", str(db)]).exit_code == 0


def test_our_own_database_is_still_opened_by_readers_and_writers(tmp_path) -> None:
    db = tmp_path / "r.db"
    Store(db).close()
    Store(db, create=False).close()
    Store(db).close()  # our tables are not "another application's"
    with pytest.raises(StoreError, match="not an autotune results database"):
        Store(another_application(tmp_path / "f.db"), create=False)


def test_a_run_that_finds_no_gpu_leaves_no_results_file(tmp_path, monkeypatch) -> None:
    def no_gpu(index=0):
        raise NoGpu("CUDA driver not found")

    monkeypatch.setattr(autotune.gpu.evaluator, "GpuEvaluator", no_gpu)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, RUN)  # the default storage, results/autotune.db
    assert result.exit_code == 1, result.output
    assert "no usable CUDA GPU" in result.output
    assert list(tmp_path.iterdir()) == []
