"""SIGTERM ends a run the way Ctrl-C does: studies released, the run's end recorded, exit 143."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autotune.cli.interrupt import (
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    exit_code,
    terminate_as_interrupt,
)
from autotune.gpu.compiler import CompilerUnavailable, nvrtc_version

ROOT = Path(__file__).resolve().parents[2]


def test_sigterm_inside_the_block_is_a_keyboard_interrupt_and_the_old_handler_returns() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), terminate_as_interrupt() as received:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler interrupts this at once
    assert received == [signal.SIGTERM]
    assert exit_code(received) == EXIT_TERMINATED
    assert exit_code([]) == EXIT_INTERRUPTED
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.slow  # a campaign in a subprocess
def test_a_terminated_campaign_releases_its_studies_and_records_its_end(tmp_path: Path) -> None:
    try:
        nvrtc_version()
    except CompilerUnavailable as err:
        pytest.skip(str(err))
    db, log = tmp_path / "t.db", tmp_path / "t.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.campaign_worker", str(db), str(tmp_path), str(log)]
        + ["--two-studies"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    while not (log.exists() and log.read_text().count("\n") >= 3):  # mid-campaign
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline, "the campaign never started evaluating"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == EXIT_TERMINATED, proc.stderr.read().decode()
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT COUNT(*) FROM claims").fetchone() == (0,)
        assert con.execute("SELECT COUNT(*) FROM runs WHERE finished_at IS NULL").fetchone() == (0,)
        assert con.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0] >= 2
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
