"""A time limit that leaves studies short of their budget is said at the end of the run, with
how many, since the same command resumes them (the tuner, `run` and `tune-model` alike)."""

from __future__ import annotations

import time

from click.testing import CliRunner

from autotune.cli.app import main
from autotune.cli.progress import time_limit_note
from autotune.families.direct_naive import DirectNaive
from autotune.model.problem import ConvProblem
from autotune.model.space import DeviceLimits
from autotune.store import Store
from autotune.tuning.runners import GpuRunner
from autotune.tuning.studies import plan_studies
from autotune.tuning.tuner import Tuner
from tests.conftest import SyntheticEvaluator

SHAPES = (ConvProblem(N=29, K=5, C=7, F=9), ConvProblem(N=31, K=3, C=5, F=8))


def test_the_tuner_counts_the_studies_its_time_limit_left_short(compiler) -> None:
    studies, _ = plan_studies([(DirectNaive(), p) for p in SHAPES], DeviceLimits())
    store = Store("sqlite://")

    def tuner() -> Tuner:
        return Tuner(GpuRunner(compiler, SyntheticEvaluator(lambda d: 1.0)), store)

    first = tuner().run(studies[:1], 2)  # the first study's budget spent
    assert first.evaluated == 2 and first.short == 0
    # The deadline already past: the first has nothing to go, the second is short.
    late = tuner().run(studies, 2, time_limit_s=1e-9)
    assert late.evaluated == 0 and late.short == 1
    done = tuner().run(studies, 2, time_limit_s=3600)
    assert done.evaluated == 2 and done.short == 0


def test_the_note_says_how_many_and_that_the_command_resumes() -> None:
    assert time_limit_note(0) == ""
    assert time_limit_note(1) == (
        "; the time limit left a study short of the budget: the same command resumes"
    )
    assert "left 3 studies short" in time_limit_note(3)


def test_run_says_its_time_limit_left_studies_short(tmp_path, monkeypatch) -> None:
    import autotune.gpu.evaluator

    def slow(defines) -> float:
        time.sleep(0.3)
        return 1.0

    evaluator = SyntheticEvaluator(slow)
    monkeypatch.setattr(autotune.gpu.evaluator, "GpuEvaluator", lambda index=0: evaluator)
    shapes = [arg for p in SHAPES for arg in ("--shape", p.key)]
    args = ["run", "--family", "direct_naive", *shapes, "--budget", "20", "--time-limit", "1"]
    result = CliRunner().invoke(
        main, [*args, "--storage", str(tmp_path / "t.db"), "--cache-dir", str(tmp_path / "c")]
    )
    assert result.exit_code == 0, result.output
    assert "the time limit left 2 studies short of the budget: the same command resumes" in (
        result.stderr
    )
