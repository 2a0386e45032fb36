"""kill -9 of a running campaign loses nothing finished and repeats nothing finished."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autotune.gpu.nvrtc_library import CompilerUnavailable, nvrtc_version
from tests.campaign_worker import evaluated

# Campaigns in subprocesses killed and resumed: out of the quick loop (-m 'not slow').
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
KILLS = 20  # the acceptance: kill -9 at 20 random moments
WORKER = [sys.executable, "-m", "tests.campaign_worker"]


def _campaign(db: Path, cache: Path, log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [*WORKER, str(db), str(cache), str(log), "--two-studies"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _finished(db: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(db) as con:
        return con.execute(
            "SELECT family, problem_key, config FROM evaluations ORDER BY id"
        ).fetchall()


def _evaluated(log: Path) -> list[str]:
    return [defines for _, defines in evaluated(log)]


@pytest.fixture(scope="module")
def compiled_cache(tmp_path_factory) -> Path:
    """One uninterrupted run first: the reference result, and a warm cubin cache so that the
    killed runs spend their time evaluating rather than compiling."""
    try:
        nvrtc_version()
    except CompilerUnavailable as err:
        pytest.skip(str(err))
    return tmp_path_factory.mktemp("cubins")


def test_kill_9_at_random_moments_then_resume(tmp_path, compiled_cache) -> None:
    whole_db, whole_log = tmp_path / "whole.db", tmp_path / "whole.log"
    proc = _campaign(whole_db, compiled_cache, whole_log)
    assert proc.wait(timeout=600) == 0, proc.stderr.read().decode()
    began = time.monotonic()
    proc = _campaign(tmp_path / "timed.db", compiled_cache, tmp_path / "timed.log")
    assert proc.wait(timeout=600) == 0, proc.stderr.read().decode()
    whole_s = time.monotonic() - began  # with a warm cubin cache, as the killed runs have
    expected = sorted(_finished(whole_db))
    assert len(expected) == len(_evaluated(whole_log)) > 20

    db, log = tmp_path / "killed.db", tmp_path / "killed.log"
    rng = random.Random(1)
    kills = 0
    for _ in range(KILLS):
        proc = _campaign(db, compiled_cache, log)
        # Anywhere from start-up (store being created) to well inside what is left; short
        # enough on average that the campaign survives all 20 kills before it finishes.
        time.sleep(rng.uniform(0.01, 0.12) * whole_s)
        if proc.poll() is not None:
            break
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        kills += 1
    proc = _campaign(db, compiled_cache, log)
    assert proc.wait(timeout=600) == 0, proc.stderr.read().decode()
    assert kills == KILLS  # every kill landed on a running campaign

    finished = _finished(db)
    assert sorted(finished) == expected  # nothing lost, nothing stored twice
    evaluated = _evaluated(log)
    # Only an evaluation in flight at a kill may run again: at most one per kill.
    assert len(evaluated) - len(set(evaluated)) <= kills
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
