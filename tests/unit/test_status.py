"""`autotune status` tells a run that shows signs of life from one that ended without saying so
(killed with SIGKILL, crashed, its machine lost), which it showed as running forever."""

from __future__ import annotations

import sqlite3
import time

from click.testing import CliRunner

from autotune.cli.app import main
from autotune.model.problem import ConvProblem
from autotune.model.records import Measurement
from autotune.model.space import Config
from autotune.store import Store, StudyClaim
from tests.conftest import SyntheticEvaluator

PROBLEM = ConvProblem(N=9, K=3, C=1, F=2)


def test_status_calls_an_unfinished_run_without_signs_of_life_silent(tmp_path) -> None:
    db = tmp_path / "r.db"
    with Store(db) as store:
        device_id = store.register_device(SyntheticEvaluator(lambda d: 1.0).device)
        killed, expired, claiming, recording, fresh, done = (
            store.start_run(device_id, f"autotune run # {name}", {})
            for name in ("killed", "expired", "claiming", "recording", "fresh", "done")
        )
        now = time.time()
        store.claim(device_id, "direct_naive", "A", StudyClaim(expired, "h", 1, now - 60), now)
        store.claim(device_id, "direct_naive", "B", StudyClaim(claiming, "h", 2, now + 600), now)
        config = Config.of({"BLOCK_X": 8, "BLOCK_Y": 4, "FILTER_IN_CONST": 0})
        m = Measurement.from_samples([1.0])
        store.record(recording, device_id, "direct_naive", PROBLEM, config, m, PROBLEM.flops)
        store.finish_run(done)
    with sqlite3.connect(db) as con:  # all but the fresh one started 37 hours ago
        con.execute(
            "UPDATE runs SET started_at = datetime('now', '-37 hours') WHERE id != ?", (fresh,)
        )

    result = CliRunner().invoke(main, ["status", "--all", "--storage", str(db)])
    assert result.exit_code == 0, result.output
    states = {}
    runs_table = result.output.split("\n\n")[0]  # the claims held come after it
    for line in runs_table.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) > 3 and cells[0].isdigit():
            states[int(cells[0])] = cells[3]
    assert states == {
        killed: "silent",
        expired: "silent",
        claiming: "running",
        recording: "running",
        fresh: "running",
        done: "finished",
    }
    assert "silent: unfinished, yet no live claim and nothing recorded for 5 min" in result.output
