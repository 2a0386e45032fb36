"""A password in --storage is never shown or stored: header line, messages, runs.command and
`autotune status` (which anyone who can read the database may run) mask it."""

from __future__ import annotations

import sqlite3

import pytest
from click.testing import CliRunner

import autotune.gpu.evaluator
import autotune.store
import autotune.tuning.session
from autotune.cli.app import main
from autotune.store import Store, hide_passwords
from tests.conftest import SyntheticEvaluator

SECRET = "s3cr3t-Pa55"
URL = f"postgresql+psycopg://tuner:{SECRET}@db-host:5432/autotune"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (URL, "postgresql+psycopg://tuner:***@db-host:5432/autotune"),
        (f"run --storage '{URL}' --budget 3", "run --storage 'postgresql+psycopg://tuner:***@"),
        (f"--storage=postgresql://u:{SECRET}@h/d?host=/run/pg", "--storage=postgresql://u:***@h/d"),
        (f"postgresql://u:a@b{SECRET}@h/d", "postgresql://u:***@h/d"),  # an @ in the password
        ("postgresql://tuner@db-host/autotune", "postgresql://tuner@db-host/autotune"),
        ("sqlite:///results/autotune.db", "sqlite:///results/autotune.db"),
    ],
)
def test_hide_passwords(text, shown) -> None:
    assert shown in hide_passwords(text)
    assert SECRET not in hide_passwords(text)


def test_run_and_status_never_show_the_password(tmp_path, monkeypatch) -> None:
    db = tmp_path / "r.db"
    # The PostgreSQL URL leads to an SQLite file: what is under test is what is shown and stored.
    real_store = Store
    monkeypatch.setattr(autotune.store, "Store", lambda url, **kw: real_store(db, **kw))
    monkeypatch.setattr(autotune.tuning.session, "Store", lambda url, **kw: real_store(db, **kw))
    monkeypatch.setattr(
        autotune.gpu.evaluator, "GpuEvaluator", lambda index=0: SyntheticEvaluator(lambda d: 1.0)
    )
    args = ["run", "--family", "direct_naive", "--shape", "N=9,K=3,C=1,F=2", "--no-baseline"]
    args += ["--budget", "2", "--storage", URL]
    monkeypatch.setattr("sys.argv", ["autotune", *args])  # what runs.command is made of
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "storage postgresql+psycopg://tuner:***@db-host" in result.output
    assert SECRET not in result.output
    with sqlite3.connect(db) as con:
        commands = [row[0] for row in con.execute("SELECT command FROM runs")]
        # A run stored by an earlier autotune, with the password in its command.
        con.execute(
            "INSERT INTO runs (device_id, started_at, command, versions, host) "
            "VALUES (1, '2026-11-23 10:00:00', ?, '{}', 'node1')",
            (f"autotune run --storage {URL}",),
        )
    assert commands and all("tuner:***@" in c and SECRET not in c for c in commands)
    shown = CliRunner().invoke(main, ["status", "--all", "--storage", URL])
    assert shown.exit_code == 0, shown.output
    assert "tuner:***@db-host" in shown.output
    assert SECRET not in shown.output


def test_an_unreachable_database_is_named_without_its_password(tmp_path) -> None:
    url = f"postgresql://tuner:{SECRET}@127.0.0.1:1/autotune"
    result = CliRunner().invoke(main, ["best", "--storage", url])
    assert result.exit_code == 1
    assert "postgresql://tuner:***@127.0.0.1:1/autotune" in result.output
    assert SECRET not in result.output
