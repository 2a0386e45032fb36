"""`autotune bench plan-choice`: leave-one-shape-out scoring of the plan choice (no GPU)."""

from __future__ import annotations

import csv
import math

from click.testing import CliRunner

from autotune.bench import bench
from autotune.bench.plan_choice import Pick, Scored, score, set_of, summarise
from autotune.families import FAMILIES, kernel_digests
from autotune.model.problem import ConvProblem
from tests.unit.test_runtime_lookup import LIMITS, Synthetic, config_of
from tests.unit.test_runtime_ranking import FIVE, ONE, UNSEEN, record_split


def tiny(tmp_path) -> Synthetic:
    """The 1x1/5x5 split, and the unseen 1x1 shape stored too: implicit_gemm 1.25x faster;
    every row of the current code (the command reads only those)."""
    synthetic = Synthetic(tmp_path / "tiny.db")
    record_split(synthetic)
    synthetic.record("implicit_gemm", UNSEEN, config_of("implicit_gemm", UNSEEN), 0.8)
    synthetic.record("chen_general", UNSEEN, config_of("chen_general", UNSEEN), 1.0)
    synthetic.store.backfill_digests(kernel_digests(FAMILIES))
    return synthetic


def test_each_rule_is_scored_by_its_familys_time_over_the_best(tmp_path):
    scored = {s.problem.key: s for s in score(tiny(tmp_path).catalogue(), LIMITS)}
    assert set(scored) == {p.key for p in (*FIVE, *ONE, UNSEEN)}
    unseen = scored[UNSEEN.key]
    assert unseen.measured == {"implicit_gemm": 0.8, "chen_general": 1.0}
    assert unseen.best_family == "implicit_gemm"
    # The former rule takes the nearest (5x5) shape's winner: 1.25x the best on this shape.
    assert unseen.picks["nearest-shape"] == Pick("chen_general", 1, 1.25)
    assert unseen.picks["evidence"] == Pick("implicit_gemm", 1, 1.0)


def test_summaries_count_the_right_picks_and_the_worst():
    def row(key_n: int, old: float, new: float) -> Scored:
        problem = ConvProblem(N=key_n, K=3, C=8, F=8)
        picks = {"nearest-shape": Pick("a", 1, old), "evidence": Pick("b", 2, new)}
        return Scored(problem, {"a": 1.0, "b": 1.0}, picks)

    rows = [row(8, 1.0, 1.0), row(9, 2.0, 1.0), row(10, 1.0, math.nan)]
    old = summarise(rows, "nearest-shape")
    assert (old.shapes, old.right, old.first, old.median, old.worst) == (3, 2, 3, 1.0, 2.0)
    assert old.geomean == 2.0 ** (1 / 3)
    assert old.worst_shape == rows[1].problem.key
    new = summarise(rows, "evidence")
    # A shape the rule served from no measured family is its worst.
    assert (new.right, new.first, new.worst, new.worst_shape) == (
        2,
        0,
        math.inf,
        rows[2].problem.key,
    )


def test_a_whole_set_is_left_out_together(tmp_path):
    full = tiny(tmp_path).catalogue()
    unit = set_of({"ones": [*ONE, UNSEEN]})
    scored = {s.problem.key: s for s in score(full, LIMITS, unit=unit)}
    # Without any 1x1 shape, nothing says implicit_gemm is fast on them: both rules miss.
    assert scored[UNSEEN.key].picks["evidence"].family == "chen_general"
    assert scored[UNSEEN.key].picks["nearest-shape"].ratio == 1.25


def test_the_command_writes_its_table_and_csv(tmp_path):
    synthetic = tiny(tmp_path)
    synthetic.store.close()
    out = tmp_path / "bench"
    args = ["plan-choice", "--storage", str(tmp_path / "tiny.db"), "--output", str(out)]
    result = CliRunner().invoke(bench, [*args, "--preview-set", "smoke"])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader((out / "plan_choice.csv").open()))
    assert {r["left_out"] for r in rows} == {"shape", "set"}
    mine = next(r for r in rows if r["shape"] == UNSEEN.key and r["left_out"] == "shape")
    assert (mine["nearest-shape_family"], mine["nearest-shape_ratio"]) == ("chen_general", "1.25")
    assert (mine["evidence_family"], mine["evidence_ratio"]) == ("implicit_gemm", "1.0")
    text = (out / "plan_choice.md").read_text()
    assert "scores the choice of family" in text
    assert "autotune run --shapes resnet50" in text
    assert "N=29,K=5,C=7,F=9" in text  # a smoke shape, not stored: each rule's pick shown


def test_bad_input_is_one_line(tmp_path):
    runner = CliRunner()
    missing = runner.invoke(bench, ["plan-choice", "--storage", str(tmp_path / "none.db")])
    assert missing.exit_code != 0 and "Traceback" not in missing.output
    synthetic = tiny(tmp_path)
    synthetic.store.close()
    args = ["plan-choice", "--storage", str(tmp_path / "tiny.db"), "--device", "Other GPU"]
    other = runner.invoke(bench, args)
    assert other.exit_code != 0 and "Other GPU" in other.output
    unknown = runner.invoke(bench, [*args[:3], "--preview-set", "alexnet_fc"])
    assert unknown.exit_code != 0 and "alexnet_fc" in unknown.output
