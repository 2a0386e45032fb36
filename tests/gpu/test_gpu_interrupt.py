"""On a CUDA device: Ctrl-C or SIGTERM at any moment of a real run (GPU worker starting, the
ceilings and cuDNN baseline, compiling, tuning) ends `autotune run` within 10 s, cleanly."""

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

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
MOMENTS = 6
RUN = ["run", "--family", "chen_general", "--shapes", "general", "--budget", "40"]


@pytest.mark.parametrize("moment", range(MOMENTS))
def test_a_signal_at_any_moment_of_a_gpu_run_ends_it_within_10_s(tmp_path, moment) -> None:
    rng = random.Random(100 + moment)
    signum = (signal.SIGINT, signal.SIGTERM)[moment % 2]
    db = tmp_path / "r.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "autotune", *RUN, "--storage", str(db)]
        + ["--cache-dir", str(tmp_path / "cubins")],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # a group of its own, as a terminal's foreground job
    )
    delay = rng.uniform(1.0, 25.0)
    time.sleep(delay)
    sent = time.monotonic()
    if signum == signal.SIGINT:
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches every process of the group
    else:
        proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    took = time.monotonic() - sent
    stderr = proc.stderr.read().decode()
    print(f"signal {signum} at {delay:.1f} s: exit {code}, {took:.1f} s after the signal")
    assert took < 10, f"exited {took:.1f} s after the signal\n{stderr[-2000:]}"
    assert "Traceback" not in stderr, stderr
    assert code in (128 + signum, -signum, 0), stderr
    if db.exists():  # nothing half-written: every claim released, the database sound
        with sqlite3.connect(db) as con:
            assert con.execute("SELECT COUNT(*) FROM claims").fetchone() == (0,)
            assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
