"""The README's own commands, run exactly as written (not through `python -m`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_bare_pytest_collects_tests_that_import_their_helpers() -> None:
    # `python -m pytest` puts the working directory on sys.path and hides a missing package;
    # the `pytest` script the README runs does not. These files import tests.conftest,
    # tests.campaign_worker and tests.fault_family.
    pytest_script = Path(sys.executable).with_name("pytest")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    files = [
        "tests/nvrtc/test_cli.py",
        "tests/system/test_kill_resume.py",
        "tests/nvrtc/test_fault_family.py",
    ]
    done = subprocess.run(
        [str(pytest_script), "--collect-only", "-q", "-p", "no:cacheprovider", *files],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def test_what_commands_write_under_results_is_ignored_by_git() -> None:
    # `run --gpus` writes its workers' logs there; a database named there, and its WAL files.
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    paths = [
        "results/logs/run-20261124-050000/gpu0.log",
        "results/autotune.db",  # results are committed as campaign files, never as a database
        "results/autotune.db-wal",
    ]
    done = subprocess.run(["git", "check-ignore", *paths], cwd=ROOT, capture_output=True, text=True)
    assert done.stdout.split() == paths, done.stderr
